// Early weight loads (kernels/launch.cuh, EarlyWeightLoads): the FP8 GEMV, the tensor-core FP8
// GEMV, the bf16 GEMV, the mHC collapse and the norm launches may load weights before their
// programmatic-launch wait, never their activations. Inside a CUDA graph (where the next kernel
// does start early) a slow producer writes the activations just before each product; the product
// must give the bits it gives with early loads off, and not those of the activations' stale
// contents.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "kernels/fused_glue.h"
#include "kernels/hyper_collapse.h"
#include "kernels/launch.cuh"
#include "kernels/linear_bf16.h"
#include "kernels/linear_fp8.h"
#include "kernels/linear_fp8_mma.h"
#include "kernels/norm_fast.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer::kernels {
namespace {

// Up to two copies of one slow launch: every input of the product arrives at once, late.
struct Copies {
  const uint8_t* src[2];
  uint8_t* dst[2];
  size_t bytes[2];
  int n;
};

// Spins ~1 ms, then makes the copies.
__global__ void SlowCopyKernel(Copies c, long long spin_cycles) {
  AwaitProducers();
  const long long start = clock64();
  while (clock64() - start < spin_cycles) {
  }
  for (int k = 0; k < c.n; ++k) {
    for (size_t i = threadIdx.x; i < c.bytes[k]; i += blockDim.x) c.dst[k][i] = c.src[k][i];
  }
}

class EarlyWeightsGpuTest : public testing::RandomDataGpuTest {
 protected:
  void TearDown() override { SetEarlyWeightLoads(true); }

  std::vector<uint8_t> Fp8Weights(int64_t n) {
    std::vector<uint8_t> w(n);
    for (auto& b : w) {
      do b = static_cast<uint8_t>(rng_());
      while ((b & 0x7f) == 0x7f);  // never the NaN code
    }
    return w;
  }
  std::vector<uint8_t> Scales(int64_t n) {
    std::vector<uint8_t> s(n);
    for (auto& b : s) b = static_cast<uint8_t>(118 + rng_() % 12);
    return s;
  }

