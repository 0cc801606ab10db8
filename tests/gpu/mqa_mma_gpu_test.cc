// V4's attention on tensor cores (kernels/mqa_mma.cu through MqaMmaFp8Rows and the dispatch of
// MqaDecodeFp8Rows) against the CPU backend's SparseAttention, on fresh random 584-byte cache
// rows whose 64-value blocks sit at their own binades, outputs poisoned: with the three bf16 parts
// of the query and of the softmax weights the products are exact, and the sums stay within the
// 1e-5 the CUDA-core kernel keeps.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "kernels/cuda_available.h"
#include "kernels/forward_glue.h"
#include "kernels/kv_row.h"
#include "kernels/mqa_decode.h"
#include "kernels/ops.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;
using testing::ExpectClose;

constexpr int kHeads = 64, kDim = 512;
constexpr float kScale = 0.044194f;

// max |got - want| / (1 + |want|), what ExpectClose bounds.
double WorstError(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]) /
                                (1.0 + std::fabs(static_cast<double>(want[i]))));
  }
  return worst;
}

class MqaMmaGpuTest : public testing::RandomDataGpuTest {
 protected:
  // A pool of `total` cache rows: random values, each 64-value block at its own binade (some all
  // zero), packed on the device; `values` gets what the rows hold, unpacked.
  DeviceVector<uint8_t> Pool(int64_t total, std::vector<float>* values) {
    auto rows = Random(total * kDim);
    for (int64_t blk = 0; blk < total * kDim / 64; ++blk) {
      const float s = blk % 13 == 5 ? 0.0f : std::ldexp(1.0f, static_cast<int>(rng_() % 9) - 4);
      for (int i = 0; i < 64; ++i) rows[blk * 64 + i] *= s;
    }
    DeviceVector<float> d_rows(rows);
    auto packed = DeviceVector<uint8_t>::Poisoned(total * kernels::kKvRowBytes);
    auto unpacked = DeviceVector<float>::Poisoned(total * kDim);
    EXPECT_EQ(kernels::PackKvRows(d_rows.get(), total, packed.get(), nullptr), 0);
    EXPECT_EQ(kernels::UnpackKvRows(packed.get(), total, unpacked.get(), nullptr), 0);
    *values = unpacked.ToHost();
    return packed;
  }
  // The CPU's attention of each query over the pool rows index[offsets[t] ..].
  std::vector<float> Cpu(const std::vector<float>& q, const std::vector<float>& pool,
                         const std::vector<int32_t>& index, const std::vector<int64_t>& offsets,
                         const std::vector<float>& sinks) {
    const int64_t nq = static_cast<int64_t>(offsets.size()) - 1;
    std::vector<std::vector<const float*>> ptrs(nq);
    std::vector<AttentionQuery> queries(nq);
    for (int64_t t = 0; t < nq; ++t) {
      for (int64_t e = offsets[t]; e < offsets[t + 1]; ++e) {
        ptrs[t].push_back(&pool[static_cast<int64_t>(index[e]) * kDim]);
      }
      queries[t] = {ptrs[t].data(), static_cast<int>(ptrs[t].size())};
    }
    std::vector<float> want(q.size());
    cpu_->SparseAttention(q.data(), queries.data(), nq, kHeads, kDim, sinks.data(), kScale,
                          want.data());
    return want;
  }
  std::unique_ptr<Backend> cpu_ = MakeCpuBackend(2);
};

