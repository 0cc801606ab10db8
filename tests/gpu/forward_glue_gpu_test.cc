// The device forward's glue kernels (kernels/forward_glue.h) and the scatter forms of the cache
// writers, against the CPU's functions on fresh random data, outputs poisoned first: the
// embedding gather, FP8 rounding of activations, the indexer's Hadamard + FP4 rounding, rows
// packed to their cache rows, and indexer scores over per-query key sets.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/model/quant.h"
#include "kernels/cuda_available.h"
#include "kernels/forward_glue.h"
#include "kernels/indexer.h"
#include "kernels/kv_row.h"
#include "kernels/ops.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

class ForwardGlueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  // Values over many binades, some exact zeros and rounding ties.
  std::vector<float> Values(size_t n) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
      v[i] = normal(rng_) * std::ldexp(1.0f, static_cast<int>(rng_() % 24) - 12);
      if (rng_() % 17 == 0) v[i] = 0.0f;
      if (rng_() % 23 == 0) v[i] = std::ldexp(1.25f, static_cast<int>(rng_() % 8) - 4);
    }
    return v;
  }
  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(ForwardGlueTest, EmbedCopiesBf16RowsIntoEveryStream) {
  const int64_t vocab = 97, dim = 136, n = 5;
  const int copies = 4;
  std::vector<uint16_t> table(vocab * dim);
  for (auto& t : table) t = static_cast<uint16_t>(rng_() & 0x7f7f);  // finite bf16 bits
  std::vector<int32_t> tokens(n);
  for (auto& t : tokens) t = static_cast<int32_t>(rng_() % vocab);
  DeviceVector<uint16_t> d_table(table);
  DeviceVector<int32_t> d_tokens(tokens);
  auto d_out = DeviceVector<float>::Poisoned(n * copies * dim);
  ASSERT_EQ(kernels::EmbedRows(d_table.get(), d_tokens.get(), n, dim, copies, d_out.get(), nullptr),
            0);
  const auto out = d_out.ToHost();
  for (int64_t t = 0; t < n; ++t) {
    for (int k = 0; k < copies; ++k) {
      for (int64_t c = 0; c < dim; ++c) {
        ASSERT_EQ(Bits(out[(t * copies + k) * dim + c]),
                  Bits(Bf16ToF32(table[tokens[t] * dim + c])));
      }
    }
  }
}

TEST_F(ForwardGlueTest, GatherRowsCopiesTheChosenRows) {
  const int64_t width = 300, n_x = 9;
  const auto x = Values(n_x * width);
  const std::vector<int32_t> rows = {8, 0, 3, 3};
  DeviceVector<float> d_x(x);
  DeviceVector<int32_t> d_rows(rows);
  auto d_y = DeviceVector<float>::Poisoned(rows.size() * width);
  ASSERT_EQ(kernels::GatherRows(d_x.get(), width, d_rows.get(), 4, d_y.get(), nullptr), 0);
  const auto y = d_y.ToHost();
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int64_t c = 0; c < width; ++c) {
      ASSERT_EQ(Bits(y[i * width + c]), Bits(x[rows[i] * width + c])) << i << ", " << c;
    }
  }
}

TEST_F(ForwardGlueTest, QdqFp8RowsIsTheCpuRounding) {
  for (int64_t dim : {128, 512, 200}) {  // 200: a partial last block
    const int64_t rows = 7;
    auto x = Values(rows * dim);
    DeviceVector<float> d_x(x);
    auto d_y = DeviceVector<float>::Poisoned(rows * dim);
    ASSERT_EQ(kernels::QdqFp8Rows(d_x.get(), rows, dim, d_y.get(), nullptr), 0);
    ASSERT_EQ(kernels::QdqFp8Rows(d_x.get(), rows, dim, d_x.get(), nullptr), 0);  // in place
    const auto y = d_y.ToHost(), in_place = d_x.ToHost();
    for (int64_t r = 0; r < rows; ++r) QdqFp8Blocks(&x[r * dim], static_cast<int>(dim), 128, 1e-4f);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(Bits(y[i]), Bits(x[i])) << "dim " << dim << " at " << i;
      ASSERT_EQ(Bits(in_place[i]), Bits(x[i])) << "dim " << dim << " at " << i;
    }
  }
}

