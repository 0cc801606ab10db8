#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/device_math.cuh"
#include "kernels/exact_math.h"
#include "kernels/expert_fp4.h"
#include "kernels/expert_rows.cuh"
#include "kernels/launch.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kMaxGridY = 65535;

// Four e2m1 nibbles (the low 16 bits of `nib`, first weight lowest) to floats without a table in
// memory: one byte permutation picks each magnitude's fp16 high byte (0, 0.5, 1, 1.5, 2, 3, 4, 6
// are 0x00, 0x38, 0x3c, 0x3e, 0x40, 0x42, 0x44, 0x46 with a zero low byte), the sign bits are
// moved to bit 15 of their halves, and the hardware widens fp16 to fp32 exactly.
__device__ __forceinline__ void E2m1x4(uint32_t nib, float* out) {
  const uint32_t mag = __byte_perm(0x3E3C3800u, 0x46444240u, nib & 0x7777u);
  const uint32_t h01 =
      __byte_perm(mag, 0u, 0x1404) | ((nib << 12) & 0x8000u) | ((nib << 24) & 0x80000000u);
  const uint32_t h23 =
      __byte_perm(mag, 0u, 0x3424) | ((nib << 4) & 0x8000u) | ((nib << 16) & 0x80000000u);
  const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&h01));
  const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&h23));
  out[0] = a.x;
  out[1] = a.y;
  out[2] = b.x;
  out[3] = b.y;
}

// A warp takes Outs output rows of one group of Rows token rows. Each lane loads 16 bytes of a
// weight row at a time (32 weights: exactly one e8m0 scale block) so a warp streams 512
// contiguous bytes per row and step; the activations it multiplies come from L1, shared by the
// Outs rows. Products of a block are summed before its power-of-two scale is applied, which
// rounds as scaling each weight would. Rows is a template argument so every array stays in
// registers. (Measured on the H200: giving each lane 4-byte words 32 bytes apart, so that the
// activation loads coalesce better, was 40 % slower: more load instructions.)
// Paired: the warp's rows are Outs / 2 rows of the gate weights (m.w) and the same rows of the up
// weights (m.w2), and it writes their clamped SwiGLU.
struct ExpertMats {
  const uint8_t *w, *s, *w2, *s2;
  float limit;
};

template <int Outs, int Rows, bool Paired>
__device__ __forceinline__ void ExpertRows(const ExpertGroup& group, const ExpertMats& m,
                                           int64_t out, int64_t in, int64_t o0,
                                           const float* __restrict__ x, float* __restrict__ y) {
  constexpr int kPerMat = Paired ? Outs / 2 : Outs;
  const int lane = threadIdx.x & 31;
  const int64_t chunks = in / 32;
  const uint4* wr[Outs];
  const uint8_t* sr[Outs];
  WarpWeightRows<Outs, Paired>(m.w, m.s, m.w2, m.s2, out, in, o0, wr, sr);
  const float* xr[Rows];
#pragma unroll
  for (int r = 0; r < Rows; ++r) xr[r] = x + group.x_row[r] * in;
  float acc[Outs][Rows];
#pragma unroll
  for (int j = 0; j < Outs; ++j) {
#pragma unroll
    for (int r = 0; r < Rows; ++r) acc[j][r] = 0.0f;
  }
  for (int64_t c = lane; c < chunks; c += 32) {
    uint4 packed[Outs];
    float scale[Outs];
#pragma unroll
    for (int j = 0; j < Outs; ++j) {
      packed[j] = __ldg(wr[j] + c);
      scale[j] = E8M0(__ldg(sr[j] + c));
    }
    float part[Outs][Rows];
#pragma unroll
    for (int j = 0; j < Outs; ++j) {
#pragma unroll
      for (int r = 0; r < Rows; ++r) part[j][r] = 0.0f;
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {  // one 32-bit word: 8 weights
      float wv[Outs][8];
#pragma unroll
      for (int j = 0; j < Outs; ++j) {
        const uint32_t word = q == 0   ? packed[j].x
                              : q == 1 ? packed[j].y
                              : q == 2 ? packed[j].z
                                       : packed[j].w;
        E2m1x4(word, &wv[j][0]);
        E2m1x4(word >> 16, &wv[j][4]);
      }
#pragma unroll
      for (int r = 0; r < Rows; ++r) {
        const float4* xv = reinterpret_cast<const float4*>(xr[r] + c * 32 + q * 8);
        const float4 a = __ldg(xv), b = __ldg(xv + 1);
#pragma unroll
        for (int j = 0; j < Outs; ++j) {
          part[j][r] += wv[j][0] * a.x + wv[j][1] * a.y + wv[j][2] * a.z + wv[j][3] * a.w +
                        wv[j][4] * b.x + wv[j][5] * b.y + wv[j][6] * b.z + wv[j][7] * b.w;
        }
      }
    }
#pragma unroll
    for (int j = 0; j < Outs; ++j) {
#pragma unroll
      for (int r = 0; r < Rows; ++r) acc[j][r] += part[j][r] * scale[j];
    }
  }
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
#pragma unroll
    for (int j = 0; j < kPerMat; ++j) {
      const float v = WarpSum(acc[j][r]);
      float result = v;
      if constexpr (Paired) result = SwiGluF(v, WarpSum(acc[j + kPerMat][r]), m.limit);
      if (lane == 0 && o0 + j < out) y[group.y_row[r] * out + o0 + j] = result;
    }
  }
}

