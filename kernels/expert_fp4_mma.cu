// The routed experts on tensor cores: MXFP4 weights against FP8 activations with mma.sync
// m16n8k32 (e4m3), one warp per 16 output rows and window of up to 8 groups of up to 8 tokens
// (the mma's N): each expert's weights are read once per window rather than once per group.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/device_math.cuh"
#include "kernels/expert_fp4.h"
#include "kernels/expert_fp4_direct.cuh"
#include "kernels/fp4_e4m3.h"
#include "kernels/launch.cuh"
#include "kernels/mma_sm90.cuh"

namespace deepinfer::kernels {
namespace {

using expert_direct::ExpertGroupDirect;
using expert_direct::kDirectStages;
using expert_direct::kTileBytes;

constexpr int kWarps = 4;
constexpr int kMaxGridY = 65535;

// A staged 128-wide k slice of activations: one row of 128 e4m3 bytes per token slot, padded to
// 160 bytes so that the 8-byte fragment reads of a half-warp (tokens g = 0..3, offsets 8t) fall
// in distinct banks.
constexpr int kSliceStride = 160;

// The activations of a run's 8n token slots, columns [k0, k0 + 128), into `slice`, by the whole
// block as one commit group. A slot past its group's rows copies the group's first row (its
// result is never written).
__device__ __forceinline__ void StageSlice(uint8_t* slice, const ExpertGroup* run, int n,
                                           const uint8_t* __restrict__ xq, int64_t in, int64_t k0) {
  for (int c = threadIdx.x; c < n * 64; c += blockDim.x) {
    const int slot = c >> 3, piece = c & 7;
    const ExpertGroup& grp = run[slot >> 3];
    const int r = slot & 7;
    const int64_t row = r < grp.rows ? grp.x_row[r] : (grp.rows > 0 ? grp.x_row[0] : 0);
    CpAsync16(slice + slot * kSliceStride + piece * 16, xq + row * in + k0 + piece * 16);
  }
  CpAsyncCommit();
}

// One warp's 16 output rows against a run of n (<= kRun) consecutive groups of one expert, 128
// columns at a time: the block stages each slice of the run's activations in shared memory
// (double-buffered cp.async) and each warp prefetches its next slice of weights into registers,
// so every weight is loaded and converted once for all n groups. Lane (g = lane / 4, t = lane %
// 4) holds, per 32-weight block: A, weights 8t .. 8t + 7 of rows g and g + 8 (one 32-bit load
// each; even weights in the mma's first k-half, odd in the second: any order of k works as long
// as B uses the same); B, the same 8 activations of each group's token g. Each block's product is
// scaled by its weight scale (per row, exact: a power of two) into a per-128 sum, which the
// activation scale (per token and 128 values) scales into the total. A group's sums depend on its
// own rows only, so they are the same whatever run or window it is computed in.
template <int kRun>
__device__ __forceinline__ void ExpertRun(const ExpertGroup* run, int n, const uint8_t* w,
                                          const uint8_t* s, int64_t out, int64_t in, int64_t o0,
                                          uint8_t (*slices)[kRun * 8 * kSliceStride],
                                          const uint8_t* __restrict__ xq,
                                          const float* __restrict__ x_scale, int64_t x_rows,
                                          float* __restrict__ y) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t blocks = in / 32, stages = in / 128;
  const int64_t lo = o0 + g < out ? o0 + g : out - 1, hi = o0 + g + 8 < out ? o0 + g + 8 : out - 1;
  const uint32_t* w_lo = reinterpret_cast<const uint32_t*>(w + lo * (in / 2)) + t;
  const uint32_t* w_hi = reinterpret_cast<const uint32_t*>(w + hi * (in / 2)) + t;
  const uint32_t* s_lo = reinterpret_cast<const uint32_t*>(s + lo * blocks);
  const uint32_t* s_hi = reinterpret_cast<const uint32_t*>(s + hi * blocks);
  const int n0 = 2 * t, n1 = 2 * t + 1;  // this lane's output columns (tokens)
  int32_t r0[kRun], r1[kRun];
  float acc[kRun][4];
#pragma unroll
  for (int i = 0; i < kRun; ++i) {
    const ExpertGroup& grp = run[i < n ? i : 0];
    r0[i] = n0 < grp.rows ? grp.x_row[n0] : 0;
    r1[i] = n1 < grp.rows ? grp.x_row[n1] : 0;
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[i][c] = 0.0f;
  }
  uint32_t next_w[8], next_s[2];
  auto load_weights = [&](int64_t stage) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      next_w[2 * q] = __ldg(w_lo + 4 * (4 * stage + q));
      next_w[2 * q + 1] = __ldg(w_hi + 4 * (4 * stage + q));
    }
    next_s[0] = __ldg(s_lo + stage);  // four e8m0 scales, blocks 4 stage .. 4 stage + 3
    next_s[1] = __ldg(s_hi + stage);
  };
  StageSlice(slices[0], run, n, xq, in, 0);
  load_weights(0);
  for (int64_t stage = 0; stage < stages; ++stage) {
    if (stage + 1 < stages) {
      StageSlice(slices[(stage + 1) & 1], run, n, xq, in, 128 * (stage + 1));
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();
    uint32_t cur_w[8], cur_s[2];
#pragma unroll
    for (int c = 0; c < 8; ++c) cur_w[c] = next_w[c];
    cur_s[0] = next_s[0];
    cur_s[1] = next_s[1];
    if (stage + 1 < stages) load_weights(stage + 1);
    float xs0[kRun], xs1[kRun];
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
      xs0[i] = __ldg(x_scale + stage * x_rows + r0[i]);
      xs1[i] = __ldg(x_scale + stage * x_rows + r1[i]);
    }
    const uint8_t* slice = slices[stage & 1];
    float part[kRun][4];
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
#pragma unroll
      for (int c = 0; c < 4; ++c) part[i][c] = 0.0f;
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t a0, a1, a2, a3;
      Fp4ToE4m3(cur_w[2 * q], &a0, &a2);
      Fp4ToE4m3(cur_w[2 * q + 1], &a1, &a3);
      const float ws_lo = E8M0((cur_s[0] >> (8 * q)) & 0xff);
      const float ws_hi = E8M0((cur_s[1] >> (8 * q)) & 0xff);
      uint2 v[kRun];  // read before the mmas, whether or not the group is in the run
#pragma unroll
      for (int i = 0; i < kRun; ++i) {
        v[i] = *reinterpret_cast<const uint2*>(slice + (8 * i + g) * kSliceStride + 32 * q + 8 * t);
      }
#pragma unroll
      for (int i = 0; i < kRun; ++i) {
        if (i < n) {
          float d[4];
          Mma(d, a0, a1, a2, a3, __byte_perm(v[i].x, v[i].y, 0x6420),
              __byte_perm(v[i].x, v[i].y, 0x7531));
          part[i][0] += d[0] * ws_lo;
          part[i][1] += d[1] * ws_lo;
          part[i][2] += d[2] * ws_hi;
          part[i][3] += d[3] * ws_hi;
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
      acc[i][0] += part[i][0] * xs0[i];
      acc[i][1] += part[i][1] * xs1[i];
      acc[i][2] += part[i][2] * xs0[i];
      acc[i][3] += part[i][3] * xs1[i];
    }
    __syncthreads();  // every warp is done with this slice before it is staged over
  }
#pragma unroll
  for (int i = 0; i < kRun; ++i) {
    if (i >= n) break;
    const ExpertGroup& grp = run[i];
    const int rows = grp.rows;
    if (n0 < rows) {
      if (o0 + g < out) y[grp.y_row[n0] * out + o0 + g] = acc[i][0] * 64.0f;
      if (o0 + g + 8 < out) y[grp.y_row[n0] * out + o0 + g + 8] = acc[i][2] * 64.0f;
    }
    if (n1 < rows) {
      if (o0 + g < out) y[grp.y_row[n1] * out + o0 + g] = acc[i][1] * 64.0f;
      if (o0 + g + 8 < out) y[grp.y_row[n1] * out + o0 + g + 8] = acc[i][3] * 64.0f;
    }
  }
}