TEST_F(ForwardGlueTest, HadamardFp4RowsIsTheIndexerRounding) {
  for (int dim : {32, 64, 128}) {
    const int64_t rows = 11;
    auto x = Values(rows * dim);
    std::vector<int32_t> dest(rows);
    for (int64_t r = 0; r < rows; ++r)
      dest[r] = r % 4 == 3 ? -1 : static_cast<int32_t>(rows - 1 - r);
    DeviceVector<float> d_x(x);
    DeviceVector<int32_t> d_dest(dest);
    auto d_f32 = DeviceVector<float>::Poisoned(rows * dim);
    auto d_bf16 = DeviceVector<uint16_t>::Poisoned(rows * dim);
    ASSERT_EQ(kernels::HadamardFp4Rows(d_x.get(), rows, dim, d_dest.get(), d_f32.get(),
                                       d_bf16.get(), nullptr),
              0);
    const auto f32 = d_f32.ToHost();
    const auto bf16 = d_bf16.ToHost();
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> want(&x[r * dim], &x[r * dim] + dim);
      HadamardTransform(want.data(), dim);
      QdqFp4Blocks(want.data(), dim, 32);
      if (dest[r] < 0) continue;
      for (int i = 0; i < dim; ++i) {
        ASSERT_EQ(Bits(f32[dest[r] * dim + i]), Bits(want[i])) << dim << " row " << r << " " << i;
        ASSERT_EQ(bf16[dest[r] * dim + i], F32ToBf16(want[i])) << dim << " row " << r;
        ASSERT_EQ(Bf16ToF32(F32ToBf16(want[i])), want[i]);  // exact in bf16
      }
    }
    // Rows no row was sent to keep their poison.
    for (int64_t r = 0; r < rows; ++r) {
      if (r % 4 == 3) {
        EXPECT_TRUE(std::isnan(f32[(rows - 1 - r) * dim])) << "row " << r;
      }
    }
  }
}

// With RoPE in the same launch (the indexer query's), the rounding gives what Rope's launch and
// then the plain rounding give, bit for bit: pairs within a lane (dims 64 and 128) and across two
// lanes (dim 32), a rotation of the whole row and of its trailing part, in place as the forward
// runs it.
TEST_F(ForwardGlueTest, HadamardFp4RowsRotatesFirstInTheSameLaunch) {
  const int tokens = 3, heads = 4;
  const std::vector<int64_t> positions = {7, 1000, 123456};
  DeviceVector<int64_t> d_pos(positions);
  for (int dim : {32, 64, 128}) {
    for (int rope_dim : {dim, dim / 2, 2}) {
      SCOPED_TRACE("dim " + std::to_string(dim) + " rope " + std::to_string(rope_dim));
      std::vector<float> inv_freq(rope_dim / 2);
      for (int i = 0; i < rope_dim / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / rope_dim);
      DeviceVector<float> d_freq(inv_freq);
      const int64_t rows = int64_t{tokens} * heads;
      const auto x = Values(rows * dim);
      DeviceVector<float> two(x), one(x);
      ASSERT_EQ(kernels::Rope(two.get(), tokens, heads, dim, rope_dim, d_freq.get(), d_pos.get(),
                              false, nullptr),
                0);
      ASSERT_EQ(
          kernels::HadamardFp4Rows(two.get(), rows, dim, nullptr, two.get(), nullptr, nullptr), 0);
      const kernels::RopeArgs rope{heads, dim, rope_dim, d_freq.get(), d_pos.get(), false};
      ASSERT_EQ(kernels::HadamardFp4Rows(one.get(), rows, dim, nullptr, one.get(), nullptr, nullptr,
                                         &rope),
                0);
      const auto want = two.ToHost(), got = one.ToHost();
      for (int64_t i = 0; i < rows * dim; ++i) ASSERT_EQ(Bits(got[i]), Bits(want[i])) << i;
    }
  }
  DeviceVector<float> x(Values(8 * 64));
  const kernels::RopeArgs odd_rows{3, 64, 64, nullptr, d_pos.get(), false};
  EXPECT_NE(kernels::HadamardFp4Rows(x.get(), 8, 64, nullptr, x.get(), nullptr, nullptr, &odd_rows),
            0);
}

