// The folded MXFP4 expert GEMM on wgmma (kernels/expert_fp4_wgmma.h). A block of two warpgroups
// owns 128 output rows of one matrix and a window of 8 groups; for each run of one expert in the
// window it walks the columns 128 at a time: raw weights, scales and activations arrive by
// cp.async three slices ahead, and each thread converts its own A fragments into registers, one
// 32-column step while the tensor cores take the step before.
#include <cuda_runtime.h>

#include <algorithm>
#include <cassert>

#include "kernels/device_math.cuh"
#include "kernels/expert_fp4_wgmma.h"
#include "kernels/fp4_e4m3.h"
#include "kernels/launch.cuh"
#include "kernels/mma_sm90.cuh"
#include "kernels/wgmma_sm90.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256;   // two warpgroups, each 64 output rows of the block's tile
constexpr int kTileRows = 128;  // the copier takes rows r and r + 64
constexpr int kSlots = 8 * kFoldedWindowGroups;  // token slots: the wgmma's N
constexpr int kMaxShift = 12;                    // FoldScales' bound
constexpr int kMaxGridY = 65535;

// Shared memory of a block: a ring of kRing 128-column slices in flight (cp.async), each the
// raw e2m1 weights [128 rows][64 bytes, padded to kRawStride so that a warp's reads of eight rows
// fall in distinct banks], their rows' four e8m0 scales, the slots' activation scales and
// activations [64 slots][128] (128-byte swizzled, the wgmma's B); the magnitude tables of every
// shift; the window. The converted weights never touch shared memory: each thread turns its own
// A fragments into e4m3 in registers.
constexpr int kRing = 4;
constexpr int kRawStride = 80;
struct alignas(1024) Smem {
  uint8_t b[kRing][kSlots * 128];
  uint8_t raw[kRing][kTileRows * kRawStride];
  uint32_t raw_scale[kRing][kTileRows];
  float x_scale[kRing][kSlots];
  uint2 table[kMaxShift + 1];
  ExpertGroup window[kFoldedWindowGroups];
};
constexpr size_t kSmemBytes = sizeof(Smem);