// A few queries, so the rows split over blocks: a window, window + top-k, an HCA-like count, one
// row, none, and counts just off the 32-row tile; through a row index that scatters the rows.
TEST_F(MqaMmaGpuTest, MatchesTheCpuThroughSplitsAndARowIndex) {
  const std::vector<int> counts = {128, 640, 1153, 1, 0, 31, 33, 97};
  std::vector<int64_t> offsets = {0};
  for (int c : counts) offsets.push_back(offsets.back() + c);
  const int64_t total = offsets.back(), nq = static_cast<int64_t>(counts.size());
  std::vector<float> pool;
  const auto packed = Pool(total, &pool);
  std::vector<int32_t> index(total);
  for (int64_t e = 0; e < total; ++e) index[e] = static_cast<int32_t>((e * 7919) % total);
  DeviceVector<int32_t> didx(index);
  DeviceVector<int64_t> doff(offsets);
  // q of 0.2: logits within about one unit. With q of 1 (logits up to ~8) the worst error was
  // 1.1e-5 (H200, 2026-12-01): fp32 dot products drift with the logits' size on both sides, the
  // CPU reference's included (not yet separated), so that case is not bounded here (docs/gpu.md,
  // "Prefill attention on tensor cores").
  const auto q = Random(nq * kHeads * kDim, 0.2f), sinks = Random(kHeads);
  const auto want = Cpu(q, pool, index, offsets, sinks);
  DeviceVector<float> dq(q), ds(sinks);
  for (int max_splits : {1, 5, 64}) {
    auto scratch =
        DeviceVector<float>::Poisoned(kernels::MqaDecodeScratch(nq, kHeads, kDim, max_splits));
    auto out = DeviceVector<float>::Poisoned(q.size());
    ASSERT_EQ(kernels::MqaMmaFp8Rows(dq.get(), packed.get(), didx.get(), doff.get(), nq, kHeads,
                                     kDim, ds.get(), kScale, 1153, max_splits, scratch.get(),
                                     out.get(), nullptr),
              0);
    const auto got = out.ToHost();
    RecordProperty("worst_error_max_splits_" + std::to_string(max_splits),
                   std::to_string(WorstError(got, want)));
    ExpectClose(got, want, 1e-5f, "MqaMmaFp8Rows");
  }
}

// One query of 1,153 rows: its rows split over 37 blocks a head half (one tile each), the shape
// of a batch-1 decode step.
TEST_F(MqaMmaGpuTest, OneQuerySplitOverManyBlocks) {
  const std::vector<int64_t> offsets = {0, 1153};
  std::vector<float> pool;
  const auto packed = Pool(offsets.back(), &pool);
  std::vector<int32_t> index(offsets.back());
  for (int64_t e = 0; e < offsets.back(); ++e) index[e] = static_cast<int32_t>(e);
  const auto q = Random(kHeads * kDim, 0.2f), sinks = Random(kHeads);
  const auto want = Cpu(q, pool, index, offsets, sinks);
  DeviceVector<float> dq(q), ds(sinks);
  DeviceVector<int64_t> doff(offsets);
  auto scratch = DeviceVector<float>::Poisoned(kernels::MqaDecodeScratch(1, kHeads, kDim, 64));
  auto out = DeviceVector<float>::Poisoned(q.size());
  ASSERT_EQ(kernels::MqaMmaFp8Rows(dq.get(), packed.get(), nullptr, doff.get(), 1, kHeads, kDim,
                                   ds.get(), kScale, 1153, 64, scratch.get(), out.get(), nullptr),
            0);
  const auto got = out.ToHost();
  RecordProperty("worst_error_one_query", std::to_string(WorstError(got, want)));
  ExpectClose(got, want, 1e-5f, "one query");
}

