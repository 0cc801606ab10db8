// deepinfer-model end to end: make-tiny, inspect, logits (prefill and decode agree), generate,
// and clear errors with the documented exit codes for bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <tuple>
#include <vector>

#include "engine/common/npy.h"
#include "engine/model/quant.h"
#include "engine/model/weights.h"
#include "kernels/cuda_available.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using testing::TempDir;

using ToolRun = testing::CommandRun;

ToolRun Tool(const std::string& args) {
  return testing::RunCommand(std::string(DEEPINFER_BIN_DIR) + "/deepinfer-model " + args + " 2>&1");
}

class ModelToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ToolRun r = Tool("make-tiny --out " + model() + " --quantize fp8-fp4 --seed 5 --vocab 300");
    ASSERT_EQ(r.code, 0) << r.out;
  }
  std::string model() const { return dir_ / "m"; }
  TempDir dir_;
};

TEST_F(ModelToolTest, InspectSummarisesTheCheckpoint) {
  ToolRun r = Tool("inspect --model " + model());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("vocab 300  hidden 192  layers 6"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sliding/hash sliding/hash csa/hash hca csa hca"), std::string::npos);
  EXPECT_NE(r.out.find("F8_E4M3"), std::string::npos);
  EXPECT_NE(r.out.find("parameters:"), std::string::npos);
  // Experts 128 wide or more: whether their scales fold per 128 columns (kernels/fp4_e4m3.h).
  // Random weights have their exponents within a binade or two, so all 6 layers x 8 experts x 3
  // matrices fold.
  ToolRun wide = Tool("make-tiny --out " + (dir_ / "w") +
                      " --quantize fp8-fp4 --seed 5 --hidden 256 --moe-inter 128");
  ASSERT_EQ(wide.code, 0) << wide.out;
  r = Tool("inspect --model " + (dir_ / "w"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("MXFP4 expert matrices whose scales fold per 128 columns: 144 of 144"),
            std::string::npos)
      << r.out;
}

TEST_F(ModelToolTest, LogitsPrefillAndDecodeAgree) {
  std::string tokens;
  for (int i = 0; i < 40; ++i) tokens += (i ? "," : "") + std::to_string((i * 37) % 300);
  ToolRun a =
      Tool("logits --model " + model() + " --tokens " + tokens + " --out " + (dir_ / "a.npy"));
  ASSERT_EQ(a.code, 0) << a.out;
  ToolRun b =
      Tool("logits --model " + model() + " --tokens " + tokens + " --out " + (dir_ / "b.npy") +
           " --decode-from 7 --threads 2 --mtp-out " + (dir_ / "mtp.npy"));
  ASSERT_EQ(b.code, 0) << b.out;
  auto x = ReadNpy(dir_ / "a.npy"), y = ReadNpy(dir_ / "b.npy"), m = ReadNpy(dir_ / "mtp.npy");
  ASSERT_TRUE(x.ok() && y.ok() && m.ok());
  EXPECT_EQ(x->shape, (std::vector<int64_t>{40, 300}));
  EXPECT_EQ(m->shape, (std::vector<int64_t>{39, 300}));
  EXPECT_EQ(x->data, y->data);
}

// --perturb-seed moves every product one ulp: in the exact numerics the logits then differ, but
// only at fp32 rounding level (the reference numerics' FP8 rounding amplifies the same nudges:
// docs/gpu.md measures both).
TEST_F(ModelToolTest, PerturbedProductsMoveExactLogitsByRoundingOnly) {
  std::string tokens;
  for (int i = 0; i < 40; ++i) tokens += (i ? "," : "") + std::to_string((i * 37) % 300);
  const std::string base = "logits --model " + model() + " --tokens " + tokens + " --out ";
  ASSERT_EQ(Tool(base + (dir_ / "a.npy")).code, 0);
  ToolRun r = Tool(base + (dir_ / "b.npy") + " --perturb-seed 3");
  ASSERT_EQ(r.code, 0) << r.out;
  auto x = ReadNpy(dir_ / "a.npy"), y = ReadNpy(dir_ / "b.npy");
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_EQ(x->data.size(), y->data.size());
  float worst = 0, scale = 0;
  for (size_t i = 0; i < x->data.size(); ++i) {
    worst = std::max(worst, std::fabs(x->data[i] - y->data[i]));
    scale = std::max(scale, std::fabs(x->data[i]));
  }
  EXPECT_GT(worst, 0.0f);  // the products were moved
  EXPECT_LT(worst, 1e-4f * scale);
}

TEST_F(ModelToolTest, GenerateIsGreedyOverTheLogits) {
  ToolRun g = Tool("generate --model " + model() + " --tokens 5,6,7 --max-new 4");
  ASSERT_EQ(g.code, 0) << g.out;
  // The first generated id is the argmax of the prompt's last logits.
  ToolRun l = Tool("logits --model " + model() + " --tokens 5,6,7 --out " + (dir_ / "l.npy"));
  ASSERT_EQ(l.code, 0);
  auto x = ReadNpy(dir_ / "l.npy");
  const float* last = &x->data[2 * 300];
  const int argmax = static_cast<int>(std::max_element(last, last + 300) - last);
  EXPECT_EQ(g.out.find(std::to_string(argmax) + ","), 0u) << g.out;
}

TEST_F(ModelToolTest, BadInputGivesClearErrors) {
  ToolRun r = Tool("logits --model " + model() + " --tokens 1,300 --out " + (dir_ / "x.npy"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("outside the vocabulary"), std::string::npos) << r.out;
  r = Tool("logits --model " + model() + " --tokens 1,2 --out " + (dir_ / "x.npy") + " --bogus 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("unknown option '--bogus'"), std::string::npos);
  r = Tool("logits --model " + (dir_ / "nope") + " --tokens 1 --out " + (dir_ / "x.npy"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find(dir_ / "nope"), std::string::npos) << r.out;
  r = Tool("logits --model " + model() + " --tokens 1,2 --out " + (dir_ / "x.npy") +
           " --decode-from 3");
  EXPECT_EQ(r.code, 2);
  r = Tool("make-tiny --out " + (dir_ / "q") + " --quantize int3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--quantize"), std::string::npos);
  r = Tool("frobnicate");
  EXPECT_EQ(r.code, 2);
}

// --residual-gain scales exactly the weights whose outputs join the residual streams: at a power
// of two the FP8 and MXFP4 block scales absorb it, so those weights dequantise to the default
// model's times the gain, bit for bit, and every other weight is unchanged. Out of range: exit 2.
TEST_F(ModelToolTest, ResidualGainScalesTheResidualBranchWeights) {
  ToolRun r = Tool("make-tiny --out " + (dir_ / "g") +
                   " --quantize fp8-fp4 --seed 5 --vocab 300 --residual-gain 0.25");
  ASSERT_EQ(r.code, 0) << r.out;
  auto base = LoadCheckpoint(model());
  auto tame = LoadCheckpoint(dir_ / "g");
  ASSERT_TRUE(base.ok() && tame.ok());
  auto rows = [](const LinearWeight& w) {
    std::vector<float> v(w.out * w.in);
    for (int64_t o = 0; o < w.out; ++o) DequantizeRow(w, o, &v[o * w.in]);
    return v;
  };
  const LayerWeights& b = (*base)->weights.layers[2];
  const LayerWeights& t = (*tame)->weights.layers[2];
  for (const auto& [bw, tw, gain] : {std::tuple{&b.attn.wo_b, &t.attn.wo_b, 0.25f},
                                     {&b.ffn.experts[1].w2, &t.ffn.experts[1].w2, 0.25f},
                                     {&b.ffn.shared.w2, &t.ffn.shared.w2, 0.25f},
                                     {&b.attn.wq_a, &t.attn.wq_a, 1.0f},
                                     {&b.ffn.experts[1].w1, &t.ffn.experts[1].w1, 1.0f}}) {
    const std::vector<float> want = rows(*bw), got = rows(*tw);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i] * gain) << "at " << i;
  }
  r = Tool("make-tiny --out " + (dir_ / "h") + " --residual-gain 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--residual-gain"), std::string::npos) << r.out;
}

// Without a GPU (CI) --device cuda is a clear error, never a silent CPU run; with one it runs
// (its agreement with the CPU is gpu_tests' job).
TEST_F(ModelToolTest, CudaDeviceRunsOrIsAClearError) {
  ToolRun r = Tool("logits --model " + model() + " --tokens 1,2 --out " + (dir_ / "x.npy") +
                   " --device cuda");
  if (std::filesystem::exists("/dev/nvidiactl")) {
    EXPECT_EQ(r.code, 0) << r.out;
  } else {
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.out.find("--device cuda"), std::string::npos) << r.out;
  }
}

