// bench/acceptance.sh and bench/lib/compare_logits.py, the issue-7 acceptance run: without a GPU
// the script's CPU-against-CPU form must pass, and the comparison must report the error and the
// argmax agreement the two logits files have (computed here from the same files) and fail them
// against the bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "engine/common/npy.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using testing::CommandRun;
using testing::RunCommand;
using testing::TempDir;

// The command's stdout and stderr together.
CommandRun Shell(const std::string& cmd) { return RunCommand(cmd + " 2>&1"); }

class AcceptanceScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Shell("command -v python3").code != 0) GTEST_SKIP() << "no python3";
    const CommandRun r = Shell(bin_ + "/deepinfer-model make-tiny --out " + model() +
                               " --quantize fp8-fp4 --seed 9 --vocab 300");
    ASSERT_EQ(r.code, 0) << r.out;
  }
  std::string model() const { return dir_ / "m"; }
  std::string Logits(const std::string& tokens, const std::string& out) {
    const CommandRun r = Shell(bin_ + "/deepinfer-model logits --model " + model() + " --tokens " +
                               tokens + " --out " + out);
    EXPECT_EQ(r.code, 0) << r.out;
    return out;
  }
  const std::string src_ = DEEPINFER_SOURCE_DIR, bin_ = DEEPINFER_BIN_DIR;
  TempDir dir_;
};

TEST_F(AcceptanceScriptTest, PassesWithTheCpuOnBothSides) {
  const CommandRun r =
      Shell("DEVICE=cpu bash " + src_ + "/bench/acceptance.sh " + model() + " '' " + bin_);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(testing::CountOf(r.out, "PASS"), 4u) << r.out;  // two numerics, prefill and decode
  EXPECT_EQ(testing::CountOf(r.out, "FAIL"), 0u) << r.out;
  EXPECT_NE(r.out.find("max 0.00e+00  p99 0.00e+00  argmax 100.0 %"), std::string::npos) << r.out;
}

TEST_F(AcceptanceScriptTest, CompareReportsTheDifferenceAndFailsBeyondTheBound) {
  // Two different prompts: every position's logits differ.
  const std::string a = Logits("1,2,3,4,5,6,7,8,9,10", dir_ / "a.npy");
  const std::string b = Logits("11,12,13,14,15,16,17,18,19,20", dir_ / "b.npy");
  auto x = ReadNpy(a), y = ReadNpy(b);
  ASSERT_TRUE(x.ok() && y.ok());
  const int64_t rows = x->shape[0], vocab = x->shape[1];
  double worst = 0, best = INFINITY;
  for (int64_t r = 0; r < rows; ++r) {
    const float* ra = &x->data[r * vocab];
    const float* rb = &y->data[r * vocab];
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      diff = std::max(diff, std::fabs(static_cast<double>(ra[i]) - rb[i]));
      scale = std::max(scale, std::fabs(static_cast<double>(rb[i])));
    }
    worst = std::max(worst, diff / scale);
    best = std::min(best, diff / scale);
  }
  char want[96];
  std::snprintf(want, sizeof(want), "max %.2e", worst);
  const std::string compare = "python3 " + src_ + "/bench/lib/compare_logits.py " + a + " " + b;
  CommandRun r = Shell(compare);
  EXPECT_EQ(r.code, 0) << r.out;  // no bound: a report only
  EXPECT_NE(r.out.find(want), std::string::npos) << want << " in " << r.out;
  std::snprintf(want, sizeof(want), "argmax %.1f %%",
                100.0 * testing::ArgmaxAgreement(x->data.data(), y->data.data(), rows, vocab));
  EXPECT_NE(r.out.find(want), std::string::npos) << want << " in " << r.out;
  ASSERT_GT(worst, 1e-2);
  r = Shell(compare + " --bound 1e-2");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;
  // The bound holds for the largest error, not for some position's.
  ASSERT_LT(best, worst);
  r = Shell(compare + " --agree -1 --bound " + std::to_string(std::sqrt(best * worst)));
  EXPECT_EQ(r.code, 1) << r.out;
  r = Shell(compare + " --bound 1e9 --agree -1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace deepinfer