// The tiles are static shared memory, which a block may hold up to 48 KB of (with the group).
static_assert(kWarps * kDirectStages * kTileBytes + 128 <= 48 * 1024);

// The window's groups [g0, end) in runs of one expert (kRun > 1): every warp of the block takes
// part in staging each run's slices, so none leaves early; warps whose rows lie past `out` write
// nothing.
template <int kRun>
__device__ __forceinline__ void RunsOfWindow(const uint8_t* const* __restrict__ weights,
                                             const uint8_t* const* __restrict__ scales, int64_t out,
                                             int64_t in, const ExpertGroup* __restrict__ groups,
                                             int g0, int end, const uint8_t* __restrict__ xq,
                                             const float* __restrict__ x_scale, int64_t x_rows,
                                             float* __restrict__ y) {
  __shared__ ExpertGroup window[kRun];
  __shared__ __align__(16) uint8_t slices[2][kRun * 8 * kSliceStride];
  for (int i = threadIdx.x; i < end - g0; i += blockDim.x) window[i] = groups[g0 + i];
  __syncthreads();
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * 16;
  for (int r = 0; r < end - g0;) {
    // A malformed group (rows > 8) is written nowhere, as by the CUDA-core GEMV.
    if (window[r].rows > kExpertGroupRows) {
      ++r;
      continue;
    }
    const int expert = window[r].expert;
    int n = 1;
    while (r + n < end - g0 && window[r + n].expert == expert &&
           window[r + n].rows <= kExpertGroupRows)
      ++n;
    ExpertRun<kRun>(window + r, n, weights[expert], scales[expert], out, in, o0, slices, xq,
                    x_scale, x_rows, y);
    r += n;
  }
}

