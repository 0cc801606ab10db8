// The production decode kernels (kernels/norm_fast.h, indexer.h, mqa_decode.h) against the CPU
// backend on fresh random inputs, outputs poisoned: they sum in the GPU's own order, so they
// agree to fp32 rounding, not bit for bit (the CPU-order kernels in ops.cu are tested to be
// bit-identical in cuda_backend_gpu_test).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/quant.h"
#include "kernels/cuda_available.h"
#include "kernels/forward_glue.h"
#include "kernels/fused_glue.h"
#include "kernels/indexer.h"
#include "kernels/kv_row.h"
#include "kernels/mqa_decode.h"
#include "kernels/norm_fast.h"
#include "kernels/ops.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer {
namespace {

using testing::ExpectClose;

using testing::DeviceVector;

class DecodeKernelsGpuTest : public testing::RandomDataGpuTest {
 protected:
  std::unique_ptr<Backend> cpu_ = MakeCpuBackend(2);
};

TEST_F(DecodeKernelsGpuTest, RmsNormHyperPreAndHyperHead) {
  for (auto [rows, dim] : {std::pair<int64_t, int64_t>{3, 4096}, {5, 100}, {1, 1}}) {
    const auto x = Random(rows * dim, 3.0f), w = Random(dim);
    std::vector<float> want(rows * dim);
    cpu_->RmsNorm(x.data(), w.data(), rows, dim, 1e-6f, want.data());
    DeviceVector<float> dx(x), dw(w);
    auto dy = DeviceVector<float>::Poisoned(rows * dim);
    ASSERT_EQ(kernels::RmsNormFast(dx.get(), dw.get(), rows, dim, 1e-6f, dy.get(), nullptr), 0);
    ExpectClose(dy.ToHost(), want, 1e-5f, "RmsNormFast");
  }
  // Rows under 64 take the sliced reductions (one row, three, 63), 64 and 70 rows the row-blocked
  // ones (70: the last block partial); n = 6 takes the one-lane Sinkhorn, n <= 5 the shuffled one.
  struct Shape {
    int n;
    int64_t rows, dim;
  };
  for (const Shape& sh :
       {Shape{4, 3, 64}, Shape{4, 3, 300}, Shape{4, 3, 4096}, Shape{4, 1, 4096}, Shape{4, 63, 2048},
        Shape{4, 2, 8192}, Shape{4, 64, 1024}, Shape{4, 70, 256}, Shape{1, 2, 128},
        Shape{2, 2, 128}, Shape{3, 2, 128}, Shape{5, 2, 128}, Shape{6, 2, 128}, Shape{2, 2, 130},
        Shape{4, 2, 8200}}) {  // 130, 8200: a row's tail not whole 4-value lanes or chunks
    const int n = sh.n;
    const int64_t rows = sh.rows, dim = sh.dim, flat = n * dim, mix = (2 + n) * n;
    const HyperConnWeights hw{Random(mix * flat, 0.1f), Random(mix), Random(3)};
    const auto streams = Random(rows * flat), norm_w = Random(dim);
    std::vector<float> post(rows * n), comb(rows * n * n), col(rows * dim), normed(rows * dim);
    cpu_->HyperPre(hw, streams.data(), rows, n, dim, 1e-6f, 1e-6f, 20, post.data(), comb.data(),
                   col.data());
    DeviceVector<float> fn(hw.fn), base(hw.base), scale(hw.scale), ds(streams), dw(norm_w);
    auto dpost = DeviceVector<float>::Poisoned(rows * n);
    auto dcomb = DeviceVector<float>::Poisoned(rows * n * n);
    auto dcol = DeviceVector<float>::Poisoned(rows * dim);
    auto dnormed = DeviceVector<float>::Poisoned(rows * dim);
    auto dnormed8 = DeviceVector<float>::Poisoned(rows * dim);
    auto scratch = DeviceVector<float>::Poisoned(rows * (mix + 1) * kernels::kHyperSlices);
    ASSERT_EQ(
        kernels::HyperPreFast({fn.get(), base.get(), scale.get()}, ds.get(), rows, n, dim, 1e-6f,
                              1e-6f, 20, dpost.get(), dcomb.get(), dcol.get(), scratch.get(),
                              nullptr, dw.get(), dnormed.get(), dnormed8.get()),
        0);
    ExpectClose(dpost.ToHost(), post, 1e-5f, "HyperPreFast post");
    ExpectClose(dcomb.ToHost(), comb, 1e-5f, "HyperPreFast comb");
    const std::vector<float> got_col = dcol.ToHost();
    ExpectClose(got_col, col, 1e-5f, "HyperPreFast collapsed");
    // The fused norm against the CPU's norm of the kernel's own collapsed row: dividing by a small
    // row's RMS would scale the collapse's allowed error past the bound (seen on the H200: 1.07e-5
    // at a row of 8,192 values).
    cpu_->RmsNorm(got_col.data(), norm_w.data(), rows, dim, 1e-6f, normed.data());
    ExpectClose(dnormed.ToHost(), normed, 1e-5f, "HyperPreFast normed");
    // The FP8 round trip written beside it is QdqFp8Rows' of the normed values, bit for bit.
    auto want8 = DeviceVector<float>::Poisoned(rows * dim);
    ASSERT_EQ(kernels::QdqFp8Rows(dnormed.get(), rows, dim, want8.get(), nullptr), 0);
    ExpectClose(dnormed8.ToHost(), want8.ToHost(), 0.0f, "HyperPreFast normed FP8");
    // Without the fused norm: the collapse alone.
    auto dcol_only = DeviceVector<float>::Poisoned(rows * dim);
    ASSERT_EQ(kernels::HyperPreFast({fn.get(), base.get(), scale.get()}, ds.get(), rows, n, dim,
                                    1e-6f, 1e-6f, 20, dpost.get(), dcomb.get(), dcol_only.get(),
                                    scratch.get(), nullptr),
              0);
    ExpectClose(dcol_only.ToHost(), col, 1e-5f, "HyperPreFast collapsed, no norm");

    // The head: n mixing weights, pre only, the final norm fused.
    const HyperHeadWeights hh{Random(n * flat, 0.1f), Random(n), Random(1)};
    std::vector<float> head(rows * dim), head_normed(rows * dim);
    cpu_->HyperHead(hh, streams.data(), rows, n, dim, 1e-6f, 1e-6f, head.data());
    DeviceVector<float> hfn(hh.fn), hbase(hh.base), hscale(hh.scale);
    auto dhead = DeviceVector<float>::Poisoned(rows * dim);
    for (float* out : {dnormed.get(), dnormed8.get()}) {  // NaN again
      ASSERT_EQ(cudaMemset(out, 0xff, rows * dim * sizeof(float)), cudaSuccess);
    }
    ASSERT_EQ(kernels::HyperHeadFast({hfn.get(), hbase.get(), hscale.get()}, ds.get(), rows, n, dim,
                                     1e-6f, 1e-6f, dhead.get(), scratch.get(), nullptr, dw.get(),
                                     dnormed.get(), dnormed8.get()),
              0);
    const std::vector<float> got_head = dhead.ToHost();
    ExpectClose(got_head, head, 1e-5f, "HyperHeadFast collapsed");
    cpu_->RmsNorm(got_head.data(), norm_w.data(), rows, dim, 1e-6f, head_normed.data());
    ExpectClose(dnormed.ToHost(), head_normed, 1e-5f, "HyperHeadFast normed");
    ASSERT_EQ(kernels::QdqFp8Rows(dnormed.get(), rows, dim, want8.get(), nullptr), 0);
    ExpectClose(dnormed8.ToHost(), want8.ToHost(), 0.0f, "HyperHeadFast normed FP8");
  }
}

TEST_F(DecodeKernelsGpuTest, IndexerScoresBatch) {
  const int heads = 64, dim = 128;
  for (int64_t n_keys : {1, 63, 64, 1000}) {
    const int64_t batch = 3;
    const auto q = Random(batch * heads * dim), w = Random(batch * heads);
    const auto keys = Random(batch * n_keys * dim);
    std::vector<float> want(batch * n_keys);
    for (int64_t b = 0; b < batch; ++b) {
      cpu_->IndexerScores(&q[b * heads * dim], &w[b * heads], heads, dim, &keys[b * n_keys * dim],
                          n_keys, &want[b * n_keys]);
    }
    DeviceVector<float> dq(q), dw(w), dk(keys);
    auto out = DeviceVector<float>::Poisoned(batch * n_keys);
    ASSERT_EQ(kernels::IndexerScoresBatch(dq.get(), dw.get(), batch, heads, dk.get(), n_keys * dim,
                                          n_keys, out.get(), nullptr),
              0);
    // 64 heads x 128 products with cancellation: the bound scales with their magnitude (~sqrt).
    ExpectClose(out.ToHost(), want, 2e-4f, "IndexerScoresBatch");
  }
}

// The tensor-core scores on bf16 values (what FP4-rounded q and keys are in the reference
// numerics): products exact, so only the order of the fp32 sums differs from the CPU's.
TEST_F(DecodeKernelsGpuTest, IndexerScoresOnTensorCores) {
  const int heads = 64, dim = 128;
  auto bf16 = [](std::vector<float> v) {
    for (float& x : v) x = Bf16ToF32(F32ToBf16(x));
    return v;
  };
  // 23,000 keys x 3 queries: enough blocks for the kernel's 256-key form; 5,000 for its 64-key
  // form; the others take 16.
  for (int64_t n_keys : {1, 15, 17, 256, 1000, 5000, 23000}) {
    for (bool shared_keys : {false, true}) {  // decode: keys per query; prefill: one set
      const int64_t batch = 3, key_sets = shared_keys ? 1 : batch;
      const auto q = bf16(Random(batch * heads * dim)), w = Random(batch * heads);
      const auto keys = bf16(Random(key_sets * n_keys * dim));
      std::vector<uint16_t> keys16(keys.size());
      for (size_t i = 0; i < keys.size(); ++i) keys16[i] = F32ToBf16(keys[i]);
      const int64_t stride = shared_keys ? 0 : n_keys * dim;
      std::vector<float> want(batch * n_keys);
      for (int64_t b = 0; b < batch; ++b) {
        cpu_->IndexerScores(&q[b * heads * dim], &w[b * heads], heads, dim, &keys[b * stride],
                            n_keys, &want[b * n_keys]);
      }
      DeviceVector<float> dq(q), dw(w);
      DeviceVector<uint16_t> dk(keys16);
      auto out = DeviceVector<float>::Poisoned(batch * n_keys);
      ASSERT_EQ(kernels::IndexerScoresMma(dq.get(), dw.get(), batch, heads, dk.get(), stride,
                                          n_keys, out.get(), nullptr),
                0);
      ExpectClose(out.ToHost(), want, 2e-4f, "IndexerScoresMma");
    }
  }
  EXPECT_NE(kernels::IndexerScoresMma(nullptr, nullptr, 1, 32, nullptr, 0, 1, nullptr, nullptr),
            0);  // 64 heads only
}

// A query's scores are the same bits whatever else the launch scores: alone (blocks of 16 keys),
// among 40 queries (blocks of 64) and among 200 (blocks of 256), every query the same.
TEST_F(DecodeKernelsGpuTest, IndexerScoresDoNotDependOnTheBatch) {
  const int heads = 64, dim = 128;
  const int64_t n_keys = 300;
  const auto q = Random(heads * dim), w = Random(heads), keys = Random(n_keys * dim);
  std::vector<uint16_t> keys16(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) keys16[i] = F32ToBf16(keys[i]);
  DeviceVector<uint16_t> dk(keys16);
  std::vector<float> alone;
  for (int64_t batch : {1, 40, 200}) {
    std::vector<float> qs, ws;
    for (int64_t b = 0; b < batch; ++b) {
      qs.insert(qs.end(), q.begin(), q.end());
      ws.insert(ws.end(), w.begin(), w.end());
    }
    DeviceVector<float> dq(qs), dw(ws);
    auto out = DeviceVector<float>::Poisoned(batch * n_keys);
    ASSERT_EQ(kernels::IndexerScoresMma(dq.get(), dw.get(), batch, heads, dk.get(), 0, n_keys,
                                        out.get(), nullptr),
              0);
    const auto got = out.ToHost();
    if (alone.empty()) alone.assign(got.begin(), got.begin() + n_keys);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t j = 0; j < n_keys; ++j) {
        ASSERT_EQ(std::memcmp(&got[b * n_keys + j], &alone[j], sizeof(float)), 0)
            << "batch " << batch << " query " << b << " key " << j;
      }
    }
  }
}