TEST_F(ForwardGlueTest, PackKvRowsToDestinationRows) {
  const int64_t n = 9, pool = 14;
  auto rows = Values(n * kernels::kKvRowValues);
  std::vector<int32_t> dest = {13, -1, 0, 5, 7, -1, 2, 11, 8};
  DeviceVector<float> d_rows(rows);
  DeviceVector<int32_t> d_dest(dest);
  auto d_dense = DeviceVector<uint8_t>::Poisoned(n * kernels::kKvRowBytes);
  auto d_pool = DeviceVector<uint8_t>::Poisoned(pool * kernels::kKvRowBytes);
  ASSERT_EQ(kernels::PackKvRows(d_rows.get(), n, d_dense.get(), nullptr), 0);
  ASSERT_EQ(kernels::PackKvRows(d_rows.get(), n, d_pool.get(), nullptr, d_dest.get()), 0);
  const auto dense = d_dense.ToHost(), packed = d_pool.ToHost();
  std::vector<bool> written(pool, false);
  for (int64_t i = 0; i < n; ++i) {
    if (dest[i] < 0) continue;
    written[dest[i]] = true;
    for (int b = 0; b < kernels::kKvRowBytes; ++b) {
      ASSERT_EQ(packed[dest[i] * kernels::kKvRowBytes + b], dense[i * kernels::kKvRowBytes + b]);
    }
  }
  for (int64_t r = 0; r < pool; ++r) {
    if (!written[r]) {
      EXPECT_EQ(packed[r * kernels::kKvRowBytes], 0xff) << "row " << r;
    }
  }
}

TEST_F(ForwardGlueTest, IndexerScoresReadEachQuerysKeySet) {
  const int64_t batch = 3, sets = 4, n_keys = 300, heads = 64, dim = 128;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(batch * heads * dim), w(batch * heads);
  for (auto& v : q) v = normal(rng_);
  for (auto& v : w) v = normal(rng_);
  std::vector<uint16_t> keys(sets * n_keys * dim);
  for (auto& k : keys) k = F32ToBf16(normal(rng_));
  const std::vector<int32_t> key_set = {2, 0, 3};
  // The same keys laid out per query, read without key sets, must give the same scores.
  std::vector<uint16_t> gathered(batch * n_keys * dim);
  for (int64_t b = 0; b < batch; ++b) {
    std::copy_n(&keys[key_set[b] * n_keys * dim], n_keys * dim, &gathered[b * n_keys * dim]);
  }
  DeviceVector<float> d_q(q), d_w(w);
  DeviceVector<uint16_t> d_keys(keys), d_gathered(gathered);
  DeviceVector<int32_t> d_set(key_set);
  auto d_a = DeviceVector<float>::Poisoned(batch * n_keys);
  auto d_b = DeviceVector<float>::Poisoned(batch * n_keys);
  ASSERT_EQ(kernels::IndexerScoresMma(d_q.get(), d_w.get(), batch, heads, d_keys.get(),
                                      n_keys * dim, n_keys, d_a.get(), nullptr, d_set.get()),
            0);
  ASSERT_EQ(kernels::IndexerScoresMma(d_q.get(), d_w.get(), batch, heads, d_gathered.get(),
                                      n_keys * dim, n_keys, d_b.get(), nullptr),
            0);
  // With per-query counts only the visible keys are scored; the rest stays untouched.
  const std::vector<int32_t> counts = {300, 17, 0};
  DeviceVector<int32_t> d_counts(counts);
  auto d_c = DeviceVector<float>::Poisoned(batch * n_keys);
  ASSERT_EQ(
      kernels::IndexerScoresMma(d_q.get(), d_w.get(), batch, heads, d_keys.get(), n_keys * dim,
                                n_keys, d_c.get(), nullptr, d_set.get(), d_counts.get()),
      0);
  const auto a = d_a.ToHost(), b = d_b.ToHost(), c = d_c.ToHost();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(Bits(a[i]), Bits(b[i])) << i;
  for (int64_t q = 0; q < batch; ++q) {
    for (int64_t j = 0; j < n_keys; ++j) {
      const float v = c[q * n_keys + j];
      if (j < counts[q]) {
        ASSERT_EQ(Bits(v), Bits(a[q * n_keys + j])) << q << " " << j;
      } else {
        ASSERT_TRUE(std::isnan(v)) << q << " " << j;
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer
