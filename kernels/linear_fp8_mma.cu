#include <cuda_runtime.h>

#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"
#include "kernels/linear_fp8_mma.h"
#include "kernels/mma_sm90.cuh"

namespace deepinfer::kernels {
namespace {

// A block takes 16 weight rows; its warps split the 128-column slices between them, so that a
// short, wide weight (wq_a: 1,024 x 4,096) still has warps enough to stream it, and add their
// sums in warp order at the end.
constexpr int kWarps = 8;

// The operands of one 128-column slice for lane (g, t): 32 contiguous bytes (columns 32t ..
// 32t + 31) of weight rows g and g + 8 and of activation row g.
struct Slice {
  uint4 lo[2], hi[2], x[2];
};

__device__ __forceinline__ void LoadSliceWeights(const uint4* w_lo, const uint4* w_hi,
                                                 int64_t slice, Slice* s) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    s->lo[h] = __ldg(w_lo + 8 * slice + h);
    s->hi[h] = __ldg(w_hi + 8 * slice + h);
  }
}

__device__ __forceinline__ void LoadSliceActivations(const uint4* x, int64_t slice, Slice* s) {
#pragma unroll
  for (int h = 0; h < 2; ++h) s->x[h] = __ldg(x + 8 * slice + h);
}

__device__ __forceinline__ void LoadSlice(const uint4* w_lo, const uint4* w_hi, const uint4* x,
                                          int64_t slice, Slice* s) {
  LoadSliceWeights(w_lo, w_hi, slice, s);
  LoadSliceActivations(x, slice, s);
}

// Word k (0..7) of a lane's 32 bytes; k is a constant once the loops are unrolled.
__device__ __forceinline__ uint32_t Word(const uint4 (&v)[2], int k) {
  const uint4& q = v[k >> 2];
  const int j = k & 3;
  return j == 0 ? q.x : j == 1 ? q.y : j == 2 ? q.z : q.w;
}

// The mma's k order is free within a slice (its weights share one scale, each row's activations
// another), so lane t gives mma i the columns 32t + 8i .. 32t + 8i + 7 of its own 32 bytes: words
// 2i (k slots 4t ..) and 2i + 1 (k slots 16 + 4t ..), for A (rows g, g + 8) and B (token g) alike.
// No shuffles, and every load is 16 bytes. Each mma's sum starts from zero; the four are added
// in fp32, then scaled.
__global__ void __launch_bounds__(kWarps * 32)
    Fp8MmaGemvKernel(const uint8_t* __restrict__ w, const uint8_t* __restrict__ scale, int64_t out,
                     int64_t in, const uint8_t* __restrict__ xq, const float* __restrict__ x_scale,
                     int64_t x_ld, int rows, float* __restrict__ y, bool early) {
  const int64_t o0 = static_cast<int64_t>(blockIdx.x) * 16;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t lo = o0 + g < out ? o0 + g : out - 1;
  const int64_t hi = o0 + g + 8 < out ? o0 + g + 8 : out - 1;
  const uint4* w_lo = reinterpret_cast<const uint4*>(w + lo * in) + 2 * t;
  const uint4* w_hi = reinterpret_cast<const uint4*>(w + hi * in) + 2 * t;
  const uint4* x = reinterpret_cast<const uint4*>(xq + (g < rows ? g : 0) * in) + 2 * t;
  const int64_t slices = in / 128;
  const uint8_t* w_scale = scale + (o0 / 128) * slices;  // the 16 rows lie in one 128-row block
  const int n0 = 2 * t, n1 = 2 * t + 1;                  // this lane's output columns (rows of y)
  const int r0 = n0 < rows ? n0 : 0, r1 = n1 < rows ? n1 : 0;
  const int64_t per = (slices + kWarps - 1) / kWarps;
  const int64_t begin = warp * per, end = begin + per < slices ? begin + per : slices;
  float acc[4] = {0, 0, 0, 0};
  Slice cur{}, next{};
  // The first slice's weights before the wait when they are settled (EarlyWeightLoads): they
  // stream while the kernel before this one (the activations' quantisation) runs.
  if (early && begin < end) LoadSliceWeights(w_lo, w_hi, begin, &cur);
  AwaitProducers();
  if (begin < end) {
    if (!early) LoadSliceWeights(w_lo, w_hi, begin, &cur);
    LoadSliceActivations(x, begin, &cur);
  }
  for (int64_t s = begin; s < end; ++s) {
    if (s + 1 < end) LoadSlice(w_lo, w_hi, x, s + 1, &next);  // in flight while this one computes
    float part[4] = {0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float d[4];
      Mma(d, Word(cur.lo, 2 * i), Word(cur.hi, 2 * i), Word(cur.lo, 2 * i + 1),
          Word(cur.hi, 2 * i + 1), Word(cur.x, 2 * i), Word(cur.x, 2 * i + 1));
#pragma unroll
      for (int c = 0; c < 4; ++c) part[c] += d[c];
    }
    const float ws = E8M0(__ldg(w_scale + s));
    const float s0 = ws * __ldg(x_scale + s * x_ld + r0), s1 = ws * __ldg(x_scale + s * x_ld + r1);
    acc[0] += part[0] * s0;
    acc[1] += part[1] * s1;
    acc[2] += part[2] * s0;
    acc[3] += part[3] * s1;
    cur = next;
  }
  // The warps' sums in warp order, whatever their timing.
  __shared__ float partial[kWarps][4][32];
#pragma unroll
  for (int c = 0; c < 4; ++c) partial[warp][c][lane] = acc[c];
  __syncthreads();
  if (warp != 0) return;
  float total[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    total[c] = partial[0][c][lane];
#pragma unroll
    for (int k = 1; k < kWarps; ++k) total[c] += partial[k][c][lane];
  }
  // Accumulator c: row g (c < 2) or g + 8, token 2t + (c & 1).
  if (n0 < rows) {
    if (o0 + g < out) y[n0 * out + o0 + g] = total[0];
    if (o0 + g + 8 < out) y[n0 * out + o0 + g + 8] = total[2];
  }
  if (n1 < rows) {
    if (o0 + g < out) y[n1 * out + o0 + g] = total[1];
    if (o0 + g + 8 < out) y[n1 * out + o0 + g + 8] = total[3];
  }
}

}  // namespace

int Fp8MmaGemv(const uint8_t* w, const uint8_t* scale, int64_t out, int64_t in, const uint8_t* xq,
               const float* x_scale, int64_t x_ld, int rows, float* y, void* stream) {
  if (in % 128 != 0 || in <= 0 || out <= 0 || rows < 1 || rows > 8 || x_ld < rows ||
      reinterpret_cast<uintptr_t>(w) % 16 != 0 || reinterpret_cast<uintptr_t>(xq) % 16 != 0) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  LaunchKernel(Fp8MmaGemvKernel, static_cast<unsigned>((out + 15) / 16), kWarps * 32, 0,
               static_cast<cudaStream_t>(stream), w, scale, out, in, xq, x_scale, x_ld, rows, y,
               EarlyWeightLoads());
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
