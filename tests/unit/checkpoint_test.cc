// Checkpoint loading: formats, name layouts, sharding, and a clear error naming the tensor and
// the file for every missing, misshapen or mistyped tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "engine/model/model.h"
#include "engine/model/weights.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using testing::RewriteCheckpoint;
using testing::TempDir;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TinySpec spec;
    spec.quantize = "fp8-fp4";
    ASSERT_TRUE(MakeTinyCheckpoint(spec, dir_.path()).ok());
  }
  Status LoadStatus() {
    auto ck = LoadCheckpoint(dir_.path());
    return ck.ok() ? Status::Ok() : ck.status();
  }
  TempDir dir_;
};

TEST_F(CheckpointTest, LoadsReleasedFormats) {
  auto ck = LoadCheckpoint(dir_.path());
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  const ModelWeights& w = (*ck)->weights;
  EXPECT_EQ((*ck)->naming, "official");
  EXPECT_EQ(w.embed.format, WeightFormat::kBF16);
  EXPECT_EQ(w.layers[0].attn.wq_a.format, WeightFormat::kFp8Block);
  EXPECT_EQ(w.layers[0].attn.wq_a.block_out, 128);
  EXPECT_EQ(w.layers[4].ffn.experts[3].w2.format, WeightFormat::kFp4Block);
  EXPECT_EQ(w.layers[4].ffn.experts[3].w2.in, 64);
  EXPECT_EQ(w.layers[2].attn.compressor.wkv.format, WeightFormat::kBF16);
  EXPECT_TRUE(w.layers[2].attn.has_indexer);
  EXPECT_FALSE(w.layers[3].attn.has_indexer);
  EXPECT_EQ(w.layers[3].attn.compressor.ape.size(), 128u * 64);
  EXPECT_EQ(w.layers[1].ffn.tid2eid.size(), 512u * 2);
  EXPECT_TRUE(w.layers[3].ffn.tid2eid.empty());
  EXPECT_EQ(w.layers[3].ffn.gate_bias.size(), 8u);
  EXPECT_TRUE(w.has_mtp);
  EXPECT_TRUE((*ck)->warnings.empty());
}

TEST_F(CheckpointTest, MissingTensorIsNamed) {
  RewriteCheckpoint(dir_.path(), [](std::string& n, DType&, auto&, auto&) {
    return n != "layers.3.attn.compressor.ape";
  });
  Status st = LoadStatus();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'layers.3.attn.compressor.ape' is missing"), std::string::npos)
      << st.message();
}

