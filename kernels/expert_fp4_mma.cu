// The routed experts on tensor cores: MXFP4 weights against FP8 activations with mma.sync
// m16n8k32 (e4m3), one warp per 16 output rows and group of up to 8 tokens (the mma's N).
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/device_math.cuh"
#include "kernels/expert_fp4.h"

namespace deepinfer::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxGridY = 65535;

// Eight e2m1 nibbles (one 32-bit word, weight 0 lowest) as two registers of four e4m3 bytes:
// the even weights (0, 2, 4, 6) and the odd ones. Placing e2m1's exponent and mantissa bits at
// e4m3's bits 4..2 gives exactly 2^-6 times the value, subnormal 0.5 included (the 2^6 is
// applied once to the result); the sign moves to bit 7. Seven integer instructions per eight
// weights.
__device__ __forceinline__ void Fp4ToE4m3(uint32_t w, uint32_t* even, uint32_t* odd) {
  *even = ((w << 4) & 0x80808080u) | ((w << 2) & 0x1c1c1c1cu);
  *odd = (w & 0x80808080u) | ((w >> 2) & 0x1c1c1c1cu);
}

__device__ __forceinline__ void Mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                    uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.0f), "f"(0.0f), "f"(0.0f),
        "f"(0.0f));
}

// Lane (g = lane / 4, t = lane % 4) holds, per 32-weight block: A, weights 8t .. 8t + 7 of rows
// g and g + 8 (one 32-bit load each; even weights in the mma's first k-half, odd in the second:
// any order of k works as long as B uses the same); B, the same 8 activations of token g. The
// block's product is scaled by its weight scale (per row) and activation scale (per token and
// 128 values) in fp32 before it is added, exactly as block-scaled GEMMs do.
__global__ void __launch_bounds__(kWarps * 32)
    Fp4ExpertMmaKernel(const uint8_t* const* __restrict__ weights,
                       const uint8_t* const* __restrict__ scales, int64_t out, int64_t in,
                       const ExpertGroup* __restrict__ groups, int first,
                       const int32_t* __restrict__ live, const uint8_t* __restrict__ xq,
                       const float* __restrict__ x_scale, int64_t x_rows, float* __restrict__ y) {
  if (live != nullptr && first + static_cast<int>(blockIdx.y) >= *live) return;
  __shared__ ExpertGroup group;
  if (threadIdx.x == 0) group = groups[first + blockIdx.y];
  __syncthreads();
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * 16;
  if (o0 >= out) return;
  const int rows = group.rows;
  if (rows > kExpertGroupRows) return;  // malformed: written nowhere, as by the CUDA-core GEMV
  const int64_t blocks = in / 32;
  const uint8_t* w = weights[group.expert];
  const uint8_t* s = scales[group.expert];
  const int64_t lo = o0 + g < out ? o0 + g : out - 1, hi = o0 + g + 8 < out ? o0 + g + 8 : out - 1;
  const uint32_t* w_lo = reinterpret_cast<const uint32_t*>(w + lo * (in / 2)) + t;
  const uint32_t* w_hi = reinterpret_cast<const uint32_t*>(w + hi * (in / 2)) + t;
  const uint8_t* s_lo = s + lo * blocks;
  const uint8_t* s_hi = s + hi * blocks;
  const bool has_b = g < rows;
  const uint2* xb = reinterpret_cast<const uint2*>(xq + (has_b ? group.x_row[g] : 0) * in) + t;
  const int n0 = 2 * t, n1 = 2 * t + 1;  // this lane's output columns (tokens)
  const int64_t r0 = n0 < rows ? group.x_row[n0] : 0, r1 = n1 < rows ? group.x_row[n1] : 0;
  float acc[4] = {0, 0, 0, 0};
#pragma unroll 4
  for (int64_t j = 0; j < blocks; ++j) {
    uint32_t a0, a1, a2, a3;
    Fp4ToE4m3(__ldg(w_lo + 4 * j), &a0, &a2);
    Fp4ToE4m3(__ldg(w_hi + 4 * j), &a1, &a3);
    uint32_t b0 = 0, b1 = 0;
    if (has_b) {
      const uint2 v = __ldg(xb + 4 * j);
      b0 = __byte_perm(v.x, v.y, 0x6420);
      b1 = __byte_perm(v.x, v.y, 0x7531);
    }
    float d[4];
    Mma(d, a0, a1, a2, a3, b0, b1);
    const float ws_lo = E8M0(__ldg(s_lo + j)), ws_hi = E8M0(__ldg(s_hi + j));
    const float xs0 = __ldg(x_scale + (j / 4) * x_rows + r0);
    const float xs1 = __ldg(x_scale + (j / 4) * x_rows + r1);
    // (d * xs) * ws: no product of two small scales underflows before d brings it back.
    acc[0] += d[0] * xs0 * ws_lo;
    acc[1] += d[1] * xs1 * ws_lo;
    acc[2] += d[2] * xs0 * ws_hi;
    acc[3] += d[3] * xs1 * ws_hi;
  }
  if (n0 < rows) {
    if (o0 + g < out) y[group.y_row[n0] * out + o0 + g] = acc[0] * 64.0f;
    if (o0 + g + 8 < out) y[group.y_row[n0] * out + o0 + g + 8] = acc[2] * 64.0f;
  }
  if (n1 < rows) {
    if (o0 + g < out) y[group.y_row[n1] * out + o0 + g] = acc[1] * 64.0f;
    if (o0 + g + 8 < out) y[group.y_row[n1] * out + o0 + g + 8] = acc[3] * 64.0f;
  }
}

}  // namespace

int Fp4ExpertMma(const uint8_t* const* weights, const uint8_t* const* scales, int64_t out,
                 int64_t in, const ExpertGroup* groups, int n_groups, const uint8_t* xq,
                 const float* x_scale, int64_t x_rows, float* y, void* stream,
                 const int32_t* live_groups) {
  if (in % 128 != 0 || out <= 0 || n_groups < 0 || x_rows % 4 != 0) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (n_groups == 0) return 0;
  // Groups run along grid.y, which holds at most 65,535: larger counts take several launches.
  for (int first = 0; first < n_groups; first += kMaxGridY) {
    const dim3 grid(static_cast<unsigned>((out + 16 * kWarps - 1) / (16 * kWarps)),
                    static_cast<unsigned>(std::min(kMaxGridY, n_groups - first)));
    Fp4ExpertMmaKernel<<<grid, kWarps * 32, 0, static_cast<cudaStream_t>(stream)>>>(
        weights, scales, out, in, groups, first, live_groups, xq, x_scale, x_rows, y);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
