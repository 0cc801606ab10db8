// The folded MXFP4 expert GEMM on wgmma (kernels/expert_fp4_wgmma.h). A block of two warpgroups
// owns 128 output rows of one matrix and a window of 8 groups; for each run of one expert in the
// window it walks the columns 128 at a time, software-pipelined: while the tensor cores multiply
// slice s, the threads convert slice s + 1's weights into the other shared-memory buffer and its
// activations arrive by cp.async.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/device_math.cuh"
#include "kernels/expert_fp4_wgmma.h"
#include "kernels/fp4_e4m3.h"
#include "kernels/launch.cuh"
#include "kernels/mma_sm90.cuh"
#include "kernels/wgmma_sm90.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kWarpgroups = 2;  // each 64 output rows of the block's tile
constexpr int kThreads = 128 * kWarpgroups;
constexpr int kTileRows = 64 * kWarpgroups;
constexpr int kSlots = 8 * kFoldedWindowGroups;  // token slots: the wgmma's N
constexpr int kMaxShift = 12;                    // FoldScales' bound
constexpr int kMaxGridY = 65535;

// Shared memory of a block. A ring of kRing 128-column slices in flight (cp.async): the raw e2m1
// weights [128 rows][64 bytes], each converter's copy of its row's four e8m0 scales, the slots'
// activation scales and activations [64 slots][128] (128-byte swizzled, the wgmma's B). Two
// converted slices: e4m3 weights [128 rows][128] (swizzled, the wgmma's A), each row's folded
// scale and each slot's activation scale. The magnitude tables of every shift; the window.
constexpr int kRing = 4;
struct alignas(1024) Smem {
  uint8_t b[kRing][kSlots * 128];
  uint8_t a[2][kTileRows * 128];
  uint8_t raw[kRing][kTileRows * 64];
  uint32_t raw_scale[kRing][kThreads];
  float raw_x_scale[kRing][kSlots];
  float w_scale[2][kTileRows];
  float x_scale[2][kSlots];
  uint2 table[kMaxShift + 1];
  ExpertGroup window[kFoldedWindowGroups];
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024;  // room to align the dynamic base

__device__ __forceinline__ uint32_t Prmt(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

// Eight e2m1 weights (one word, weight 0 in the lowest nibble) as eight e4m3 bytes in column
// order, each 2^(shift - 6) times its weight: the magnitude from the shift's table (one byte
// permute per four weights) and the sign replicated out of the nibble's top bit by a second
// permute (its selector's bit 3), masked to bit 7.
__device__ __forceinline__ uint2 ShiftedE4m3(uint32_t w, uint2 table) {
  const uint32_t up = w << 4;  // nibbles 0, 2, 4, 6's sign bits at their bytes' bit 7
  const uint32_t lo = Prmt(table.x, table.y, w & 0x7777u);
  const uint32_t hi = Prmt(table.x, table.y, (w >> 16) & 0x7777u);
  const uint32_t sign_lo = Prmt(up, w, 0xd9c8u);
  const uint32_t sign_hi = Prmt(up, w, 0xfbeau);
  return make_uint2(lo | (sign_lo & 0x80808080u), hi | (sign_hi & 0x80808080u));
}

struct WgmmaMats {
  const uint8_t* const* weights[2];
  const uint8_t* const* scales[2];
  float* y[2];
};

// A run of n groups of one expert: slices of weights rows [o0, o0 + 128) and of the run's tokens.
__device__ void FoldedRun(Smem& sm, const ExpertGroup* run, int n, const uint8_t* w,
                          const uint8_t* s, int64_t out, int64_t in, int64_t o0,
                          const uint8_t* __restrict__ xq, const float* __restrict__ x_scale,
                          int64_t x_rows, float* __restrict__ y) {
  const int tid = threadIdx.x, lane = tid & 31;
  const int wg = tid >> 7, warp = (tid >> 5) & 3, g = lane >> 2, t = lane & 3;
  const int64_t stages = in / 128;
  // Converter: row `conv_row` of the tile, 64 of its 128 columns (32 bytes of e2m1).
  const int conv_row = tid >> 1, half = tid & 1;
  const int64_t src_row = o0 + conv_row < out ? o0 + conv_row : out - 1;
  const uint4* w_src = reinterpret_cast<const uint4*>(w + src_row * (in / 2)) + 2 * half;
  const uint32_t* s_src = reinterpret_cast<const uint32_t*>(s + src_row * (in / 32));
  // Stager: chunks tid + i kThreads of the slice's 64 slots x 8 16-byte chunks; a slot past its
  // group's rows (or past the run) reads a row it has, and its sums are never written.
  auto slot_row = [&](int slot) -> int64_t {
    const ExpertGroup& grp = run[(slot >> 3) < n ? (slot >> 3) : 0];
    const int r = slot & 7;
    return r < grp.rows ? grp.x_row[r] : grp.x_row[0];
  };
  constexpr int kChunksEach = kSlots * 8 / kThreads;
  int32_t stage_rows[kChunksEach];
#pragma unroll
  for (int i = 0; i < kChunksEach; ++i) {
    stage_rows[i] = static_cast<int32_t>(slot_row((tid + i * kThreads) >> 3));
  }
  const int64_t scale_row = tid < kSlots ? slot_row(tid) : 0;

  // Slice `stage` into ring slot stage % kRing as one commit group (an empty group past the
  // last slice keeps the count of pending groups fixed). Each thread copies what it converts.
  auto fetch = [&](int64_t stage) {
    if (stage < stages) {
      const int slot = static_cast<int>(stage % kRing);
      const int64_t col = 128 * stage + 16 * (tid & 7);
#pragma unroll
      for (int i = 0; i < kChunksEach; ++i) {
        CpAsync16(sm.b[slot] + SwizzledChunk((tid + i * kThreads) >> 3, tid & 7),
                  xq + stage_rows[i] * in + col);
      }
      uint8_t* raw = sm.raw[slot] + conv_row * 64 + 32 * half;
      CpAsync16(raw, w_src + 4 * stage);
      CpAsync16(raw + 16, w_src + 4 * stage + 1);
      CpAsync4(&sm.raw_scale[slot][tid], s_src + stage);
      if (tid < kSlots) CpAsync4(&sm.raw_x_scale[slot][tid], x_scale + stage * x_rows + scale_row);
    }
    CpAsyncCommit();
  };
  auto convert = [&](int64_t stage) {  // this thread's part of a landed slice into a[stage & 1]
    const int slot = static_cast<int>(stage % kRing), buf = static_cast<int>(stage & 1);
    const uint32_t sc = sm.raw_scale[slot][tid];
    const uint32_t base = min(min(sc & 0xff, (sc >> 8) & 0xff), min((sc >> 16) & 0xff, sc >> 24));
    const uint4* raw = reinterpret_cast<const uint4*>(sm.raw[slot] + conv_row * 64 + 32 * half);
#pragma unroll
    for (int q = 0; q < 2; ++q) {  // 32-weight blocks 2 half + q of the slice
      const uint32_t shift =
          min(((sc >> (8 * (2 * half + q))) & 0xff) - base, static_cast<uint32_t>(kMaxShift));
      const uint2 table = sm.table[shift];
      const uint4 v = raw[q];
      const uint2 c0 = ShiftedE4m3(v.x, table), c1 = ShiftedE4m3(v.y, table);
      const uint2 c2 = ShiftedE4m3(v.z, table), c3 = ShiftedE4m3(v.w, table);
      const int chunk = 2 * (2 * half + q);
      *reinterpret_cast<uint4*>(sm.a[buf] + SwizzledChunk(conv_row, chunk)) =
          make_uint4(c0.x, c0.y, c1.x, c1.y);
      *reinterpret_cast<uint4*>(sm.a[buf] + SwizzledChunk(conv_row, chunk + 1)) =
          make_uint4(c2.x, c2.y, c3.x, c3.y);
    }
    // e2m1 in e4m3 is 2^-6 times its value: the 64 goes into the folded scale (powers of two).
    if (half == 0) sm.w_scale[buf][conv_row] = E8M0(base) * 64.0f;
    if (tid < kSlots) sm.x_scale[buf][tid] = sm.raw_x_scale[slot][tid];
  };

  __syncthreads();  // the previous run is done with every buffer
  for (int i = 0; i < kRing - 1; ++i) fetch(i);
  CpAsyncWait<kRing - 2>();  // slice 0 (this thread's copies)
  convert(0);
  float acc[32], part[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = part[i] = 0.0f;
  const int row_a = wg * 64 + warp * 16 + g;  // this thread's accumulator rows: row_a, row_a + 8
  for (int64_t stage = 0; stage < stages; ++stage) {
    const int buf = static_cast<int>(stage & 1), slot = static_cast<int>(stage % kRing);
    fetch(stage + kRing - 1);
    FenceSharedForAsyncProxy();
    __syncthreads();  // slice `stage` converted and staged by every thread
    // The four 32-column steps accumulate in the tensor cores, which keep ~14 significant bits
    // (DeepSeek-V3's measurement; the folded shifts put the steps' magnitudes up to 2^12 apart),
    // then the slice is scaled into the fp32 totals: DeepGEMM's promotion every 128 columns.
    // Measured on the H200: within 9.1e-4 of the products' magnitudes (the mma.sync kernel:
    // 1e-5); exact where each slice's sum fits the accumulator. A fresh accumulator per step
    // (scale-d 0, four waits a slice) halved the error and cost 30 % of the speed.
    WgmmaFence();
#pragma unroll
    for (int i = 0; i < 32; ++i) PinAccumulator(part[i]);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      WgmmaE4m3M64N64K32(part, SwizzledDesc(sm.a[buf] + wg * 64 * 128 + 32 * k),
                         SwizzledDesc(sm.b[slot] + 32 * k), k);
    }
    WgmmaCommit();
    if (stage + 1 < stages) {    // overlaps the tensor cores' work
      CpAsyncWait<kRing - 2>();  // slice stage + 1 (this thread's copies)
      convert(stage + 1);
    }
    WgmmaWaitAll();
#pragma unroll
    for (int i = 0; i < 32; ++i) PinAccumulator(part[i]);
    const float ws_lo = sm.w_scale[buf][row_a], ws_hi = sm.w_scale[buf][row_a + 8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {  // scales are powers of two: each scaled sum is exact
      const float xs0 = sm.x_scale[buf][8 * j + 2 * t], xs1 = sm.x_scale[buf][8 * j + 2 * t + 1];
      acc[4 * j + 0] += part[4 * j + 0] * (ws_lo * xs0);
      acc[4 * j + 1] += part[4 * j + 1] * (ws_lo * xs1);
      acc[4 * j + 2] += part[4 * j + 2] * (ws_hi * xs0);
      acc[4 * j + 3] += part[4 * j + 3] * (ws_hi * xs1);
    }
    __syncthreads();  // every warpgroup is done with buffer `buf` before it is refilled
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if (j >= n) break;
    const ExpertGroup& grp = run[j];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int token = 2 * t + (c & 1);
      const int64_t o = o0 + row_a + 8 * (c >> 1);
      if (token < grp.rows && o < out) y[grp.y_row[token] * out + o] = acc[4 * j + c];
    }
  }
}

__global__ void __launch_bounds__(kThreads, 2 / kWarpgroups * 2)
    Fp4ExpertWgmmaKernel(WgmmaMats mats, int64_t out, int64_t in,
                         const ExpertGroup* __restrict__ groups, int n_groups, int first,
                         const int32_t* __restrict__ live, const uint8_t* __restrict__ xq,
                         const float* __restrict__ x_scale, int64_t x_rows) {
  extern __shared__ uint8_t raw[];
  Smem& sm = *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t{1023});
  AwaitProducers();
  const int g0 = (first + static_cast<int>(blockIdx.y)) * kFoldedWindowGroups;
  const int end = min(g0 + kFoldedWindowGroups, live != nullptr ? min(*live, n_groups) : n_groups);
  if (g0 >= end) return;
  const bool second = blockIdx.z != 0;  // selects, not a run-time index into the parameter
  const uint8_t* const* weights = second ? mats.weights[1] : mats.weights[0];
  const uint8_t* const* scales = second ? mats.scales[1] : mats.scales[0];
  float* y = second ? mats.y[1] : mats.y[0];
  const int tid = threadIdx.x;
  if (tid < end - g0) sm.window[tid] = groups[g0 + tid];
  if (tid <= kMaxShift) {  // e2m1 magnitude v at e4m3 bits 4..2 is v << 2, then shifted
    sm.table[tid] = make_uint2(ShiftE4m3(0x0c080400u, tid), ShiftE4m3(0x1c181410u, tid));
  }
  __syncthreads();
  const int64_t o0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
  for (int r = 0; r < end - g0;) {
    // A malformed group (rows > 8) is written nowhere, as by the other expert kernels.
    if (sm.window[r].rows > kExpertGroupRows) {
      ++r;
      continue;
    }
    const int expert = sm.window[r].expert;
    int n = 1;
    while (r + n < end - g0 && sm.window[r + n].expert == expert &&
           sm.window[r + n].rows <= kExpertGroupRows)
      ++n;
    FoldedRun(sm, sm.window + r, n, weights[expert], scales[expert], out, in, o0, xq, x_scale,
              x_rows, y);
    r += n;
  }
}

int LaunchFolded(const WgmmaMats& mats, int matrices, int64_t out, int64_t in,
                 const ExpertGroup* groups, int n_groups, const uint8_t* xq, const float* x_scale,
                 int64_t x_rows, void* stream, const int32_t* live_groups) {
  if (in % 128 != 0 || in <= 0 || out <= 0 || n_groups < 0 || x_rows % 4 != 0) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (n_groups == 0) return 0;
  if (const cudaError_t e = cudaFuncSetAttribute(
          Fp4ExpertWgmmaKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes)) {
    return static_cast<int>(e);
  }
  const int windows = (n_groups + kFoldedWindowGroups - 1) / kFoldedWindowGroups;
  for (int first = 0; first < windows; first += kMaxGridY) {
    const dim3 grid(static_cast<unsigned>((out + kTileRows - 1) / kTileRows),
                    static_cast<unsigned>(std::min(kMaxGridY, windows - first)),
                    static_cast<unsigned>(matrices));
    LaunchKernel(Fp4ExpertWgmmaKernel, grid, kThreads, kSmemBytes,
                 static_cast<cudaStream_t>(stream), mats, out, in, groups, n_groups, first,
                 live_groups, xq, x_scale, x_rows);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int Fp4ExpertWgmma(const uint8_t* const* weights, const uint8_t* const* scales, int64_t out,
                   int64_t in, const ExpertGroup* groups, int n_groups, const uint8_t* xq,
                   const float* x_scale, int64_t x_rows, float* y, void* stream,
                   const int32_t* live_groups) {
  const WgmmaMats mats{{weights, weights}, {scales, scales}, {y, y}};
  return LaunchFolded(mats, 1, out, in, groups, n_groups, xq, x_scale, x_rows, stream, live_groups);
}

int Fp4ExpertWgmmaPair(const uint8_t* const* w1, const uint8_t* const* s1, float* y1,
                       const uint8_t* const* w3, const uint8_t* const* s3, float* y3, int64_t out,
                       int64_t in, const ExpertGroup* groups, int n_groups, const uint8_t* xq,
                       const float* x_scale, int64_t x_rows, void* stream,
                       const int32_t* live_groups) {
  const WgmmaMats mats{{w1, w3}, {s1, s3}, {y1, y3}};
  return LaunchFolded(mats, 2, out, in, groups, n_groups, xq, x_scale, x_rows, stream, live_groups);
}

}  // namespace deepinfer::kernels