__device__ __forceinline__ uint32_t Prmt(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

// Four e2m1 weights (the low 16 bits of x, weight 0 in the lowest nibble) as four e4m3 bytes in
// column order, each 2^(shift - 6) times its weight: the magnitudes from the shift's table (one
// byte permute) and the signs replicated out of the nibbles' top bits by a second permute (its
// selector's bit 3), masked to bit 7.
__device__ __forceinline__ uint32_t ShiftedE4m3x4(uint32_t x, uint2 table) {
  const uint32_t magnitude = Prmt(table.x, table.y, x & 0x7777u);
  const uint32_t sign = Prmt(x << 4, x, 0xd9c8u);
  return magnitude | (sign & 0x80808080u);
}

__device__ __forceinline__ uint32_t MinByte(uint32_t w) {
  return min(min(w & 0xff, (w >> 8) & 0xff), min((w >> 16) & 0xff, w >> 24));
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
  // Copier: 16-byte pieces (tid & 3) of tile rows tid / 4 and tid / 4 + 64, and row tid's scales.
  auto weight_row = [&](int r) { return o0 + r < out ? o0 + r : out - 1; };
  const int piece = tid & 3, copy_row = tid >> 2;
  const uint8_t* w_src0 = w + weight_row(copy_row) * (in / 2) + 16 * piece;
  const uint8_t* w_src1 = w + weight_row(copy_row + 64) * (in / 2) + 16 * piece;
  const uint8_t* s_src = s + weight_row(tid & (kTileRows - 1)) * (in / 32);
  // Stager: chunks tid + i kThreads of the slice's 64 slots x 8 16-byte chunks; a slot past its
  // group's rows (or past the run) reads a row it has, and its sums are never written.
  auto slot_row = [&](int slot) -> int64_t {
    const ExpertGroup& grp = run[(slot >> 3) < n ? (slot >> 3) : 0];
    const int r = slot & 7;
    return r < grp.rows ? grp.x_row[r] : (grp.rows > 0 ? grp.x_row[0] : 0);
  };
  constexpr int kChunksEach = kSlots * 8 / kThreads;
  const uint8_t* b_src[kChunksEach];  // each chunk's first slice; a slice is 128 bytes on
#pragma unroll
  for (int i = 0; i < kChunksEach; ++i) {
    b_src[i] = xq + slot_row((tid + i * kThreads) >> 3) * in + 16 * (tid & 7);
  }
  const float* xs_src = x_scale + (tid < kSlots ? slot_row(tid) : 0);  // x_rows on per slice

  // Slice `stage` into ring slot stage % kRing as one commit group (an empty group past the
  // last slice keeps the count of pending groups fixed).
  auto fetch = [&](int64_t stage) {
    if (stage < stages) {
      const int slot = static_cast<int>(stage % kRing);
#pragma unroll
      for (int i = 0; i < kChunksEach; ++i) {
        CpAsync16(sm.b[slot] + SwizzledChunk((tid + i * kThreads) >> 3, tid & 7),
                  b_src[i] + 128 * stage);
      }
      CpAsync16(sm.raw[slot] + copy_row * kRawStride + 16 * piece, w_src0 + 64 * stage);
      CpAsync16(sm.raw[slot] + (copy_row + 64) * kRawStride + 16 * piece, w_src1 + 64 * stage);
      if (tid < kTileRows) CpAsync4(&sm.raw_scale[slot][tid], s_src + 4 * stage);
      if (tid < kSlots) CpAsync4(&sm.x_scale[slot][tid], xs_src + stage * x_rows);
    }
    CpAsyncCommit();
  };

  __syncthreads();  // the previous run is done with every buffer
  for (int i = 0; i < kRing - 1; ++i) fetch(i);
  float acc[32], part[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = part[i] = 0.0f;
  // This thread's accumulator rows, which are also the rows of its A fragments: row_a, row_a + 8.
  const int row_a = wg * 64 + warp * 16 + g;
  for (int64_t stage = 0; stage < stages; ++stage) {
    const int slot = static_cast<int>(stage % kRing);
    CpAsyncWait<kRing - 2>();  // slice `stage` (this thread's copies)
    FenceSharedForAsyncProxy();
    __syncthreads();  // every thread's copies landed; everyone is done with slice stage - 1
    fetch(stage + kRing - 1);  // into the slot of slice stage - 1
    const uint32_t sc_lo = sm.raw_scale[slot][row_a], sc_hi = sm.raw_scale[slot][row_a + 8];
    const uint32_t base_lo = MinByte(sc_lo), base_hi = MinByte(sc_hi);
    // The fragment's four weights of a word are its 16-bit half t % 2 (little-endian).
    const uint8_t* raw_lo = sm.raw[slot] + row_a * kRawStride + 4 * (t >> 1) + 2 * (t & 1);
    const uint8_t* raw_hi = raw_lo + 8 * kRawStride;
    // The four 32-column steps accumulate in the tensor cores, which keep ~14 significant bits
    // (DeepSeek-V3's measurement; the folded shifts put the steps' magnitudes up to 2^12 apart),
    // then the slice is scaled into the fp32 totals: DeepGEMM's promotion every 128 columns.
    // Step k's fragment (rows row_a and row_a + 8; columns 4t .. 4t + 3 and 16 + 4t .. 19 + 4t
    // of 32-weight block k) is converted while step k - 1 runs, into registers of its own.
    uint32_t a[4][4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint2 t_lo = sm.table[min(((sc_lo >> (8 * k)) & 0xff) - base_lo, 12u)];
      const uint2 t_hi = sm.table[min(((sc_hi >> (8 * k)) & 0xff) - base_hi, 12u)];
      const uint16_t* blk_lo = reinterpret_cast<const uint16_t*>(raw_lo + 16 * k);
      const uint16_t* blk_hi = reinterpret_cast<const uint16_t*>(raw_hi + 16 * k);
      a[k][0] = ShiftedE4m3x4(blk_lo[0], t_lo);  // columns 4t .. 4t + 3
      a[k][1] = ShiftedE4m3x4(blk_hi[0], t_hi);
      a[k][2] = ShiftedE4m3x4(blk_lo[4], t_lo);  // columns 16 + 4t .. 19 + 4t (8 bytes on)
      a[k][3] = ShiftedE4m3x4(blk_hi[4], t_hi);
#pragma unroll
      for (int i = 0; i < 4; ++i) PinOperand(a[k][i]);  // written before the fence orders them
      WgmmaFence();
#pragma unroll
      for (int i = 0; i < 32; ++i) PinAccumulator(part[i]);
      WgmmaE4m3M64N64K32Rs(part, a[k], SwizzledDesc(sm.b[slot] + 32 * k), k);
    }
    WgmmaCommit();
    WgmmaWaitAll();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int i = 0; i < 4; ++i) PinOperand(a[k][i]);  // live until the mma has read them
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) PinAccumulator(part[i]);
    // e2m1 in e4m3 is 2^-6 times its value: the 64 goes into the folded scale (powers of two).
    const float ws_lo = E8M0(base_lo) * 64.0f, ws_hi = E8M0(base_hi) * 64.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {  // scales are powers of two: each scaled sum is exact
      const float2 xs = *reinterpret_cast<const float2*>(&sm.x_scale[slot][8 * j + 2 * t]);
      const float xs0 = xs.x, xs1 = xs.y;
      acc[4 * j + 0] += part[4 * j + 0] * (ws_lo * xs0);
      acc[4 * j + 1] += part[4 * j + 1] * (ws_lo * xs1);
      acc[4 * j + 2] += part[4 * j + 2] * (ws_hi * xs0);
      acc[4 * j + 3] += part[4 * j + 3] * (ws_hi * xs1);
    }
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

__global__ void __launch_bounds__(kThreads, 2)
    Fp4ExpertWgmmaKernel(WgmmaMats mats, int64_t out, int64_t in,
                         const ExpertGroup* __restrict__ groups, int n_groups, int first,
                         const int32_t* __restrict__ live, const uint8_t* __restrict__ xq,
                         const float* __restrict__ x_scale, int64_t x_rows) {
  // The kernel has no static shared memory, so the dynamic block starts at the window's start,
  // 1,024-aligned as the swizzle needs. Taken as it is (no arithmetic on its address), the
  // compiler keeps every access to it a shared-memory one (arithmetic made them generic loads).
  extern __shared__ __align__(1024) uint8_t smem_block[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_block);
  assert((static_cast<uint32_t>(__cvta_generic_to_shared(smem_block)) & 1023) == 0);
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