TEST_F(DecodeKernelsGpuTest, MqaDecodeMatchesSparseAttention) {
  const int heads = 64, dim = 512;
  // Row counts per query: a window alone, window + top-k, an HCA-like count, and one row.
  const std::vector<int> counts = {128, 640, 1153, 1};
  std::vector<int64_t> offsets = {0};
  for (int c : counts) offsets.push_back(offsets.back() + c);
  const auto rows = Random(offsets.back() * dim);
  const auto q = Random(counts.size() * heads * dim, 0.2f), sinks = Random(heads);
  std::vector<std::vector<const float*>> ptrs(counts.size());
  std::vector<AttentionQuery> queries;
  for (size_t t = 0; t < counts.size(); ++t) {
    for (int e = 0; e < counts[t]; ++e) ptrs[t].push_back(&rows[(offsets[t] + e) * dim]);
    queries.push_back({ptrs[t].data(), counts[t]});
  }
  std::vector<float> want(q.size());
  const int64_t nq = static_cast<int64_t>(counts.size());
  cpu_->SparseAttention(q.data(), queries.data(), nq, heads, dim, sinks.data(), 0.044194f,
                        want.data());
  // Four queries of 64 heads on the H200: 1 and 3 splits give blocks of 4 heads, 7 of 8,
  // 64 (17) of 16.
  for (int max_splits : {1, 3, 7, 64}) {
    DeviceVector<float> dq(q), dr(rows), ds(sinks);
    DeviceVector<int64_t> doff(offsets);
    auto scratch =
        DeviceVector<float>::Poisoned(kernels::MqaDecodeScratch(nq, heads, dim, max_splits));
    auto out = DeviceVector<float>::Poisoned(q.size());
    ASSERT_EQ(kernels::MqaDecode(dq.get(), dr.get(), nullptr, doff.get(), nq, heads, dim, ds.get(),
                                 0.044194f, 1153, max_splits, scratch.get(), out.get(), nullptr),
              0);
    ExpectClose(out.ToHost(), want, 1e-5f, "MqaDecode");
  }
  // The same rows through an index into a shared pool: the pool is the gathered rows in reverse
  // order, so every index differs from its position.
  const int64_t total = offsets.back();
  std::vector<float> pool(rows.size());
  std::vector<int32_t> index(total);
  for (int64_t e = 0; e < total; ++e) {
    std::copy_n(&rows[e * dim], dim, &pool[(total - 1 - e) * dim]);
    index[e] = static_cast<int32_t>(total - 1 - e);
  }
  DeviceVector<float> dq(q), dpool(pool), ds(sinks);
  DeviceVector<int32_t> didx(index);
  DeviceVector<int64_t> doff(offsets);
  auto scratch = DeviceVector<float>::Poisoned(kernels::MqaDecodeScratch(nq, heads, dim, 8));
  auto out = DeviceVector<float>::Poisoned(q.size());
  ASSERT_EQ(kernels::MqaDecode(dq.get(), dpool.get(), didx.get(), doff.get(), nq, heads, dim,
                               ds.get(), 0.044194f, 1153, 8, scratch.get(), out.get(), nullptr),
            0);
  ExpectClose(out.ToHost(), want, 1e-5f, "MqaDecode indexed");
}

