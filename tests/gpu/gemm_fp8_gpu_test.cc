// The cuBLASLt FP8 block-scaled GEMM and its activation quantiser against the CPU reference
// (engine/model/quant.cc's QdqFp8Blocks and DequantizeRow, sums in double), on fresh random
// weights, scales and activations each run; every output buffer is poisoned with NaN first.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/model/quant.h"
#include "engine/model/weights.h"
#include "kernels/cuda_available.h"
#include "kernels/gemm_fp8.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using kernels::Fp8Blocks128;
using kernels::Fp8GemmPaddedRows;

// Tolerance of the GEMM, relative to sum_i |xq[r, i] * W[o, i]| (the natural scale of a dot
// product's rounding error; |y| alone is not, since random signs make some outputs cancel to
// nearly 0 while their rounding error stays at the size of the terms). The products of two e4m3
// values are exact, but Hopper's FP8 tensor cores accumulate with only about 14 bits (DeepSeek-V3
// technical report, "Increasing Accumulation Precision"), truncating; cuBLASLt's
// block-scaled kernels promote each 128-value K block into an fp32 accumulator (the block's scales
// are applied there), so the error is that of 128-term sums at ~14 bits, biased by truncation:
// around 2^-14 * 32 (addends per WGMMA step) ~ 2e-3 of the block's magnitude in the worst case,
// ~1e-4 typically. 2^-8 leaves margin for the worst case and still catches layout mistakes (a
// wrong scale moves a block by a factor of 2 or more, i.e. errors of 1/L of the magnitude or
// more; a wrong data layout gives O(1)). The test prints the measured maximum so this can be
// tightened after a run on the H200.
constexpr double kTol = 1.0 / 256;

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n, 1) * sizeof(T)) !=
        cudaSuccess) {
      p_ = nullptr;
    }
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return p_; }
  void Upload(const std::vector<T>& v) {
    ASSERT_EQ(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  void Fill(int byte) { ASSERT_EQ(cudaMemset(p_, byte, n_ * sizeof(T)), cudaSuccess); }
  std::vector<T> Download() const {
    std::vector<T> v(n_);
    EXPECT_EQ(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

// Activations whose 128-blocks differ in magnitude (so a mixed-up scale layout shows), with the
// quantiser's corner cases mixed in: all-zero blocks and blocks below the 1e-4 amax floor, amax
// exactly 448 * 2^k and one float above it (the ceil(log2) boundary), and values exactly halfway
// between e4m3 codes, normal and subnormal (ties to even), and negative zeros.
std::vector<float> MakeActivations(int64_t rows, int64_t in, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> mag(-6, 4);
  std::vector<float> x(rows * in);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b0 = 0; b0 < in; b0 += 128) {
      const int64_t b1 = std::min(in, b0 + 128);
      float* blk = &x[r * in];
      const int k = mag(rng);
      const float m = std::ldexp(1.0f, k);
      for (int64_t i = b0; i < b1; ++i) blk[i] = u(rng) * m;
      switch (rng() % 12) {
        case 0:
          for (int64_t i = b0; i < b1; ++i) blk[i] = 0.0f;
          break;
        case 1:
          for (int64_t i = b0; i < b1; ++i) blk[i] = u(rng) * 9e-5f;
          break;
        case 2:
        case 3: {
          // amax = 448 * 2^k makes the scale exactly 2^k; a quarter of these blocks move amax one
          // float up, where the float rounding of log2 decides whether the exponent steps up.
          const float top = 448.0f * m;
          blk[b0] = (rng() & 1) ? top : -top;
          if (rng() % 4 == 3) blk[b0] = std::nextafter(blk[b0], 2.0f * blk[b0]);
          const float ties[] = {1.0625f, 1.1875f, 3.0f / 1024, 1.0f / 1024, 5.0f / 1024, 13.5f};
          for (int64_t i = b0 + 1, t = 0; i < b1 && t < 6; i += 7, ++t) {
            blk[i] = ((rng() & 1) ? 1.0f : -1.0f) * ties[t] * m;
          }
          if (b0 + 3 < b1) blk[b0 + 3] = -0.0f;
          if (b0 + 5 < b1) blk[b0 + 5] = -1e-30f;
          break;
        }
        default:
          break;
      }
    }
  }
  return x;
}

// The GPU's quantised rows, decoded, against QdqFp8Blocks on the CPU: bit for bit. Padding rows
// must be zero bytes with scale 1.
void ExpectQuantizedExactly(const std::vector<float>& x, int64_t rows, int64_t in,
                            const std::vector<uint8_t>& xq, const std::vector<float>& xs,
                            std::vector<float>* qdq_out) {
  const int64_t padded = Fp8GemmPaddedRows(rows);
  std::vector<float> qdq(x);
  int failures = 0;
  for (int64_t r = 0; r < rows; ++r) {
    QdqFp8Blocks(&qdq[r * in], static_cast<int>(in), 128, 1e-4f);
    for (int64_t i = 0; i < in && failures < 10; ++i) {
      const float s = xs[(i / 128) * padded + r];
      const float got = E4M3ToF32(xq[r * in + i]) * s;
      if (Bits(got) != Bits(qdq[r * in + i])) {
        ADD_FAILURE() << "row " << r << " col " << i << ": x " << x[r * in + i] << " cpu "
                      << qdq[r * in + i] << " gpu " << got << " (byte " << int{xq[r * in + i]}
                      << ", scale " << s << ")";
        ++failures;
      }
    }
  }
  for (int64_t r = rows; r < padded; ++r) {
    for (int64_t i = 0; i < in; ++i) ASSERT_EQ(xq[r * in + i], 0) << "padding row " << r;
    for (int64_t b = 0; b < Fp8Blocks128(in); ++b) ASSERT_EQ(xs[b * padded + r], 1.0f);
  }
  if (qdq_out != nullptr) *qdq_out = std::move(qdq);
}

TEST(Fp8GemmGpuTest, E8m0ToF32MatchesCpu) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::vector<uint8_t> e(256);
  for (int i = 0; i < 256; ++i) e[i] = static_cast<uint8_t>(i);
  DeviceBuffer<uint8_t> de(256);
  DeviceBuffer<float> df(256);
  de.Upload(e);
  df.Fill(0xff);
  ASSERT_EQ(kernels::E8m0ToF32(de.get(), 256, df.get(), nullptr), 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> f = df.Download();
  for (int i = 0; i < 255; ++i) EXPECT_EQ(Bits(f[i]), Bits(E8M0ToF32(e[i]))) << "byte " << i;
  EXPECT_TRUE(std::isnan(f[255]));
}

TEST(Fp8GemmGpuTest, QuantizeActMatchesQdqFp8Blocks) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(std::random_device{}());
  for (auto [rows, in] :
       {std::pair<int64_t, int64_t>{1, 4096}, {17, 1040}, {64, 7168}, {300, 512}, {3, 16}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(in));
    const std::vector<float> x = MakeActivations(rows, in, rng);
    const int64_t padded = Fp8GemmPaddedRows(rows);
    DeviceBuffer<float> dx(x.size());
    DeviceBuffer<uint8_t> dq(padded * in);
    DeviceBuffer<float> ds(kernels::Fp8ActScaleCount(rows, in));
    dx.Upload(x);
    dq.Fill(0xab);
    ds.Fill(0xff);
    ASSERT_EQ(kernels::QuantizeActFp8(dx.get(), rows, in, dq.get(), ds.get(), nullptr), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ExpectQuantizedExactly(x, rows, in, dq.Download(), ds.Download(), nullptr);
  }
}

struct Reference {
  std::vector<double> y, magnitude;  // [rows, out]: the sum and the sum of |terms|
};

// y[r, o] = sum_i qdq(x)[r, i] * W[o, i] in double, W dequantised by DequantizeRow.
Reference ComputeReference(const LinearWeight& lw, const std::vector<float>& xqdq, int64_t rows) {
  const int64_t out = lw.out, in = lw.in;
  Reference ref;
  ref.y.assign(rows * out, 0.0);
  ref.magnitude.assign(rows * out, 0.0);
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<float> wrow(in);
      for (int64_t o = t; o < out; o += threads) {
        DequantizeRow(lw, o, wrow.data());
        for (int64_t r = 0; r < rows; ++r) {
          const float* xr = &xqdq[r * in];
          double acc = 0.0, mag = 0.0;
          for (int64_t i = 0; i < in; ++i) {
            const double term = static_cast<double>(xr[i]) * wrow[i];
            acc += term;
            mag += std::fabs(term);
          }
          ref.y[r * out + o] = acc;
          ref.magnitude[r * out + o] = mag;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  return ref;
}

TEST(Fp8GemmGpuTest, MatchesCpuReference) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(std::random_device{}());
  kernels::Fp8GemmContext ctx;
  ASSERT_EQ(ctx.Create(), 0);
  // (out, in, rows). 1000 x 640: out not a multiple of 128 (a partial 128x128 weight tile, which
  // cuBLASLt's layout defines) and ceil(in/128) = 5, so the weight scales' rows get padded to 8.
  // 256 x 1040: a partial last K block (16 values), also defined by the layout (L = ceil(K/128)).
  for (auto [out, in, rows] : {std::tuple<int64_t, int64_t, int64_t>{4096, 8192, 1},
                               {1024, 4096, 17},
                               {32768, 1024, 64},
                               {2048, 4096, 256},
                               {1000, 640, 33},
                               {256, 1040, 5}}) {
    SCOPED_TRACE(std::to_string(out) + "x" + std::to_string(in) + " rows " + std::to_string(rows));
    const int64_t padded = Fp8GemmPaddedRows(rows);
    const int64_t sb_out = Fp8Blocks128(out), sb_in = Fp8Blocks128(in);
    std::vector<uint8_t> w(out * in), s(sb_out * sb_in);
    for (auto& b : w) {
      do b = static_cast<uint8_t>(rng());
      while ((b & 0x7f) == 0x7f);
    }
    for (auto& b : s) b = static_cast<uint8_t>(118 + rng() % 13);
    const std::vector<float> x = MakeActivations(rows, in, rng);

    DeviceBuffer<uint8_t> dw(w.size()), ds8(s.size()), dxq(padded * in);
    DeviceBuffer<float> dws(kernels::Fp8WeightScaleCount(out, in)), dx(x.size()),
        dxs(kernels::Fp8ActScaleCount(rows, in));
    constexpr int64_t kGuard = 64;  // floats after y that nothing may write
    DeviceBuffer<float> dy(padded * out + kGuard);
    dw.Upload(w);
    ds8.Upload(s);
    dx.Upload(x);
    dws.Fill(0xff);
    dxq.Fill(0xab);
    dxs.Fill(0xff);

    // Weight scales: the checkpoint grid as fp32, rows padded to a multiple of 4 with zeros.
    ASSERT_EQ(kernels::Fp8WeightScalesToF32(ds8.get(), out, in, dws.get(), nullptr), 0);
    ASSERT_EQ(kernels::QuantizeActFp8(dx.get(), rows, in, dxq.get(), dxs.get(), nullptr), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> ws = dws.Download();
    const int64_t ld = kernels::Fp8WeightScaleLd(in);
    for (int64_t p = 0; p < sb_out; ++p) {
      for (int64_t l = 0; l < ld; ++l) {
        const float want = l < sb_in ? E8M0ToF32(s[p * sb_in + l]) : 0.0f;
        ASSERT_EQ(Bits(ws[p * ld + l]), Bits(want)) << "weight scale " << p << ", " << l;
      }
    }
    std::vector<float> xqdq;
    ExpectQuantizedExactly(x, rows, in, dxq.Download(), dxs.Download(), &xqdq);
    if (HasFailure()) return;

    const LinearWeight lw = testing::Fp8BlockView(out, in, w.data(), s.data());
    const Reference ref = ComputeReference(lw, xqdq, rows);

    // Twice: the first call builds the cached plan, the second reuses it.
    for (int call = 0; call < 2; ++call) {
      dy.Fill(0xff);
      ASSERT_EQ(kernels::Fp8BlockGemm(ctx, dw.get(), dws.get(), out, in, dxq.get(), dxs.get(), rows,
                                      dy.get(), nullptr),
                0)
          << "call " << call;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> y = dy.Download();
      double worst_mag = 0.0, worst_abs = 0.0;
      int failures = 0;
      for (int64_t i = 0; i < rows * out; ++i) {
        const double err = std::fabs(static_cast<double>(y[i]) - ref.y[i]);
        if (!(err <= kTol * (1.0 + ref.magnitude[i]))) {
          if (failures++ < 10) {
            ADD_FAILURE() << "call " << call << " row " << i / out << " out " << i % out << ": gpu "
                          << y[i] << " ref " << ref.y[i] << " sum|terms| " << ref.magnitude[i];
          }
          continue;
        }
        worst_mag = std::max(worst_mag, err / (1.0 + ref.magnitude[i]));
        worst_abs = std::max(worst_abs, err / (1.0 + std::fabs(ref.y[i])));
      }
      ASSERT_EQ(failures, 0);
      for (int64_t i = rows * out; i < padded * out; ++i) {
        ASSERT_EQ(y[i], 0.0f) << "padding row " << i / out;  // +0 or -0
      }
      for (int64_t i = padded * out; i < padded * out + kGuard; ++i) {
        ASSERT_EQ(Bits(y[i]), 0xffffffffu) << "write past y at " << i;
      }
      if (call == 1) {
        std::printf(
            "[ fp8 gemm ] out %ld in %ld rows %ld: max |err| / (1 + sum|terms|) = %.3g, "
            "max |err| / (1 + |y|) = %.3g\n",
            static_cast<long>(out), static_cast<long>(in), static_cast<long>(rows), worst_mag,
            worst_abs);
        RecordProperty(
            "err_" + std::to_string(out) + "x" + std::to_string(in) + "x" + std::to_string(rows),
            std::to_string(worst_mag));
      }
    }
  }
}

TEST(Fp8GemmGpuTest, RejectsUnsupportedArguments) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t kOut = 1024, kIn = 1024, kRows = 16;
  DeviceBuffer<uint8_t> w(kOut * kIn), xq(kRows * kIn);
  DeviceBuffer<float> ws(kernels::Fp8WeightScaleCount(kOut, kIn)),
      xs(kernels::Fp8ActScaleCount(kRows, kIn)), y(kRows * kOut + 4), x(kRows * kIn);
  kernels::Fp8GemmContext ctx;
  EXPECT_EQ(kernels::Fp8BlockGemm(ctx, w.get(), ws.get(), kOut, kIn, xq.get(), xs.get(), kRows,
                                  y.get(), nullptr),
            kernels::kFp8GemmNoContext);
  ASSERT_EQ(ctx.Create(), 0);
  EXPECT_TRUE(ctx.created());
  // out must be a multiple of 4, in of 16; rows at least 1; every buffer 16-byte aligned.
  EXPECT_EQ(kernels::Fp8BlockGemm(ctx, w.get(), ws.get(), 1002, kIn, xq.get(), xs.get(), kRows,
                                  y.get(), nullptr),
            kernels::kFp8GemmBadArgument);
  EXPECT_EQ(kernels::Fp8BlockGemm(ctx, w.get(), ws.get(), kOut, 1000, xq.get(), xs.get(), kRows,
                                  y.get(), nullptr),
            kernels::kFp8GemmBadArgument);
  EXPECT_EQ(kernels::Fp8BlockGemm(ctx, w.get(), ws.get(), kOut, kIn, xq.get(), xs.get(), 0, y.get(),
                                  nullptr),
            kernels::kFp8GemmBadArgument);
  EXPECT_EQ(kernels::Fp8BlockGemm(ctx, w.get(), ws.get(), kOut, kIn, xq.get(), xs.get(), kRows,
                                  y.get() + 1, nullptr),
            kernels::kFp8GemmBadArgument);
  EXPECT_EQ(kernels::Fp8BlockGemm(ctx, w.get(), ws.get() + 2, kOut, kIn, xq.get(), xs.get(), kRows,
                                  y.get(), nullptr),
            kernels::kFp8GemmBadArgument);
  EXPECT_EQ(kernels::QuantizeActFp8(x.get(), kRows, 1000, xq.get(), xs.get(), nullptr),
            kernels::kFp8GemmBadArgument);
  EXPECT_EQ(kernels::QuantizeActFp8(x.get(), kRows, kIn, xq.get() + 4, xs.get(), nullptr),
            kernels::kFp8GemmBadArgument);
  ctx.Destroy();
  EXPECT_FALSE(ctx.created());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace deepinfer