// The matrices of one launch, picked by blockIdx.z: one, or the gate and up weights of the same
// shape (two products from one launch, twice the blocks to stream them).
struct MmaMats {
  const uint8_t* const* weights[2];
  const uint8_t* const* scales[2];
  float* y[2];
};

// One block: kWarps warps of 16 output rows of matrix blockIdx.z over the window of kRun groups
// from (first + blockIdx.y) * kRun. Windows past the live count exit.
template <int kRun>
__global__ void __launch_bounds__(kWarps * 32)
    Fp4ExpertMmaKernel(MmaMats mats, int64_t out, int64_t in,
                       const ExpertGroup* __restrict__ groups, int n_groups, int first,
                       const int32_t* __restrict__ live, const uint8_t* __restrict__ xq,
                       const float* __restrict__ x_scale, int64_t x_rows) {
  AwaitProducers();
  const int g0 = (first + static_cast<int>(blockIdx.y)) * kRun;
  const int end = min(g0 + kRun, live != nullptr ? min(*live, n_groups) : n_groups);
  if (g0 >= end) return;
  // Selects, not an index: a parameter array indexed at run time would be copied to the stack.
  const bool second = blockIdx.z != 0;
  const uint8_t* const* weights = second ? mats.weights[1] : mats.weights[0];
  const uint8_t* const* scales = second ? mats.scales[1] : mats.scales[0];
  float* y = second ? mats.y[1] : mats.y[0];
  if constexpr (kRun == 1) {
    __shared__ ExpertGroup group;
    __shared__ __align__(128) uint8_t tiles[kWarps][kDirectStages * kTileBytes];
    if (threadIdx.x == 0) group = groups[g0];
    __syncthreads();
    const int warp = threadIdx.x >> 5;
    const int64_t o0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * 16;
    // A malformed group (rows > 8) is written nowhere, as by the CUDA-core GEMV.
    if (o0 >= out || group.rows > kExpertGroupRows) return;
    ExpertGroupDirect(group, weights[group.expert], scales[group.expert], out, in, o0, xq, x_scale,
                      x_rows, y, tiles[warp]);
  } else {
    RunsOfWindow<kRun>(weights, scales, out, in, groups, g0, end, xq, x_scale, x_rows, y);
  }
}

template <int kRun>
void LaunchExpertMma(const MmaMats& mats, int matrices, int64_t out, int64_t in,
                     const ExpertGroup* groups, int n_groups, const uint8_t* xq,
                     const float* x_scale, int64_t x_rows, cudaStream_t stream,
                     const int32_t* live_groups) {
  const int windows = (n_groups + kRun - 1) / kRun;
  // Windows run along grid.y, which holds at most 65,535: more take several launches.
  for (int first = 0; first < windows; first += kMaxGridY) {
    const dim3 grid(static_cast<unsigned>((out + 16 * kWarps - 1) / (16 * kWarps)),
                    static_cast<unsigned>(std::min(kMaxGridY, windows - first)),
                    static_cast<unsigned>(matrices));
    LaunchKernel(Fp4ExpertMmaKernel<kRun>, grid, kWarps * 32, 0, stream, mats, out, in, groups,
                 n_groups, first, live_groups, xq, x_scale, x_rows);
  }
}

int LaunchMats(const MmaMats& mats, int matrices, int64_t out, int64_t in,
               const ExpertGroup* groups, int n_groups, const uint8_t* xq, const float* x_scale,
               int64_t x_rows, void* stream, const int32_t* live_groups, int window_groups) {
  if (in % 128 != 0 || out <= 0 || n_groups < 0 || x_rows % 4 != 0) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (n_groups == 0) return 0;
  const int index = window_groups == 1   ? 0
                    : window_groups == 2 ? 1
                    : window_groups == 4 ? 2
                    : window_groups == 8 ? 3
                                         : -1;
  if (index < 0) return static_cast<int>(cudaErrorInvalidValue);
  constexpr decltype(&LaunchExpertMma<1>) kLaunch[] = {&LaunchExpertMma<1>, &LaunchExpertMma<2>,
                                                       &LaunchExpertMma<4>, &LaunchExpertMma<8>};
  kLaunch[index](mats, matrices, out, in, groups, n_groups, xq, x_scale, x_rows,
                 static_cast<cudaStream_t>(stream), live_groups);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int Fp4ExpertMma(const uint8_t* const* weights, const uint8_t* const* scales, int64_t out,
                 int64_t in, const ExpertGroup* groups, int n_groups, const uint8_t* xq,
                 const float* x_scale, int64_t x_rows, float* y, void* stream,
                 const int32_t* live_groups, int window_groups) {
  const MmaMats mats{{weights, weights}, {scales, scales}, {y, y}};
  return LaunchMats(mats, 1, out, in, groups, n_groups, xq, x_scale, x_rows, stream, live_groups,
                    window_groups);
}

int Fp4ExpertMmaPair(const uint8_t* const* w1, const uint8_t* const* s1, float* y1,
                     const uint8_t* const* w3, const uint8_t* const* s3, float* y3, int64_t out,
                     int64_t in, const ExpertGroup* groups, int n_groups, const uint8_t* xq,
                     const float* x_scale, int64_t x_rows, void* stream, const int32_t* live_groups,
                     int window_groups) {
  const MmaMats mats{{w1, w3}, {s1, s3}, {y1, y3}};
  return LaunchMats(mats, 2, out, in, groups, n_groups, xq, x_scale, x_rows, stream, live_groups,
                    window_groups);
}

int ExpertMmaWindow(int64_t pairs, int experts) {
  if (experts <= 0 || pairs <= 0) return 1;
  const int64_t groups_per_expert = pairs / (int64_t{experts} * kExpertGroupRows);
  if (groups_per_expert >= 8) return 8;
  if (groups_per_expert >= 4) return 4;
  return groups_per_expert >= 2 ? 2 : 1;
}

}  // namespace deepinfer::kernels