// Attention straight from 584-byte cache rows gives what it gives on the unpacked rows, bit for
// bit, gathered per query and through a row index.
TEST_F(DecodeKernelsGpuTest, MqaDecodeOnFp8RowsMatchesUnpackedRows) {
  // 32 heads: with 64 the cache-row form takes the tensor cores (tests/gpu/mqa_mma_gpu_test.cc).
  const int heads = 32, dim = 512;
  const std::vector<int64_t> offsets = {0, 128, 768, 769, 1921};
  const int64_t nq = 4, total = offsets.back();
  auto rows = Random(total * dim);
  const auto q = Random(nq * heads * dim, 0.2f), sinks = Random(heads);
  // Each 64-value block at its own binade (and some all zero): every block's scale byte matters.
  for (int64_t blk = 0; blk < total * dim / 64; ++blk) {
    const float scale = blk % 11 == 3 ? 0.0f : std::ldexp(1.0f, static_cast<int>(blk % 41) - 20);
    for (int i = 0; i < 64; ++i) rows[blk * 64 + i] *= scale;
  }
  DeviceVector<float> dq(q), dr(rows), ds(sinks);
  DeviceVector<int64_t> doff(offsets);
  auto packed = DeviceVector<uint8_t>::Poisoned(total * kernels::kKvRowBytes);
  auto unpacked = DeviceVector<float>::Poisoned(total * dim);
  ASSERT_EQ(kernels::PackKvRows(dr.get(), total, packed.get(), nullptr), 0);
  ASSERT_EQ(kernels::UnpackKvRows(packed.get(), total, unpacked.get(), nullptr), 0);
  std::vector<int32_t> index(total);
  for (int64_t e = 0; e < total; ++e) index[e] = static_cast<int32_t>((e * 7919) % total);
  DeviceVector<int32_t> didx(index);
  for (const int32_t* row_index : std::vector<const int32_t*>{nullptr, didx.get()}) {
    auto scratch = DeviceVector<float>::Poisoned(kernels::MqaDecodeScratch(nq, heads, dim, 8));
    auto want = DeviceVector<float>::Poisoned(q.size());
    auto got = DeviceVector<float>::Poisoned(q.size());
    ASSERT_EQ(kernels::MqaDecode(dq.get(), unpacked.get(), row_index, doff.get(), nq, heads, dim,
                                 ds.get(), 0.044194f, 1152, 8, scratch.get(), want.get(), nullptr),
              0);
    ASSERT_EQ(
        kernels::MqaDecodeFp8Rows(dq.get(), packed.get(), row_index, doff.get(), nq, heads, dim,
                                  ds.get(), 0.044194f, 1152, 8, scratch.get(), got.get(), nullptr),
        0);
    ExpectClose(got.ToHost(), want.ToHost(), 0.0f, row_index ? "indexed" : "gathered");
    // With the output's inverse rotation and FP8 round trip in the combine: Rope's and
    // QdqFp8Rows' bits.
    std::vector<int64_t> positions(nq);
    for (int64_t t = 0; t < nq; ++t) positions[t] = 37 + 1000 * t;
    std::vector<float> inv_freq(32);
    for (int i = 0; i < 32; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / 64.0f);
    DeviceVector<int64_t> dpos(positions);
    DeviceVector<float> dfreq(inv_freq);
    const kernels::RopeArgs rope{heads, dim, 64, dfreq.get(), dpos.get(), true};
    auto want_fp8 = DeviceVector<float>::Poisoned(q.size());
    ASSERT_EQ(kernels::Rope(got.get(), nq, heads, dim, 64, dfreq.get(), dpos.get(), true, nullptr),
              0);
    ASSERT_EQ(kernels::QdqFp8Rows(got.get(), nq, int64_t{heads} * dim, want_fp8.get(), nullptr), 0);
    auto fused = DeviceVector<float>::Poisoned(q.size());
    auto fused_fp8 = DeviceVector<float>::Poisoned(q.size());
    ASSERT_EQ(kernels::MqaDecodeFp8Rows(dq.get(), packed.get(), row_index, doff.get(), nq, heads,
                                        dim, ds.get(), 0.044194f, 1152, 8, scratch.get(),
                                        fused.get(), nullptr, &rope, fused_fp8.get()),
              0);
    ExpectClose(fused.ToHost(), got.ToHost(), 0.0f, "rotated in the combine");
    ExpectClose(fused_fp8.ToHost(), want_fp8.ToHost(), 0.0f, "FP8 round trip in the combine");
  }
  const kernels::RopeArgs odd{heads, dim, 62, nullptr, nullptr, true};  // not a multiple of 4
  auto unused = DeviceVector<float>::Poisoned(1);
  EXPECT_NE(kernels::MqaDecodeFp8Rows(dq.get(), packed.get(), nullptr, doff.get(), nq, heads, dim,
                                      ds.get(), 0.044194f, 1152, 8, unused.get(), unused.get(),
                                      nullptr, &odd, unused.get()),
            0);
}

}  // namespace
}  // namespace deepinfer
