// The CPU engine against golden logits from transformers (tests/data/golden, made on the GPU host
// by tools/reference/golden.py): full prefill, prefill-then-decode and chunked prefill at awkward
// splits, the MTP block, FP8/FP4, F32 and BF16 checkpoints, and transformers' save_pretrained
// layout.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "engine/common/npy.h"
#include "engine/model/model.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using testing::MaxRowRelError;
using testing::TempDir;

const std::string kGolden = std::string(DEEPINFER_TEST_DATA) + "/golden/";

struct GoldenCase {
  std::string name;
  TinySpec spec;
};

GoldenCase Case(const std::string& name) {
  GoldenCase c{name, {}};
  if (name == "tiny-fp8") {
    c.spec.quantize = "fp8-fp4";
    c.spec.seed = 7;
  } else if (name == "tiny-f32") {
    c.spec.seed = 3;
    c.spec.vocab = 256;
  } else if (name == "tiny-var") {
    // Other sizes everywhere, a 64-token window, index_topk above the row count, one hash layer,
    // and a max_position_embeddings that disagrees with the YaRN factor (the factor wins).
    c.spec = {.seed = 21,
              .quantize = "fp8-fp4",
              .vocab = 384,
              .hidden = 256,
              .compress_ratios = {0, 4, 128, 0, 4, 128},
              .num_hash_layers = 1,
              .mtp = true,
              .heads = 8,
              .head_dim = 128,
              .rope_dim = 32,
              .q_lora = 128,
              .o_groups = 4,
              .o_lora = 64,
              .window = 64,
              .index_heads = 16,
              .index_head_dim = 64,
              .index_topk = 512,
              .experts = 16,
              .top_k = 4,
              .moe_inter = 96,
              .max_position = 4096};
  } else {
    c.spec.quantize = "bf16";
    c.spec.seed = 11;
    c.spec.hidden = 64;
    c.spec.vocab = 128;
  }
  return c;
}

uint64_t Fnv1a64(const std::string& data) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char b : data) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    c_ = Case(GetParam());
    ASSERT_TRUE(MakeTinyCheckpoint(c_.spec, dir_.path()).ok());
    // The goldens were made from these exact bytes; a changed generator must regenerate them.
    char want[64];
    unsigned long long want_size = 0;
    ASSERT_EQ(2, std::sscanf(testing::ReadFile(kGolden + c_.name + "/checkpoint.fnv1a64").c_str(),
                             "%16s %llu", want, &want_size));
    const std::string bytes = testing::ReadFile(dir_ / "model.safetensors");
    char got[32];
    std::snprintf(got, sizeof(got), "%016llx", static_cast<unsigned long long>(Fnv1a64(bytes)));
    ASSERT_EQ(std::string(want), std::string(got)) << "make-tiny output changed; see golden README";
    ASSERT_EQ(want_size, bytes.size());

    auto ck = LoadCheckpoint(dir_.path());
    ASSERT_TRUE(ck.ok()) << ck.status().ToString();
    ck_ = std::move(ck).value();
    tokens_ = testing::ReadTokens(kGolden + c_.name + "/tokens.txt");
    auto full = ReadNpy(kGolden + c_.name + "/full.npy");
    ASSERT_TRUE(full.ok()) << full.status().ToString();
    golden_ = std::move(full).value();
    vocab_ = ck_->config.vocab_size;
    ASSERT_EQ(golden_.shape, (std::vector<int64_t>{static_cast<int64_t>(tokens_.size()), vocab_}));
  }

  // Logits for every position, feeding the tokens in chunks of the given sizes.
  std::vector<float> Run(Model& model, const std::vector<int64_t>& chunks,
                         std::vector<float>* streams = nullptr) {
    const int64_t n = static_cast<int64_t>(tokens_.size());
    const int64_t S = static_cast<int64_t>(ck_->config.hc_mult) * ck_->config.hidden_size;
    std::vector<float> logits(n * vocab_);
    if (streams) streams->assign(n * S, 0.0f);
    SequenceState seq = model.NewSequence();
    int64_t done = 0;
    for (int64_t c : chunks) {
      EXPECT_TRUE(model
                      .Forward(seq, std::span<const int32_t>(&tokens_[done], c),
                               &logits[done * vocab_], streams ? &(*streams)[done * S] : nullptr)
                      .ok());
      done += c;
    }
    EXPECT_EQ(done, n);
    return logits;
  }

  std::vector<int64_t> DecodeFrom(int64_t k) {
    std::vector<int64_t> chunks = {k};
    for (int64_t i = k; i < static_cast<int64_t>(tokens_.size()); ++i) chunks.push_back(1);
    return chunks;
  }

  void ExpectMatchesGolden(const std::vector<float>& logits, const std::string& what) {
    const int64_t n = static_cast<int64_t>(tokens_.size());
    EXPECT_LT(MaxRowRelError(logits.data(), golden_.data.data(), n, vocab_), 1e-4) << what;
    EXPECT_EQ(testing::ArgmaxAgreement(logits.data(), golden_.data.data(), n, vocab_), 1.0) << what;
  }

  GoldenCase c_;
  TempDir dir_;
  std::unique_ptr<Checkpoint> ck_;
  std::vector<int32_t> tokens_;
  NpyArray golden_;
  int64_t vocab_ = 0;
};

TEST_P(GoldenTest, PrefillDecodeAndChunksMatchTransformers) {
  auto backend = MakeCpuBackend(2);
  Model model(*ck_, *backend, Numerics::kExact);
  const int64_t n = static_cast<int64_t>(tokens_.size());
  ExpectMatchesGolden(Run(model, {n}), "full prefill");
  ExpectMatchesGolden(Run(model, DecodeFrom(n / 2)), "decode from n/2");
  ExpectMatchesGolden(Run(model, DecodeFrom(37)), "decode from 37");
  // Chunk edges inside CSA windows, on and off HCA and window boundaries.
  std::vector<int64_t> chunks = {1, 3, 128, 61};
  chunks.push_back(n - 193);
  ExpectMatchesGolden(Run(model, chunks), "chunks 1,3,128,61,rest");
}

TEST_P(GoldenTest, MtpMatchesReferenceBuiltFromTransformersModules) {
  auto backend = MakeCpuBackend(2);
  Model model(*ck_, *backend, Numerics::kExact);
  ASSERT_TRUE(model.has_mtp());
  const int64_t n = static_cast<int64_t>(tokens_.size());
  std::vector<float> streams;
  Run(model, {n}, &streams);
  auto golden = ReadNpy(kGolden + c_.name + "/mtp.npy");
  ASSERT_TRUE(golden.ok());
  ASSERT_EQ(golden->shape, (std::vector<int64_t>{n - 1, vocab_}));
  // Two MTP chunks: the block's own window ring must carry across calls.
  std::vector<float> mtp((n - 1) * vocab_);
  SequenceState seq = model.NewSequence();
  const int64_t first = 150;
  ASSERT_TRUE(
      model
          .MtpForward(seq, streams.data(), std::span<const int32_t>(&tokens_[1], first), mtp.data())
          .ok());
  const int64_t S = static_cast<int64_t>(ck_->config.hc_mult) * ck_->config.hidden_size;
  ASSERT_TRUE(model
                  .MtpForward(seq, &streams[first * S],
                              std::span<const int32_t>(&tokens_[1 + first], n - 1 - first),
                              &mtp[first * vocab_])
                  .ok());
  EXPECT_LT(MaxRowRelError(mtp.data(), golden->data.data(), n - 1, vocab_), 1e-4);
  EXPECT_EQ(testing::ArgmaxAgreement(mtp.data(), golden->data.data(), n - 1, vocab_), 1.0);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, GoldenTest,
                         ::testing::Values("tiny-fp8", "tiny-f32", "tiny-bf16", "tiny-var"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) ch = ch == '-' ? '_' : ch;
                           return s;
                         });

TEST(GoldenSavePretrained, TransformersWrittenCheckpointMatchesItsGolden) {
  TempDir dir;
  const std::string cmd = "tar xzf " + kGolden + "tiny-bf16/save_pretrained.tgz -C " + dir.path();
  ASSERT_EQ(0, std::system(cmd.c_str()));
  auto ck = LoadCheckpoint(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ((*ck)->naming, "transformers");
  EXPECT_EQ((*ck)->config.source_layout, "transformers");
  // transformers drops the MTP block on save; the loader says so instead of failing.
  EXPECT_FALSE((*ck)->weights.has_mtp);
  ASSERT_EQ((*ck)->warnings.size(), 1u);
  auto golden = ReadNpy(kGolden + "tiny-bf16/full.npy");
  ASSERT_TRUE(golden.ok());
  auto tokens = testing::ReadTokens(kGolden + "tiny-bf16/tokens.txt");
  auto backend = MakeCpuBackend(1);
  Model model(**ck, *backend, Numerics::kExact);
  const int64_t n = static_cast<int64_t>(tokens.size()), V = (*ck)->config.vocab_size;
  std::vector<float> logits(n * V);
  SequenceState seq = model.NewSequence();
  ASSERT_TRUE(model.Forward(seq, tokens, logits.data(), nullptr).ok());
  EXPECT_LT(MaxRowRelError(logits.data(), golden->data.data(), n, V), 1e-4);
}

}  // namespace
}  // namespace deepinfer
