// The CPU-order products (kernels/dot_cpu_order.h) against the CPU's own: each weight row
// dequantised by DequantizeRow and summed by OrderedDot must give the same floats, bit for bit,
// for FP4 and FP8 weights (tails past the tiles included) and for the grouped expert products,
// also past one launch's 65,535 groups. Fresh random data each run, outputs poisoned first.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/model/weights.h"
#include "kernels/cuda_available.h"
#include "kernels/dot_cpu_order.h"
#include "kernels/exact_math.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

template <class T>
T* ToDevice(const std::vector<T>& v) {
  void* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, std::max<size_t>(v.size() * sizeof(T), 16)), cudaSuccess);
  cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return static_cast<T*>(d);
}

template <class T>
std::vector<T> ToHost(const T* d, size_t n) {
  std::vector<T> v(n);
  cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
  return v;
}

class DotCpuOrderGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  std::vector<uint8_t> Bytes(size_t n, int lo, int span) {
    std::vector<uint8_t> b(n);
    for (auto& x : b)
      x = static_cast<uint8_t>(span > 0 ? lo + static_cast<int>(rng_() % span) : rng_());
    return b;
  }
  std::vector<float> Normal(size_t n) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng_);
    return v;
  }
  // The CPU's product of weight row `o` and x: DequantizeRow, then OrderedDot.
  static float CpuDot(const LinearWeight& w, int64_t o, const float* x) {
    std::vector<float> row(w.in);
    DequantizeRow(w, o, row.data());
    return OrderedDot(row.data(), x, w.in);
  }
  const uint32_t seed_ = std::random_device{}();
  std::mt19937 rng_{seed_};
};

TEST_F(DotCpuOrderGpuTest, DenseProductsEqualTheCpusBitForBit) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  struct Case {
    kernels::StoredFormat format;
    int64_t out, in, rows;
  };
  for (const Case& c : {Case{kernels::StoredFormat::kFp4Block32, 37, 96, 3},
                        Case{kernels::StoredFormat::kFp8Block128, 200, 300, 2}}) {
    const bool fp4 = c.format == kernels::StoredFormat::kFp4Block32;
    std::vector<uint8_t> w = Bytes(fp4 ? c.out * c.in / 2 : c.out * c.in, 0, 0);
    if (!fp4) {
      for (auto& b : w) b = (b & 0x7f) == 0x7f ? b - 1 : b;  // e4m3 has NaN there, weights do not
    }
    const int64_t n_scales = fp4 ? c.out * c.in / 32 : ((c.out + 127) / 128) * ((c.in + 127) / 128);
    const std::vector<uint8_t> s = Bytes(n_scales, 118, 14);
    const std::vector<float> x = Normal(c.rows * c.in);
    uint8_t *dw = ToDevice(w), *ds = ToDevice(s);
    float* dx = ToDevice(x);
    float* dy = ToDevice(std::vector<float>(c.rows * c.out, std::nanf("")));
    ASSERT_EQ(kernels::QuantizedDotCpuOrder(c.format, dw, ds, 0, c.out, c.in, dx, c.in, c.rows, dy,
                                            c.out, nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> y = ToHost(dy, c.rows * c.out);
    const LinearWeight lw = fp4 ? testing::Fp4BlockView(c.out, c.in, w.data(), s.data())
                                : testing::Fp8BlockView(c.out, c.in, w.data(), s.data());
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t o = 0; o < c.out; ++o) {
        const float want = CpuDot(lw, o, &x[r * c.in]);
        ASSERT_EQ(std::memcmp(&y[r * c.out + o], &want, sizeof(float)), 0)
            << "row " << r << " out " << o << ": " << y[r * c.out + o] << " vs " << want;
      }
    }
    for (void* p : {static_cast<void*>(dw), static_cast<void*>(ds), static_cast<void*>(dx),
                    static_cast<void*>(dy)}) {
      cudaFree(p);
    }
  }
}

// More groups than one launch's grid holds (65,535 along y): every group is computed, in the
// CPU's order, and groups past the live count write nothing.
TEST_F(DotCpuOrderGpuTest, GroupedExpertsPastOneLaunchEqualTheCpus) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const int experts = 3, groups = 70'000, live = 69'990;
  const int64_t out = 4, in = 64;
  std::vector<std::vector<uint8_t>> w(experts), s(experts);
  std::vector<const uint8_t*> dw(experts), ds(experts);
  for (int e = 0; e < experts; ++e) {
    w[e] = Bytes(out * in / 2, 0, 0);
    s[e] = Bytes(out * in / 32, 120, 10);
    dw[e] = ToDevice(w[e]);
    ds[e] = ToDevice(s[e]);
  }
  std::vector<kernels::ExpertGroup> g(groups);
  for (int i = 0; i < groups; ++i) {
    g[i] = kernels::ExpertGroup{};
    g[i].expert = static_cast<int32_t>(rng_() % experts);
    g[i].rows = 1;
    g[i].x_row[0] = i;
    g[i].y_row[0] = i;
  }
  const std::vector<float> x = Normal(static_cast<size_t>(groups) * in);
  auto* d_w = ToDevice(dw);
  auto* d_s = ToDevice(ds);
  auto* d_g = ToDevice(g);
  float* dx = ToDevice(x);
  float* dy = ToDevice(std::vector<float>(static_cast<size_t>(groups) * out, std::nanf("")));
  int32_t* d_live = ToDevice(std::vector<int32_t>{live});
  ASSERT_EQ(kernels::Fp4ExpertCpuOrder(d_w, d_s, out, in, d_g, groups, dx, dy, d_live, nullptr), 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> y = ToHost(dy, static_cast<size_t>(groups) * out);
  for (int i = 0; i < groups; ++i) {
    const LinearWeight lw =
        testing::Fp4BlockView(out, in, w[g[i].expert].data(), s[g[i].expert].data());
    for (int64_t o = 0; o < out; ++o) {
      const float got = y[static_cast<size_t>(i) * out + o];
      if (i >= live) {
        ASSERT_TRUE(std::isnan(got)) << "group " << i << " past the live count";
        continue;
      }
      const float want = CpuDot(lw, o, &x[static_cast<size_t>(i) * in]);
      ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0) << "group " << i << " out " << o;
    }
  }
  for (int e = 0; e < experts; ++e) {
    cudaFree(const_cast<uint8_t*>(dw[e]));
    cudaFree(const_cast<uint8_t*>(ds[e]));
  }
  for (void* p : {static_cast<void*>(d_w), static_cast<void*>(d_s), static_cast<void*>(d_g),
                  static_cast<void*>(dx), static_cast<void*>(dy), static_cast<void*>(d_live)}) {
    cudaFree(p);
  }
}

}  // namespace
}  // namespace deepinfer
