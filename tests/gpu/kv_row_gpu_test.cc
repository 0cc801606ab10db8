// The 584-byte cache row (kernels/kv_row.h) against the CPU: the packed bytes are the e4m3 codes,
// bf16 bits and scale bytes the CPU's quantiser gives, and unpacking returns exactly the row the
// reference numerics cache (FP8 QDQ of the first 448 values in blocks of 64, bf16 RoPE part) —
// on rows with all-zero blocks, tiny and huge blocks, and values at rounding ties.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/model/quant.h"
#include "kernels/cuda_available.h"
#include "kernels/kv_row.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;
constexpr int kValues = kernels::kKvRowValues, kNope = kernels::kKvNopeValues;

TEST(KvRowGpuTest, PacksWhatTheReferenceNumericsCache) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(std::random_device{}());
  const int64_t n = 37;  // not a multiple of the warps per block; odd rows start 8 bytes off
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> rows(n * kValues);
  for (int64_t r = 0; r < n; ++r) {
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 60) - 30);
    for (int i = 0; i < kValues; ++i) {
      float v = normal(rng) * scale;
      if (r % 5 == 1 && i < 64) v = 0.0f;  // an all-zero block: the floor scale
      if (r % 5 == 2 && i % 7 == 0) v = std::ldexp(1.0625f, -3);  // an e4m3 rounding tie
      rows[r * kValues + i] = v;
    }
  }
  DeviceVector<float> d_rows(rows);
  auto d_packed = DeviceVector<uint8_t>::Poisoned(n * kernels::kKvRowBytes);
  auto d_back = DeviceVector<float>::Poisoned(n * kValues);
  ASSERT_EQ(kernels::PackKvRows(d_rows.get(), n, d_packed.get(), nullptr), 0);
  ASSERT_EQ(kernels::UnpackKvRows(d_packed.get(), n, d_back.get(), nullptr), 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto packed = d_packed.ToHost();
  const auto back = d_back.ToHost();
  for (int64_t r = 0; r < n; ++r) {
    const float* x = &rows[r * kValues];
    const uint8_t* p = &packed[r * kernels::kKvRowBytes];
    for (int b = 0; b < kNope / 64; ++b) {
      float amax = 0.0f;
      for (int i = 64 * b; i < 64 * b + 64; ++i) amax = std::max(amax, std::fabs(x[i]));
      const int e = Pow2ScaleExponent(amax, 448.0f, 1e-4f);
      ASSERT_EQ(p[kNope + 128 + b], e + 127) << "row " << r << " scale " << b;
      for (int i = 64 * b; i < 64 * b + 64; ++i) {
        const float q = std::clamp(std::ldexp(x[i], -e), -448.0f, 448.0f);
        ASSERT_EQ(p[i], F32ToE4M3(q)) << "row " << r << " value " << i;
      }
    }
    for (int i = kNope; i < kValues; ++i) {
      uint16_t bits;
      std::memcpy(&bits, &p[kNope + 2 * (i - kNope)], 2);
      ASSERT_EQ(bits, F32ToBf16(x[i])) << "row " << r << " RoPE value " << i;
    }
    EXPECT_EQ(p[kernels::kKvRowBytes - 1], 0);
    // Unpacked: the row as the reference numerics leave it (engine/model/attention.cc).
    std::vector<float> want(x, x + kValues);
    QdqFp8Blocks(want.data(), kNope, 64, 1e-4f);
    for (int i = kNope; i < kValues; ++i) want[i] = Bf16ToF32(F32ToBf16(want[i]));
    ASSERT_EQ(std::memcmp(&back[r * kValues], want.data(), kValues * sizeof(float)), 0)
        << "row " << r;
  }
}

TEST(KvRowGpuTest, RejectsMisalignedBuffers) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto rows = DeviceVector<float>::Poisoned(2 * kValues);
  auto packed = DeviceVector<uint8_t>::Poisoned(2 * kernels::kKvRowBytes + 8);
  EXPECT_NE(kernels::PackKvRows(rows.get() + 1, 1, packed.get(), nullptr), 0);
  EXPECT_NE(kernels::PackKvRows(rows.get(), 1, packed.get() + 4, nullptr), 0);
  EXPECT_NE(kernels::UnpackKvRows(packed.get() + 4, 1, rows.get(), nullptr), 0);
}

}  // namespace
}  // namespace deepinfer
