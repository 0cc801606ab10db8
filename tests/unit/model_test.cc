// Behaviour of the V4 forward on random tiny checkpoints: split invariance, thread invariance,
// compressor emission, window and compressed-row visibility, reference-numerics rounding, and
// input validation.
#include "engine/model/model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/model/quant.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using testing::TempDir;

std::vector<int32_t> Tokens(int n, int vocab, int salt = 0) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 7919 + 13 + salt * 101) % vocab;
  return t;
}

class ModelTest : public ::testing::Test {
 protected:
  std::unique_ptr<Checkpoint> Make(const TinySpec& spec) {
    dirs_.emplace_back(std::make_unique<TempDir>());
    EXPECT_TRUE(MakeTinyCheckpoint(spec, dirs_.back()->path()).ok());
    auto ck = LoadCheckpoint(dirs_.back()->path());
    EXPECT_TRUE(ck.ok()) << ck.status().ToString();
    return std::move(ck).value();
  }

  static std::vector<float> Logits(Model& m, const std::vector<int32_t>& tokens,
                                   const std::vector<int64_t>& chunks) {
    const int64_t V = m.config().vocab_size;
    std::vector<float> out(tokens.size() * V);
    SequenceState seq = m.NewSequence();
    int64_t done = 0;
    for (int64_t c : chunks) {
      EXPECT_TRUE(
          m.Forward(seq, std::span<const int32_t>(&tokens[done], c), &out[done * V], nullptr).ok());
      done += c;
    }
    return out;
  }

  std::vector<std::unique_ptr<TempDir>> dirs_;
};

TEST_F(ModelTest, AnySplitGivesBitIdenticalLogits) {
  auto ck = Make(TinySpec{});
  auto be = MakeCpuBackend(1);
  for (Numerics mode : {Numerics::kExact, Numerics::kReference}) {
    Model m(*ck, *be, mode);
    auto tokens = Tokens(270, 512);
    auto full = Logits(m, tokens, {270});
    for (std::vector<int64_t> split :
         {std::vector<int64_t>{1, 269}, {127, 1, 1, 141}, {128, 128, 14}, {3, 5, 7, 255}}) {
      EXPECT_EQ(Logits(m, tokens, split), full) << "split starting " << split[0];
    }
  }
}

TEST_F(ModelTest, ThreadCountDoesNotChangeLogits) {
  auto ck = Make(TinySpec{});
  auto be1 = MakeCpuBackend(1), be2 = MakeCpuBackend(2);
  Model m1(*ck, *be1, Numerics::kExact), m2(*ck, *be2, Numerics::kExact);
  auto tokens = Tokens(140, 512);
  EXPECT_EQ(Logits(m1, tokens, {140}), Logits(m2, tokens, {100, 40}));
}

TEST_F(ModelTest, CompressorsEmitOneRowPerCompleteWindow) {
  auto ck = Make(TinySpec{});  // layers: SWA, SWA, CSA(4), HCA(128), CSA, HCA
  auto be = MakeCpuBackend(1);
  Model m(*ck, *be, Numerics::kExact);
  SequenceState seq = m.NewSequence();
  auto tokens = Tokens(300, 512);
  std::vector<float> logits(512);
  for (int64_t p = 0; p < 300; ++p) {
    ASSERT_TRUE(
        m.Forward(seq, std::span<const int32_t>(&tokens[p], 1), logits.data(), nullptr).ok());
    const int64_t n = p + 1;
    EXPECT_EQ(seq.layers[0].n_rows(), 0);
    EXPECT_EQ(seq.layers[2].n_rows(), n / 4) << "after " << n << " tokens";
    EXPECT_EQ(seq.layers[2].index_keys.size(), n / 4);
    EXPECT_EQ(seq.layers[3].n_rows(), n / 128) << "after " << n << " tokens";
  }
  EXPECT_EQ(seq.length, 300);
}