TEST_F(CheckpointTest, WrongShapeNamesTensorFileAndShapes) {
  RewriteCheckpoint(dir_.path(), [](std::string& n, DType&, std::vector<int64_t>& shape,
                                    std::vector<uint8_t>& bytes) {
    if (n == "layers.1.attn.attn_sink") {
      shape = {3};
      bytes.resize(12);
    }
    return true;
  });
  Status st = LoadStatus();
  EXPECT_NE(st.message().find("layers.1.attn.attn_sink"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("model.safetensors"), std::string::npos);
  EXPECT_NE(st.message().find("[3]"), std::string::npos);
  EXPECT_NE(st.message().find("expected [4]"), std::string::npos);
}

TEST_F(CheckpointTest, QuantisedWeightWithoutScaleIsAnError) {
  RewriteCheckpoint(dir_.path(), [](std::string& n, DType&, auto&, auto&) {
    return n != "layers.0.attn.wq_b.scale";
  });
  Status st = LoadStatus();
  EXPECT_NE(st.message().find("layers.0.attn.wq_b.scale"), std::string::npos) << st.message();
}

TEST_F(CheckpointTest, WrongDtypeIsAnError) {
  RewriteCheckpoint(dir_.path(), [](std::string& n, DType& dt, auto&, std::vector<uint8_t>& b) {
    if (n == "norm.weight") {  // BF16 [192] -> I32 [192]
      dt = DType::kI32;
      b.resize(b.size() * 2);
    }
    return true;
  });
  Status st = LoadStatus();
  EXPECT_NE(st.message().find("'norm.weight'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("I32"), std::string::npos);
}

TEST_F(CheckpointTest, HashTableOutOfRangeIsAnError) {
  RewriteCheckpoint(dir_.path(), [](std::string& n, DType&, auto&, std::vector<uint8_t>& b) {
    if (n == "layers.0.ffn.gate.tid2eid") {
      const int64_t bad = 8;
      std::memcpy(b.data() + 16, &bad, 8);
    }
    return true;
  });
  Status st = LoadStatus();
  EXPECT_NE(st.message().find("expert id 8"), std::string::npos) << st.message();
}

TEST_F(CheckpointTest, TruncatedFileIsDataLossNamingTheFile) {
  const std::string path = dir_ / "model.safetensors";
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  Status st = LoadStatus();
  EXPECT_EQ(st.code(), ErrorCode::kDataLoss);
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
}

TEST_F(CheckpointTest, DeclaredMtpWithoutTensorsLoadsWithAWarning) {
  RewriteCheckpoint(dir_.path(),
                    [](std::string& n, DType&, auto&, auto&) { return n.rfind("mtp.", 0) != 0; });
  auto ck = LoadCheckpoint(dir_.path());
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_FALSE((*ck)->weights.has_mtp);
  ASSERT_EQ((*ck)->warnings.size(), 1u);
  EXPECT_NE((*ck)->warnings[0].find("MTP"), std::string::npos);
}

TEST_F(CheckpointTest, PartialMtpBlockIsAnError) {
  RewriteCheckpoint(dir_.path(),
                    [](std::string& n, DType&, auto&, auto&) { return n != "mtp.0.hnorm.weight"; });
  EXPECT_NE(LoadStatus().message().find("mtp.0.hnorm.weight"), std::string::npos);
}

TEST_F(CheckpointTest, ShardedCheckpointMatchesSingleFile) {
  TempDir sharded;
  SafetensorsWriter a, b;
  std::string index = "{\"metadata\": {}, \"weight_map\": {";
  {
    auto store = TensorStore::OpenDir(dir_.path());
    ASSERT_TRUE(store.ok());
    bool first = true;
    for (const auto& [name, t] : store->all()) {
      const bool in_a = name.rfind("layers.", 0) == 0;
      (in_a ? a : b)
          .Add(name, t->dtype, t->shape, std::vector<uint8_t>(t->data, t->data + t->nbytes));
      index += std::string(first ? "" : ", ") + "\"" + name + "\": \"" +
               (in_a ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors") +
               "\"";
      first = false;
    }
  }
  index += "}}";
  ASSERT_TRUE(a.Write(sharded / "model-00001-of-00002.safetensors").ok());
  ASSERT_TRUE(b.Write(sharded / "model-00002-of-00002.safetensors").ok());
  testing::WriteFile(sharded / "model.safetensors.index.json", index);
  std::filesystem::copy_file(dir_ / "config.json", sharded / "config.json");
  auto one = LoadCheckpoint(dir_.path()), two = LoadCheckpoint(sharded.path());
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ((*two)->store->file_count(), 2u);
  auto be = MakeCpuBackend(1);
  Model m1(**one, *be, Numerics::kExact), m2(**two, *be, Numerics::kExact);
  std::vector<int32_t> tokens = {3, 1, 4, 1, 5, 9, 2, 6};
  std::vector<float> l1(8 * 512), l2(8 * 512);
  auto s1 = m1.NewSequence(), s2 = m2.NewSequence();
  ASSERT_TRUE(m1.Forward(s1, tokens, l1.data(), nullptr).ok());
  ASSERT_TRUE(m2.Forward(s2, tokens, l2.data(), nullptr).ok());
  EXPECT_EQ(l1, l2);
}

// V4-Flash-Base's layout: FP8 experts with float32 block scales. Its logits must equal those of
// the same weights written dequantised as F32.
TEST(CheckpointFormats, Fp8ExpertsWithFloatScalesMatchTheirDequantisedWeights) {
  TempDir fp8, f32;
  TinySpec spec;
  spec.quantize = "fp8";
  ASSERT_TRUE(MakeTinyCheckpoint(spec, fp8.path()).ok());
  auto ck = LoadCheckpoint(fp8.path());
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  const LinearWeight& w2 = (*ck)->weights.layers[3].ffn.experts[1].w2;
  EXPECT_EQ(w2.format, WeightFormat::kFp8Block);
  EXPECT_EQ(w2.scale_dtype, DType::kF32);
  EXPECT_EQ((*ck)->config.expert_dtype, "fp8");
  // The F32 twin: every FP8 tensor replaced by its dequantised values, scales dropped.
  std::filesystem::copy_file(fp8 / "config.json", f32 / "config.json");
  std::filesystem::copy_file(fp8 / "model.safetensors", f32 / "model.safetensors");
  RewriteCheckpoint(f32.path(), [&](std::string& n, DType& dt, std::vector<int64_t>& shape,
                                    std::vector<uint8_t>& bytes) {
    if (n.size() > 6 && n.compare(n.size() - 6, 6, ".scale") == 0) return false;
    if (dt != DType::kF8E4M3) return true;
    const std::string base = n.substr(0, n.size() - 7);
    const TensorView* scale = (*ck)->store->Find(base + ".scale");
    LinearWeight lw;
    lw.format = WeightFormat::kFp8Block;
    lw.out = shape[0];
    lw.in = shape[1];
    lw.data = bytes.data();
    lw.scale = scale->data;
    lw.scale_dtype = DType::kF32;
    lw.block_out = lw.block_in = 128;
    std::vector<uint8_t> out(shape[0] * shape[1] * 4);
    for (int64_t r = 0; r < shape[0]; ++r) {
      DequantizeRow(lw, r, reinterpret_cast<float*>(out.data()) + r * shape[1]);
    }
    bytes = std::move(out);
    dt = DType::kF32;
    return true;
  });
  auto plain = LoadCheckpoint(f32.path());
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  auto be = MakeCpuBackend(1);
  Model a(**ck, *be, Numerics::kExact), b(**plain, *be, Numerics::kExact);
  std::vector<int32_t> tokens = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  std::vector<float> la(10 * 512), lb(10 * 512);
  auto sa = a.NewSequence(), sb = b.NewSequence();
  ASSERT_TRUE(a.Forward(sa, tokens, la.data(), nullptr).ok());
  ASSERT_TRUE(b.Forward(sb, tokens, lb.data(), nullptr).ok());
  EXPECT_EQ(la, lb);
}

TEST_F(CheckpointTest, MissingConfigIsNotFound) {
  std::filesystem::remove(dir_ / "config.json");
  Status st = LoadStatus();
  EXPECT_EQ(st.code(), ErrorCode::kNotFound);
  EXPECT_NE(st.message().find("config.json"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
