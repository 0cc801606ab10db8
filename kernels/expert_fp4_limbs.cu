#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/act_limbs.cuh"
#include "kernels/device_math.cuh"
#include "kernels/exact_math.h"
#include "kernels/expert_fp4_limbs.h"
#include "kernels/expert_rows.cuh"
#include "kernels/int_limbs.h"
#include "kernels/launch.cuh"

namespace deepinfer::kernels {
namespace {

static_assert(kActLimbBlockBytes == kLimbBlockBytes, "one limb layout");
constexpr int kWarpsPerBlock = 4;
constexpr int kMaxGridY = 65535;

// One warp per 128-value block of a row (ActLimbsWarp).
__global__ void __launch_bounds__(32)
    ActLimbsKernel(const float* __restrict__ x, int64_t in, uint8_t* __restrict__ limbs,
                   float* __restrict__ scales) {
  AwaitProducers();
  ActLimbsWarp(x, in, blockIdx.y, blockIdx.x, limbs, scales, threadIdx.x);
}

// Sum of four signed-byte products with unsigned bytes (x_u8), and with signed ones (x_s8).
__device__ __forceinline__ int Dp4aSignedUnsigned(uint32_t w, uint32_t x_u8, int c) {
  int d;
  asm("dp4a.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(w), "r"(x_u8), "r"(c));
  return d;
}
__device__ __forceinline__ int Dp4aSigned(uint32_t w, uint32_t x_s8, int c) {
  return __dp4a(static_cast<int>(w), static_cast<int>(x_s8), c);
}

struct LimbMats {
  const uint8_t *const *w, *const *s, *const *w2, *const *s2;
  float limit;
};

// A warp takes Outs output rows of one one-row group (Paired: Outs / 2 rows of the gate weights
// and the same rows of the up weights, and writes their SwiGLU). Each lane takes every 32nd
// 32-weight block: one 16-byte weight load a row, six 16-byte limb loads shared by the rows, and
// per row a block sum of 24 DP4A in int32 (|sum| < 2^27), scaled by the weight's e8m0 scale and
// the activations' scale (powers of two: exact) and added in fp32. A row's sums do not depend on
// Outs or Paired, so the paired launch gives the single one's values bit for bit.
// Blocks of four warps: a one-token step launches few blocks, and smaller ones spread over more
// SMs and leave a shorter last wave. Four rows a warp need more than the 80 registers six such
// blocks an SM leave (they spilled their row pointers and re-formed the decode tables every step);
// five blocks keep them in 96 (bench/RESULTS-gpu.md, twenty-second session).
template <int Outs, bool Paired>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, Outs == 4 ? 5 : 6)
    Fp4LimbsKernel(LimbMats mats, int64_t out, int64_t in, const ExpertGroup* __restrict__ groups,
                   int first, const int32_t* __restrict__ live, const uint8_t* __restrict__ limbs,
                   const float* __restrict__ limb_scales, float* __restrict__ y) {
  AwaitProducers();
  if (live != nullptr && first + static_cast<int>(blockIdx.y) >= *live) return;
  __shared__ ExpertGroup group;
  if (threadIdx.x == 0) group = groups[first + blockIdx.y];
  __syncthreads();
  if (group.rows != 1) return;
  constexpr int kPerMat = Paired ? Outs / 2 : Outs;
  const int64_t o0 =
      (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5)) * kPerMat;
  if (o0 >= out) return;
  const int lane = threadIdx.x & 31, expert = group.expert;
  const int64_t chunks = in / 32;
  const uint4* wr[Outs];
  const uint8_t* sr[Outs];
  WarpWeightRows<Outs, Paired>(mats.w[expert], mats.s[expert], Paired ? mats.w2[expert] : nullptr,
                               Paired ? mats.s2[expert] : nullptr, out, in, o0, wr, sr);
  const int64_t x_row = group.x_row[0];
  const uint4* xl = reinterpret_cast<const uint4*>(limbs + x_row * chunks * kLimbBlockBytes);
  const float* xs = limb_scales + x_row * (in / 128);
  float acc[Outs];
#pragma unroll
  for (int j = 0; j < Outs; ++j) acc[j] = 0.0f;
  for (int64_t c = lane; c < chunks; c += 32) {
    uint4 packed[Outs];
    uint32_t scale[Outs];
#pragma unroll
    for (int j = 0; j < Outs; ++j) {
      packed[j] = __ldg(wr[j] + c);
      scale[j] = __ldg(sr[j] + c);
    }
    uint32_t plane[3][8];  // the block's 32 limbs of each plane, four a word
#pragma unroll
    for (int i = 0; i < 6; ++i) {
      const uint4 l = __ldg(xl + c * 6 + i);
      plane[i / 2][4 * (i % 2)] = l.x;
      plane[i / 2][4 * (i % 2) + 1] = l.y;
      plane[i / 2][4 * (i % 2) + 2] = l.z;
      plane[i / 2][4 * (i % 2) + 3] = l.w;
    }
    const float x_scale = __ldg(xs + c / 4);
#pragma unroll
    for (int j = 0; j < Outs; ++j) {
      int a0 = 0, a1 = 0, a2 = 0;
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // one 32-bit word: 8 weights, two limb words a plane
        const uint32_t word = q == 0   ? packed[j].x
                              : q == 1 ? packed[j].y
                              : q == 2 ? packed[j].z
                                       : packed[j].w;
        uint32_t lo, hi;
        DoubledE2m1x8(word, &lo, &hi);
        a0 = Dp4aSignedUnsigned(hi, plane[0][2 * q + 1],
                                Dp4aSignedUnsigned(lo, plane[0][2 * q], a0));
        a1 = Dp4aSignedUnsigned(hi, plane[1][2 * q + 1],
                                Dp4aSignedUnsigned(lo, plane[1][2 * q], a1));
        a2 = Dp4aSigned(hi, plane[2][2 * q + 1], Dp4aSigned(lo, plane[2][2 * q], a2));
      }
      // |a2| <= 32 * 12 * 4, |a1|, |a0| <= 32 * 12 * 255: the sum stays far inside int32.
      const int sum = JoinLimbSums(a0, a1, a2);
      acc[j] += static_cast<float>(sum) * (E8M0(scale[j]) * x_scale);
    }
  }
#pragma unroll
  for (int j = 0; j < kPerMat; ++j) {
    const float v = WarpSum(acc[j]);
    float result = v;
    if constexpr (Paired) result = SwiGluF(v, WarpSum(acc[j + kPerMat]), mats.limit);
    if (lane == 0 && o0 + j < out) y[group.y_row[0] * out + o0 + j] = result;
  }
}