// With one sliding-window layer a token influences exactly the next `window` positions
// (itself included); an HCA layer additionally carries it through its compressed row.
TEST_F(ModelTest, WindowAndCompressedRowVisibility) {
  for (int ratio : {0, 128}) {
    TinySpec spec;
    spec.compress_ratios = {ratio};
    spec.num_hash_layers = 0;
    spec.mtp = false;
    auto ck = Make(spec);
    auto be = MakeCpuBackend(1);
    Model m(*ck, *be, Numerics::kExact);
    auto a = Tokens(200, 512), b = a;
    b[0] = (b[0] + 1) % 512;
    auto la = Logits(m, a, {200}), lb = Logits(m, b, {200});
    auto row_differs = [&](int p) {
      return std::memcmp(&la[p * 512], &lb[p * 512], 512 * sizeof(float)) != 0;
    };
    EXPECT_TRUE(row_differs(0));
    EXPECT_TRUE(row_differs(127)) << "position 127 still sees position 0 in its window";
    if (ratio == 0) {
      EXPECT_FALSE(row_differs(128)) << "position 128's window starts at 1";
      EXPECT_FALSE(row_differs(199));
    } else {
      EXPECT_TRUE(row_differs(128)) << "HCA row 0 (tokens 0..127) is visible from position 127 on";
      EXPECT_TRUE(row_differs(199));
    }
  }
}

// In reference numerics the cached KV rows hold FP8 e4m3 values with one power-of-two scale per
// 64 non-RoPE channels, and indexer keys hold FP4 e2m1 values with one scale per 32.
TEST_F(ModelTest, ReferenceNumericsRoundsCachedRows) {
  auto ck = Make(TinySpec{});
  auto be = MakeCpuBackend(1);
  Model m(*ck, *be, Numerics::kReference);
  SequenceState seq = m.NewSequence();
  auto tokens = Tokens(160, 512);
  std::vector<float> logits(160 * 512);
  ASSERT_TRUE(m.Forward(seq, tokens, logits.data(), nullptr).ok());
  auto on_grid = [](const float* x, int n, int block, bool fp4) {
    for (int b = 0; b < n; b += block) {
      float amax = 0;
      const int end = std::min(n, b + block);
      for (int i = b; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
      if (amax == 0) continue;
      for (int i = b; i < end; ++i) {
        // Every value must be representable with the block's largest value's binade scale.
        const int e = Pow2ScaleExponent(amax, fp4 ? 6.0f : 448.0f, 0.0f);
        const float q = std::ldexp(x[i], -e);
        const float back = fp4 ? E2M1ToF32(F32ToE2M1(q)) : E4M3ToF32(F32ToE4M3(q));
        if (back != q) return false;
      }
    }
    return true;
  };
  // The RoPE part (the last 16 of 64 here) is held in bf16, as the 584-byte cache row holds it.
  auto bf16 = [](const float* x, int n) {
    for (int i = 0; i < n; ++i) {
      if (Bf16ToF32(F32ToBf16(x[i])) != x[i]) return false;
    }
    return true;
  };
  const LayerCache& csa = seq.layers[2];
  ASSERT_GT(csa.n_rows(), 0);
  for (int64_t r = 0; r < csa.n_rows(); ++r) {
    EXPECT_TRUE(on_grid(csa.rows.row(r), 64 - 16, 64, false)) << "row " << r;
    EXPECT_TRUE(bf16(csa.rows.row(r) + 48, 16)) << "row " << r;
    EXPECT_TRUE(on_grid(csa.index_keys.row(r), 32, 32, true)) << "index key " << r;
  }
  for (int s = 0; s < 128; ++s) {
    EXPECT_TRUE(on_grid(&seq.layers[0].ring[s * 64], 48, 64, false));
    EXPECT_TRUE(bf16(&seq.layers[0].ring[s * 64 + 48], 16)) << "ring slot " << s;
  }
  // And the exact mode does not round: its rows are generally off the FP8 grid.
  Model exact(*ck, *be, Numerics::kExact);
  SequenceState seq2 = exact.NewSequence();
  ASSERT_TRUE(exact.Forward(seq2, tokens, logits.data(), nullptr).ok());
  EXPECT_FALSE(on_grid(seq2.layers[2].rows.row(0), 48, 64, false));
  EXPECT_FALSE(bf16(seq2.layers[2].rows.row(0) + 48, 16));
}

// FP8 activations (3 mantissa bits) through six random layers move logits by ~10%; discrete
// indexer and router choices flip at some positions. Rounding noise, not garbage: the median
// position stays within 20% and most argmaxes agree.
TEST_F(ModelTest, ReferenceNumericsStaysCloseToExact) {
  TinySpec spec;
  spec.quantize = "fp8-fp4";
  auto ck = Make(spec);
  auto be = MakeCpuBackend(2);
  Model ex(*ck, *be, Numerics::kExact), ref(*ck, *be, Numerics::kReference);
  auto tokens = Tokens(200, 512);
  auto a = Logits(ex, tokens, {200}), b = Logits(ref, tokens, {200});
  std::vector<double> errs;
  for (int p = 0; p < 200; ++p) {
    errs.push_back(testing::MaxRowRelError(&b[p * 512], &a[p * 512], 1, 512));
  }
  std::sort(errs.begin(), errs.end());
  EXPECT_GT(errs.front(), 0.0);
  EXPECT_LT(errs[100], 0.2);
  EXPECT_GT(testing::ArgmaxAgreement(a.data(), b.data(), 200, 512), 0.5);
}

TEST_F(ModelTest, BadTokenIsRejectedWithoutTouchingTheSequence) {
  auto ck = Make(TinySpec{});
  auto be = MakeCpuBackend(1);
  Model m(*ck, *be, Numerics::kExact);
  SequenceState seq = m.NewSequence();
  std::vector<float> logits(3 * 512);
  std::vector<int32_t> bad = {1, 512, 2};
  Status st = m.Forward(seq, bad, logits.data(), nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("512"), std::string::npos);
  EXPECT_EQ(seq.length, 0);
  std::vector<int32_t> neg = {-1};
  EXPECT_EQ(m.Forward(seq, neg, logits.data(), nullptr).code(), ErrorCode::kInvalidArgument);
}

TEST_F(ModelTest, MtpNeedsTheBlock) {
  TinySpec spec;
  spec.mtp = false;
  auto ck = Make(spec);
  auto be = MakeCpuBackend(1);
  Model m(*ck, *be, Numerics::kExact);
  EXPECT_FALSE(m.has_mtp());
  SequenceState seq = m.NewSequence();
  std::vector<float> streams(4 * 192), logits(512);
  std::vector<int32_t> next = {5};
  EXPECT_EQ(m.MtpForward(seq, streams.data(), next, logits.data()).code(),
            ErrorCode::kInvalidArgument);
}

TEST(NumericsTest, ParsesModes) {
  EXPECT_EQ(*ParseNumerics("exact"), Numerics::kExact);
  EXPECT_EQ(*ParseNumerics("reference"), Numerics::kReference);
  EXPECT_FALSE(ParseNumerics("fp8").ok());
}

}  // namespace
}  // namespace deepinfer