// ExpertRows<Outs, group.rows> for rows up to MaxRows; a group with more rows (or none) writes
// nothing.
template <int Outs, int R, int MaxRows, bool Paired>
__device__ __forceinline__ void DispatchRows(const ExpertGroup& group, const ExpertMats& m,
                                             int64_t out, int64_t in, int64_t o0, const float* x,
                                             float* y) {
  if constexpr (R <= MaxRows) {
    if (group.rows == R) return ExpertRows<Outs, R, Paired>(group, m, out, in, o0, x, y);
    DispatchRows<Outs, R + 1, MaxRows, Paired>(group, m, out, in, o0, x, y);
  }
}

// The weights of one launch: w/s, and for the paired form w2/s2 and the SwiGLU limit.
struct LaunchMats {
  const uint8_t *const *w, *const *s, *const *w2, *const *s2;
  float limit;
};

// MaxRows bounds the groups this instantiation serves: its registers are sized for them, so a
// batch of single rows keeps the occupancy that streaming HBM needs.
template <int Outs, int MaxRows, bool Paired>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    Fp4ExpertKernel(LaunchMats mats, int64_t out, int64_t in,
                    const ExpertGroup* __restrict__ groups, int first,
                    const int32_t* __restrict__ live, const float* __restrict__ x,
                    float* __restrict__ y) {
  AwaitProducers();
  if (live != nullptr && first + static_cast<int>(blockIdx.y) >= *live) return;
  __shared__ ExpertGroup group;
  if (threadIdx.x == 0) group = groups[first + blockIdx.y];
  __syncthreads();
  constexpr int kPerMat = Paired ? Outs / 2 : Outs;
  const int64_t o0 =
      (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5)) * kPerMat;
  if (o0 >= out) return;
  const int e = group.expert;
  const ExpertMats m{mats.w[e], mats.s[e], Paired ? mats.w2[e] : nullptr,
                     Paired ? mats.s2[e] : nullptr, mats.limit};
  DispatchRows<Outs, 1, MaxRows, Paired>(group, m, out, in, o0, x, y);
}

template <int Outs, int MaxRows, bool Paired>
void LaunchRows(const LaunchMats& mats, int64_t out, int64_t in, const ExpertGroup* groups,
                int n_groups, const int32_t* live, const float* x, float* y, cudaStream_t stream) {
  const int64_t per_block = kWarpsPerBlock * (Paired ? Outs / 2 : Outs);
  // Groups run along grid.y, which holds at most 65,535: larger counts take several launches.
  for (int first = 0; first < n_groups; first += kMaxGridY) {
    const dim3 grid(static_cast<unsigned>((out + per_block - 1) / per_block),
                    static_cast<unsigned>(std::min(kMaxGridY, n_groups - first)));
    LaunchKernel(Fp4ExpertKernel<Outs, MaxRows, Paired>, grid, kWarpsPerBlock * 32, 0, stream, mats,
                 out, in, groups, first, live, x, y);
  }
}

template <int Outs, bool Paired>
void Launch(const LaunchMats& mats, int64_t out, int64_t in, const ExpertGroup* groups,
            int n_groups, const int32_t* live, int max_rows, const float* x, float* y,
            cudaStream_t stream) {
  if (max_rows <= 1)
    return LaunchRows<Outs, 1, Paired>(mats, out, in, groups, n_groups, live, x, y, stream);
  if (max_rows <= 2)
    return LaunchRows<Outs, 2, Paired>(mats, out, in, groups, n_groups, live, x, y, stream);
  if (max_rows <= 4)
    return LaunchRows<Outs, 4, Paired>(mats, out, in, groups, n_groups, live, x, y, stream);
  LaunchRows<Outs, 8, Paired>(mats, out, in, groups, n_groups, live, x, y, stream);
}

// Four rows per warp amortise the activation loads, as long as enough warps stay in flight to
// keep HBM busy (bench/RESULTS-gpu.md, "FP8 block-scaled GEMV", measured the same trade-off). The
// paired form counts a gate row and its up row as two.
template <bool Paired>
int Dispatch(const LaunchMats& mats, int64_t out, int64_t in, const ExpertGroup* groups,
             int n_groups, int max_rows, const float* x, float* y, void* stream,
             const int32_t* live) {
  if (in % 32 != 0 || out <= 0 || n_groups < 0 || max_rows < 1 || max_rows > kExpertGroupRows) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (n_groups == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t warps_at_4 = n_groups * ((Paired ? 2 : 1) * out / 4);
  if (warps_at_4 >= 2048) {
    Launch<4, Paired>(mats, out, in, groups, n_groups, live, max_rows, x, y, s);
  } else if (warps_at_4 * 2 >= 2048 || Paired) {
    Launch<2, Paired>(mats, out, in, groups, n_groups, live, max_rows, x, y, s);
  } else {
    Launch<1, false>(mats, out, in, groups, n_groups, live, max_rows, x, y, s);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int Fp4ExpertGemv(const uint8_t* const* weights, const uint8_t* const* scales, int64_t out,
                  int64_t in, const ExpertGroup* groups, int n_groups, int max_rows, const float* x,
                  float* y, void* stream, const int32_t* live_groups) {
  const LaunchMats mats{weights, scales, nullptr, nullptr, 0.0f};
  return Dispatch<false>(mats, out, in, groups, n_groups, max_rows, x, y, stream, live_groups);
}

int Fp4ExpertGateUp(const uint8_t* const* w1, const uint8_t* const* s1, const uint8_t* const* w3,
                    const uint8_t* const* s3, int64_t out, int64_t in, const ExpertGroup* groups,
                    int n_groups, int max_rows, float limit, const float* x, float* y, void* stream,
                    const int32_t* live_groups) {
  const LaunchMats mats{w1, s1, w3, s3, limit};
  return Dispatch<true>(mats, out, in, groups, n_groups, max_rows, x, y, stream, live_groups);
}

}  // namespace deepinfer::kernels