// The device forward runs the reference numerics on the GPU only; anything else is a clear error.
TEST_F(ModelToolTest, DeviceForwardFlagsAreChecked) {
  const std::string base = "logits --model " + model() + " --tokens 1,2 --out " + (dir_ / "x.npy");
  const std::string misuse = "--forward/--kernels need --device cuda and --numerics reference";
  ToolRun r = Tool(base + " --forward device");  // --device cpu
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(misuse), std::string::npos) << r.out;
  if (!CudaBuildEnabled()) return;  // then --device cuda itself is the error (test above)
  r = Tool(base + " --device cuda --numerics exact --forward device");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(misuse), std::string::npos) << r.out;
  r = Tool(base + " --device cuda --numerics reference --forward device --perturb-seed 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(misuse), std::string::npos) << r.out;
  r = Tool(base + " --device cuda --numerics reference --forward device --kernels fast");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--kernels production or cpu-order"), std::string::npos) << r.out;
  r = Tool(base + " --device cuda --numerics reference --kernels cpu-order");  // no --forward
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--kernels needs --forward device"), std::string::npos) << r.out;
  if (!std::filesystem::exists("/dev/nvidiactl")) {  // a CUDA build without a device
    r = Tool(base + " --device cuda --numerics reference --forward device");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.out.find("CUDA device"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace deepinfer