  // In one graph: the slow copies of `late` (src, dst, bytes; at most two), then `product`; y's
  // bytes after.
  struct Late {
    const void* src;
    void* dst;
    size_t bytes;
  };
  std::vector<uint8_t> RunInGraph(bool early, const std::vector<Late>& late,
                                  const std::function<int(cudaStream_t)>& product, void* y,
                                  size_t y_bytes) {
    SetEarlyWeightLoads(early);
    for (const Late& l : late) EXPECT_EQ(cudaMemset(l.dst, 0, l.bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(y, 0xff, y_bytes), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaStream_t s;
    EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    // One launch for all the copies: with one launch each, the last would start only after the
    // first had finished, and the product could not read that one's buffer early.
    Copies copies{};
    for (const Late& l : late) {
      copies.src[copies.n] = static_cast<const uint8_t*>(l.src);
      copies.dst[copies.n] = static_cast<uint8_t*>(l.dst);
      copies.bytes[copies.n++] = l.bytes;
    }
    LaunchKernel(SlowCopyKernel, 1, 256, 0, s, copies, 2'000'000LL);
    EXPECT_EQ(product(s), 0);
    EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    EXPECT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    std::vector<uint8_t> out(y_bytes);
    cudaMemcpy(out.data(), y, y_bytes, cudaMemcpyDeviceToHost);
    return out;
  }

  // The product's bytes with early loads on and off agree, and are not those it gives on the
  // stale (zeroed) activations.
  void ExpectSameBits(const std::vector<Late>& late,
                      const std::function<int(cudaStream_t)>& product, void* y, size_t y_bytes,
                      const char* what) {
    const std::vector<uint8_t> on = RunInGraph(true, late, product, y, y_bytes);
    const std::vector<uint8_t> off = RunInGraph(false, late, product, y, y_bytes);
    EXPECT_EQ(std::memcmp(on.data(), off.data(), y_bytes), 0) << what;
    const std::vector<float> y_on(reinterpret_cast<const float*>(on.data()),
                                  reinterpret_cast<const float*>(on.data()) + y_bytes / 4);
    int nonzero = 0;
    for (float v : y_on) nonzero += v != 0.0f && v == v;
    EXPECT_GT(nonzero, static_cast<int>(y_on.size()) / 2) << what << ": stale activations";
  }
};

TEST_F(EarlyWeightsGpuTest, Fp8GemvReadsItsActivationsAfterTheWait) {
  // wq_b-like (the whole row in the early steps), wo_b (split 4: two steps after the early
  // ones), a split of 8 (only early steps), one step.
  for (auto shape :
       {std::pair<int64_t, int64_t>{8192, 1024}, {4096, 8192}, {1024, 8192}, {640, 512}}) {
    const int64_t out = shape.first, in = shape.second;
    const std::vector<float> x = Random(in);
    testing::DeviceVector<uint8_t> w(Fp8Weights(out * in)), s(Scales((out / 128) * (in / 128)));
    testing::DeviceVector<float> x_src(x), x_dst{std::vector<float>(in)},
        y{std::vector<float>(out)};
    ExpectSameBits(
        {{x_src.get(), x_dst.get(), in * sizeof(float)}},
        [&](cudaStream_t st) {
          return Fp8BlockGemv(w.get(), s.get(), out, in, x_dst.get(), 1, y.get(), st);
        },
        y.get(), out * sizeof(float), "Fp8BlockGemv");
  }
}

TEST_F(EarlyWeightsGpuTest, Fp8MmaGemvReadsItsActivationsAfterTheWait) {
  const int64_t out = 2048, in = 4096, slices = in / 128;
  const int rows = 5, padded = 8;
  std::vector<uint8_t> xq = Fp8Weights(padded * in);
  std::vector<float> x_scale(slices * padded);
  for (float& v : x_scale) v = 0.01f + 0.001f * static_cast<float>(rng_() % 100);
  testing::DeviceVector<uint8_t> w(Fp8Weights(out * in)), s(Scales((out / 128) * slices));
  testing::DeviceVector<uint8_t> xq_src(xq), xq_dst{std::vector<uint8_t>(xq.size())};
  testing::DeviceVector<float> sc_src(x_scale), sc_dst{std::vector<float>(x_scale.size())};
  testing::DeviceVector<float> y{std::vector<float>(rows * out)};
  ExpectSameBits(
      {{xq_src.get(), xq_dst.get(), xq.size()},
       {sc_src.get(), sc_dst.get(), x_scale.size() * sizeof(float)}},
      [&](cudaStream_t st) {
        return Fp8MmaGemv(w.get(), s.get(), out, in, xq_dst.get(), sc_dst.get(), padded, rows,
                          y.get(), st);
      },
      y.get(), rows * out * sizeof(float), "Fp8MmaGemv");
}

TEST_F(EarlyWeightsGpuTest, Bf16GemvReadsItsActivationsAfterTheWait) {
  for (auto shape : {std::pair<int64_t, int64_t>{4096, 4096}, {64, 4096}}) {
    const int64_t out = shape.first, in = shape.second;
    std::vector<uint16_t> w(out * in);
    for (auto& v : w) v = static_cast<uint16_t>(0x3c00 + rng_() % 0x300) ^ (rng_() & 0x8000);
    const std::vector<float> x = Random(in);
    testing::DeviceVector<uint16_t> dw(w);
    testing::DeviceVector<float> x_src(x), x_dst{std::vector<float>(in)},
        y{std::vector<float>(out)};
    ExpectSameBits(
        {{x_src.get(), x_dst.get(), in * sizeof(float)}},
        [&](cudaStream_t st) { return Bf16Gemv(dw.get(), out, in, x_dst.get(), 1, y.get(), st); },
        y.get(), out * sizeof(float), "Bf16Gemv");
  }
}

TEST_F(EarlyWeightsGpuTest, HyperCollapseReadsItsStreamsAndDotsAfterTheWait) {
  // V4's four streams, two rows of 4,096 columns: one chunk a collapse warp, the case whose norm
  // weights and mHC weights load before the wait.
  const int n = 4, rows = 2, mix = (2 + n) * n;
  const int64_t dim = 4096;
  std::vector<float> dots = Random(rows * (mix + 1) * kHyperSlices);
  for (int r = 0; r < rows; ++r) {  // the sums of squares' slices are positive
    for (int z = 0; z < kHyperSlices; ++z) {
      float& v = dots[(r * (mix + 1) + mix) * kHyperSlices + z];
      v = 50.0f + std::abs(v);
    }
  }
  const std::vector<float> streams = Random(rows * n * dim);
  testing::DeviceVector<float> base(Random(mix)), scale(Random(3)), norm_weight(Random(dim));
  testing::DeviceVector<float> streams_src(streams),
      streams_dst{std::vector<float>(streams.size())};
  testing::DeviceVector<float> dots_src(dots), dots_dst{std::vector<float>(dots.size())};
  // post, comb, collapsed, normed and normed_fp8 in one buffer, compared at once.
  const int64_t post_at = 0, comb_at = rows * n, collapsed_at = comb_at + rows * n * n;
  const int64_t normed_at = collapsed_at + rows * dim, fp8_at = normed_at + rows * dim;
  testing::DeviceVector<float> out{std::vector<float>(fp8_at + rows * dim)};
  const HyperWeights w{nullptr, base.get(), scale.get()};
  float* o = out.get();
  ExpectSameBits(
      {{streams_src.get(), streams_dst.get(), streams.size() * sizeof(float)},
       {dots_src.get(), dots_dst.get(), dots.size() * sizeof(float)}},
      [&](cudaStream_t st) {
        return HyperCollapse(n, false, w, streams_dst.get(), dots_dst.get(), rows, dim, 1e-6f,
                             1e-6f, 20, o + post_at, o + comb_at, o + collapsed_at,
                             norm_weight.get(), o + normed_at, o + fp8_at, st);
      },
      o, (fp8_at + rows * dim) * sizeof(float), "HyperCollapse");
}

TEST_F(EarlyWeightsGpuTest, NormRopeQdqReadsItsRowsAndPositionsAfterTheWait) {
  // A rotated row of 512 (the kv norm's shape: weights and the pair's weights before the wait)
  // and one of 1,024 with the FP8 round trip (q_lora's), in one launch.
  const int64_t rows = 3, dim = 512, rows_b = 2, dim_b = 1024;
  std::vector<float> inv_freq(32);
  for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(10000.0f, -float(i) / 32);
  const std::vector<int64_t> positions = {7, 1000, 123456};
  testing::DeviceVector<float> weight(Random(dim)), weight_b(Random(dim_b)), freq(inv_freq);
  // Both jobs' rows in one buffer, late together.
  const int64_t x_size = rows * dim + rows_b * dim_b;
  testing::DeviceVector<float> x_src(Random(x_size)), x_dst{std::vector<float>(x_size)};
  testing::DeviceVector<int64_t> pos_src(positions), pos_dst{std::vector<int64_t>(rows)};
  // y, then job b's y and its FP8 round trip, in one buffer.
  const int64_t b_at = rows * dim, fp8_at = b_at + rows_b * dim_b;
  testing::DeviceVector<float> out{std::vector<float>(fp8_at + rows_b * dim_b)};
  RopeArgs rope;
  rope.head_dim = dim;
  rope.rope_dim = 64;
  rope.inv_freq = freq.get();
  rope.positions = pos_dst.get();
  float* o = out.get();
  ExpectSameBits(
      {{x_src.get(), x_dst.get(), x_size * sizeof(float)},
       {pos_src.get(), pos_dst.get(), rows * sizeof(int64_t)}},
      [&](cudaStream_t st) {
        const NormJob a{x_dst.get(), weight.get(), rows, dim, 1e-6f, &rope, o};
        const NormJob b{x_dst.get() + rows * dim,
                        weight_b.get(),
                        rows_b,
                        dim_b,
                        1e-6f,
                        nullptr,
                        o + b_at,
                        o + fp8_at};
        return RmsNormRopeQdqPair(a, b, st);
      },
      o, (fp8_at + rows_b * dim_b) * sizeof(float), "RmsNormRopeQdqPair");
}

}  // namespace
}  // namespace deepinfer::kernels