namespace deepinfer {
namespace {

// Batch invariance: sequences of different lengths, prefill chunks and single decode tokens mixed
// in one step give exactly the logits each gets alone.
TEST(ModelBatchTest, BatchedStepsEqualSequencesAlone) {
  testing::TempDir dir;
  TinySpec spec;
  spec.quantize = "fp8-fp4";
  ASSERT_TRUE(MakeTinyCheckpoint(spec, dir.path()).ok());
  auto ck = LoadCheckpoint(dir.path());
  ASSERT_TRUE(ck.ok());
  auto be = MakeCpuBackend(2);
  Model m(**ck, *be, Numerics::kExact);
  const int V = 512, kSeqs = 5;
  std::vector<std::vector<int32_t>> toks(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    for (int i = 0; i < 140 + 37 * s; ++i) toks[s].push_back((i * 131 + s * 17 + 5) % V);
  }
  // Alone: one prefill per sequence.
  std::vector<std::vector<float>> alone(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    alone[s].resize(toks[s].size() * V);
    auto seq = m.NewSequence();
    ASSERT_TRUE(m.Forward(seq, toks[s], alone[s].data(), nullptr).ok());
  }
  // Batched: every step advances each unfinished sequence by a chunk of 1..60 tokens.
  std::vector<SequenceState> seqs;
  for (int s = 0; s < kSeqs; ++s) seqs.push_back(m.NewSequence());
  std::vector<std::vector<float>> batched(kSeqs);
  for (int s = 0; s < kSeqs; ++s) batched[s].resize(toks[s].size() * V);
  std::vector<size_t> done(kSeqs, 0);
  for (int step = 0;; ++step) {
    std::vector<BatchItem> items;
    for (int s = 0; s < kSeqs; ++s) {
      if (done[s] == toks[s].size()) continue;
      const size_t chunk = std::min<size_t>(toks[s].size() - done[s], (step * 7 + s * 13) % 60 + 1);
      items.push_back({&seqs[s], std::span<const int32_t>(&toks[s][done[s]], chunk),
                       &batched[s][done[s] * V], nullptr});
      done[s] += chunk;
    }
    if (items.empty()) break;
    ASSERT_TRUE(m.ForwardBatch(items).ok());
  }
  for (int s = 0; s < kSeqs; ++s) EXPECT_EQ(batched[s], alone[s]) << "sequence " << s;
}

TEST(ModelBatchTest, AnInvalidItemChangesNothing) {
  testing::TempDir dir;
  ASSERT_TRUE(MakeTinyCheckpoint(TinySpec{}, dir.path()).ok());
  auto ck = LoadCheckpoint(dir.path());
  auto be = MakeCpuBackend(1);
  Model m(**ck, *be, Numerics::kExact);
  auto a = m.NewSequence(), b = m.NewSequence();
  std::vector<int32_t> good = {1, 2, 3}, bad = {4, 9999};
  std::vector<float> la(3 * 512), lb(2 * 512);
  std::vector<BatchItem> items = {{&a, good, la.data(), nullptr}, {&b, bad, lb.data(), nullptr}};
  EXPECT_EQ(m.ForwardBatch(items).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(a.length, 0);
  std::vector<BatchItem> twice = {{&a, good, la.data(), nullptr}, {&a, good, la.data(), nullptr}};
  EXPECT_EQ(m.ForwardBatch(twice).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer

#include "engine/cache/prefix_cache.h"

namespace deepinfer {
namespace {

TEST(PrefixCacheTest, LongestBlockPrefixLruAndBudget) {
  testing::TempDir dir;
  ASSERT_TRUE(MakeTinyCheckpoint(TinySpec{}, dir.path()).ok());
  auto ck = LoadCheckpoint(dir.path());
  auto be = MakeCpuBackend(1);
  Model m(**ck, *be, Numerics::kExact);
  std::vector<int32_t> toks(400);
  for (int i = 0; i < 400; ++i) toks[i] = (i * 13 + 1) % 512;
  auto state_after = [&](int64_t n) {
    auto s = m.NewSequence();
    std::vector<float> logits(n * 512);
    EXPECT_TRUE(
        m.Forward(s, std::span<const int32_t>(toks.data(), n), logits.data(), nullptr).ok());
    return s;
  };
  const SequenceState s128 = state_after(128), s256 = state_after(256);
  PrefixCache cache(s128.bytes() * 4);
  cache.Insert(std::span<const int32_t>(toks.data(), 128), s128);
  cache.Insert(std::span<const int32_t>(toks.data(), 256), s256);
  cache.Insert(std::span<const int32_t>(toks.data(), 100), s128);  // not block-aligned: ignored
  EXPECT_EQ(cache.entries(), 2u);
  SequenceState got;
  EXPECT_EQ(cache.Lookup(toks, &got), 256);  // the longest
  EXPECT_EQ(got.length, 256);
  // Exactly 256 tokens: one must stay to be fed, so the 128 snapshot is used.
  EXPECT_EQ(cache.Lookup(std::span<const int32_t>(toks.data(), 256), &got), 128);
  std::vector<int32_t> other = toks;
  other[5] ^= 1;
  EXPECT_EQ(cache.Lookup(other, &got), 0);
  EXPECT_EQ(cache.hit_tokens(), 384u);
  // Resuming from a snapshot gives the logits of the full pass.
  std::vector<float> full(400 * 512), rest(144 * 512);
  auto fresh = m.NewSequence();
  ASSERT_TRUE(m.Forward(fresh, toks, full.data(), nullptr).ok());
  ASSERT_EQ(cache.Lookup(toks, &got), 256);
  ASSERT_TRUE(
      m.Forward(got, std::span<const int32_t>(toks.data() + 256, 144), rest.data(), nullptr).ok());
  EXPECT_TRUE(std::equal(rest.begin(), rest.end(), full.begin() + 256 * 512));
  // A budget of about one snapshot evicts the least recently used.
  PrefixCache small(s256.bytes() + 256 * 4);
  small.Insert(std::span<const int32_t>(toks.data(), 128), s128);
  small.Insert(std::span<const int32_t>(toks.data(), 256), s256);
  EXPECT_EQ(small.entries(), 1u);
  EXPECT_LE(small.bytes(), s256.bytes() + 256 * 4);
}

}  // namespace
}  // namespace deepinfer