// With 64 heads MqaDecodeFp8Rows takes the tensor cores by itself (bit for bit what MqaMmaFp8Rows
// gives) at a small batch (rows split over blocks) and a large one, rows gathered per query (no
// index) as a decode batch lays them out; the combine's rotation and FP8 round trip give what
// Rope and QdqFp8Rows give after it.
TEST_F(MqaMmaGpuTest, DecodeEntryTakesItWithTheFusedRotation) {
  for (const int64_t nq : {int64_t{3}, int64_t{130}}) {
    SCOPED_TRACE(nq);
    std::vector<int64_t> offsets = {0};
    for (int64_t t = 0; t < nq; ++t) offsets.push_back(offsets.back() + (t * 37) % 200 + 1);
    const int64_t total = offsets.back();
    std::vector<float> pool;
    const auto packed = Pool(total, &pool);
    std::vector<int32_t> identity(total);
    for (int64_t e = 0; e < total; ++e) identity[e] = static_cast<int32_t>(e);
    const auto q = Random(nq * kHeads * kDim, 0.2f), sinks = Random(kHeads);
    const auto want = Cpu(q, pool, identity, offsets, sinks);
    DeviceVector<float> dq(q), ds(sinks);
    DeviceVector<int64_t> doff(offsets);
    auto scratch = DeviceVector<float>::Poisoned(kernels::MqaDecodeScratch(nq, kHeads, kDim, 4));
    auto got = DeviceVector<float>::Poisoned(q.size());
    auto mma = DeviceVector<float>::Poisoned(q.size());
    ASSERT_EQ(
        kernels::MqaDecodeFp8Rows(dq.get(), packed.get(), nullptr, doff.get(), nq, kHeads, kDim,
                                  ds.get(), kScale, 200, 4, scratch.get(), got.get(), nullptr),
        0);
    ASSERT_EQ(kernels::MqaMmaFp8Rows(dq.get(), packed.get(), nullptr, doff.get(), nq, kHeads, kDim,
                                     ds.get(), kScale, 200, 4, scratch.get(), mma.get(), nullptr),
              0);
    const auto got_host = got.ToHost();
    RecordProperty("worst_error_queries_" + std::to_string(nq),
                   std::to_string(WorstError(got_host, want)));
    ExpectClose(got_host, want, 1e-5f, "MqaDecodeFp8Rows");
    ExpectClose(mma.ToHost(), got_host, 0.0f, "the same launch");

    std::vector<int64_t> positions(nq);
    for (int64_t t = 0; t < nq; ++t) positions[t] = 11 + 97 * t;
    std::vector<float> inv_freq(32);
    for (int i = 0; i < 32; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / 64.0f);
    DeviceVector<int64_t> dpos(positions);
    DeviceVector<float> dfreq(inv_freq);
    const kernels::RopeArgs rope{kHeads, kDim, 64, dfreq.get(), dpos.get(), true};
    auto want_fp8 = DeviceVector<float>::Poisoned(q.size());
    ASSERT_EQ(
        kernels::Rope(got.get(), nq, kHeads, kDim, 64, dfreq.get(), dpos.get(), true, nullptr), 0);
    ASSERT_EQ(kernels::QdqFp8Rows(got.get(), nq, int64_t{kHeads} * kDim, want_fp8.get(), nullptr),
              0);
    auto fused = DeviceVector<float>::Poisoned(q.size());
    auto fused_fp8 = DeviceVector<float>::Poisoned(q.size());
    ASSERT_EQ(kernels::MqaDecodeFp8Rows(dq.get(), packed.get(), nullptr, doff.get(), nq, kHeads,
                                        kDim, ds.get(), kScale, 200, 4, scratch.get(), fused.get(),
                                        nullptr, &rope, fused_fp8.get()),
              0);
    ExpectClose(fused.ToHost(), got.ToHost(), 0.0f, "rotated in the combine");
    ExpectClose(fused_fp8.ToHost(), want_fp8.ToHost(), 0.0f, "FP8 round trip in the combine");
  }
}

TEST_F(MqaMmaGpuTest, RefusesOtherHeadCounts) {
  std::vector<float> pool;
  const auto packed = Pool(4, &pool);
  const std::vector<int64_t> offsets = {0, 4};
  DeviceVector<int64_t> doff(offsets);
  const int heads = 32;  // the CUDA-core form takes 32 heads; the tensor-core one only 64
  auto q = DeviceVector<float>::Poisoned(heads * kDim);
  auto sinks = DeviceVector<float>::Poisoned(heads);
  auto scratch = DeviceVector<float>::Poisoned(kernels::MqaDecodeScratch(1, heads, kDim, 1));
  auto out = DeviceVector<float>::Poisoned(heads * kDim);
  EXPECT_NE(kernels::MqaMmaFp8Rows(q.get(), packed.get(), nullptr, doff.get(), 1, heads, kDim,
                                   sinks.get(), kScale, 4, 1, scratch.get(), out.get(), nullptr),
            0);
}

}  // namespace
}  // namespace deepinfer