template <int Outs, bool Paired>
void LaunchLimbs(const LimbMats& mats, int64_t out, int64_t in, const ExpertGroup* groups,
                 int n_groups, const int32_t* live, const uint8_t* limbs, const float* scales,
                 float* y, cudaStream_t stream) {
  const int64_t per_block = kWarpsPerBlock * (Paired ? Outs / 2 : Outs);
  for (int first = 0; first < n_groups; first += kMaxGridY) {
    const dim3 grid(static_cast<unsigned>((out + per_block - 1) / per_block),
                    static_cast<unsigned>(std::min(kMaxGridY, n_groups - first)));
    LaunchKernel(Fp4LimbsKernel<Outs, Paired>, grid, kWarpsPerBlock * 32, 0, stream, mats, out, in,
                 groups, first, live, limbs, scales, y);
  }
}

// Four rows a warp share each limb load, as long as enough warps stay in flight; otherwise two.
// The paired launch always takes four (two gate rows and their up rows): its warps are twice as
// many for the same output rows.
template <bool Paired>
int Dispatch(const LimbMats& mats, int64_t out, int64_t in, const ExpertGroup* groups, int n_groups,
             const uint8_t* limbs, const float* scales, float* y, void* stream,
             const int32_t* live) {
  if (in % 128 != 0 || out <= 0 || n_groups < 0) return static_cast<int>(cudaErrorInvalidValue);
  if (n_groups == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  if (Paired || n_groups * (out / 4) >= 2048) {
    LaunchLimbs<4, Paired>(mats, out, in, groups, n_groups, live, limbs, scales, y, s);
  } else {
    LaunchLimbs<2, Paired>(mats, out, in, groups, n_groups, live, limbs, scales, y, s);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int ActLimbsFp8(const float* x, int64_t rows, int64_t in, uint8_t* limbs, float* scales,
                void* stream) {
  if (in % 128 != 0 || rows < 0 || rows > kMaxGridY) return static_cast<int>(cudaErrorInvalidValue);
  if (rows == 0) return 0;
  LaunchKernel(ActLimbsKernel, dim3(static_cast<unsigned>(in / 128), static_cast<unsigned>(rows)),
               32, 0, static_cast<cudaStream_t>(stream), x, in, limbs, scales);
  return static_cast<int>(cudaGetLastError());
}

int Fp4ExpertGemvLimbs(const uint8_t* const* weights, const uint8_t* const* scales, int64_t out,
                       int64_t in, const ExpertGroup* groups, int n_groups, const uint8_t* limbs,
                       const float* limb_scales, float* y, void* stream,
                       const int32_t* live_groups) {
  const LimbMats mats{weights, scales, nullptr, nullptr, 0.0f};
  return Dispatch<false>(mats, out, in, groups, n_groups, limbs, limb_scales, y, stream,
                         live_groups);
}

int Fp4ExpertGateUpLimbs(const uint8_t* const* w1, const uint8_t* const* s1,
                         const uint8_t* const* w3, const uint8_t* const* s3, int64_t out,
                         int64_t in, const ExpertGroup* groups, int n_groups, float limit,
                         const uint8_t* limbs, const float* limb_scales, float* y, void* stream,
                         const int32_t* live_groups) {
  const LimbMats mats{w1, s1, w3, s3, limit};
  return Dispatch<true>(mats, out, in, groups, n_groups, limbs, limb_scales, y, stream,
                        live_groups);
}

}  // namespace deepinfer::kernels
