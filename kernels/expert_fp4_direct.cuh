// The window-1 path of the tensor-core expert kernel (kernels/expert_fp4_mma.cu): one warp's 16
// output rows against one (expert, <= 8 tokens) group, for steps too small to share weights
// between groups.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/device_math.cuh"
#include "kernels/expert_fp4.h"
#include "kernels/fp4_e4m3.h"
#include "kernels/mma_sm90.cuh"

namespace deepinfer::kernels::expert_direct {

// Window 1 (small steps, where blocks must be many): one warp's 16 output rows against one group,
// no block synchronisation. The warp streams its rows' weights through shared memory, a tile of
// kDirectCols columns (kDirectCols / 2 contiguous bytes a row) with kDirectStages - 1 tiles in
// flight (cp.async), and reads each 128-column slice of a tile with two ldmatrix: the words the
// mma fragments take (lane (g, t): word t of each 32-weight block of rows g and g + 8). The same
// sums, term for term and in the same order, as ExpertRun gives the group in any window.
// Measured on the H200 (bench/RESULTS-gpu.md, "Wider weight tiles"): 512-column tiles in two
// stages (256 contiguous bytes a row, 32 KB a block) against 128 columns in six (64 bytes a row):
// experts 296 against 319 us a V4-Flash layer at batch 8, 1,276 against 1,307 at 64. The other
// shapes tried there (256 columns in three or four stages; 512 or 1,024 columns in two, from
// dynamic shared memory) were slower at batch 8 or 64.
constexpr int kDirectCols = 512;
constexpr int kDirectStages = 2;
constexpr int kRowBytes = kDirectCols / 2;  // one tile row: MXFP4, two weights a byte
constexpr int kRowChunks = kRowBytes / 16;  // 16-byte chunks (32-weight blocks) a tile row
constexpr int kTileBytes = 16 * kRowBytes;  // 16 rows
static_assert(kDirectCols % 128 == 0 && kDirectCols <= 512 && kDirectStages >= 2);

// Byte offset of 16-byte chunk q (weights 32q .. 32q + 31) of row r in a staged tile: the XOR
// spreads the eight rows one ldmatrix reads over all 32 banks.
__device__ __forceinline__ int TileChunk(int r, int q) {
  if constexpr (kRowChunks == 4) return r * 64 + 16 * (q ^ ((r >> 1) & 3));
  return r * kRowBytes + 16 * (q ^ (r & 7));
}

// The warp's 16 rows (past `out`: the last row again), columns [kDirectCols tile, + kDirectCols)
// that lie inside the row, into `tile` as one commit group.
__device__ __forceinline__ void StageTile(uint8_t* tile, const uint8_t* w, int64_t out, int64_t in,
                                          int64_t o0, int64_t tile_index) {
  const int lane = threadIdx.x & 31;
  const int64_t col_bytes = tile_index * kRowBytes;
#pragma unroll
  for (int c = lane; c < 16 * kRowChunks; c += 32) {
    const int r = c / kRowChunks, q = c % kRowChunks;
    const int64_t row = o0 + r < out ? o0 + r : out - 1;
    if (col_bytes + 16 * q < in / 2) {
      CpAsync16(tile + TileChunk(r, q), w + row * (in / 2) + col_bytes + 16 * q);
    }
  }
  CpAsyncCommit();
}

__device__ __forceinline__ void ExpertGroupDirect(const ExpertGroup& grp, const uint8_t* w,
                                                  const uint8_t* s, int64_t out, int64_t in,
                                                  int64_t o0, const uint8_t* __restrict__ xq,
                                                  const float* __restrict__ x_scale, int64_t x_rows,
                                                  float* __restrict__ y, uint8_t* tiles) {
  constexpr int kSlices = kDirectCols / 128;  // 128-column slices a tile
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t blocks = in / 32, stages = in / 128;
  const int64_t n_tiles = (in + kDirectCols - 1) / kDirectCols;
  const int64_t lo = o0 + g < out ? o0 + g : out - 1, hi = o0 + g + 8 < out ? o0 + g + 8 : out - 1;
  const uint32_t* s_lo = reinterpret_cast<const uint32_t*>(s + lo * blocks);
  const uint32_t* s_hi = reinterpret_cast<const uint32_t*>(s + hi * blocks);
  const int rows = grp.rows;
  const uint2* xb = reinterpret_cast<const uint2*>(xq + (g < rows ? grp.x_row[g] : 0) * in) + t;
  const int n0 = 2 * t, n1 = 2 * t + 1;  // this lane's output columns (tokens)
  const int64_t r0 = n0 < rows ? grp.x_row[n0] : 0, r1 = n1 < rows ? grp.x_row[n1] : 0;
#pragma unroll
  for (int i = 0; i < kDirectStages - 1; ++i) {
    if (i < n_tiles) {
      StageTile(tiles + i * kTileBytes, w, out, in, o0, i);
    } else {
      CpAsyncCommit();  // an empty group keeps the count of pending groups fixed
    }
  }
  float acc[4] = {0, 0, 0, 0};
  for (int64_t tile_index = 0; tile_index < n_tiles; ++tile_index) {
    const int64_t ahead = tile_index + kDirectStages - 1;
    if (ahead < n_tiles) {
      StageTile(tiles + (ahead % kDirectStages) * kTileBytes, w, out, in, o0, ahead);
    } else {
      CpAsyncCommit();
    }
    CpAsyncWait<kDirectStages - 1>();
    __syncwarp();  // every lane's copies of this tile have landed
    const uint8_t* tile = tiles + (tile_index % kDirectStages) * kTileBytes;
#pragma unroll
    for (int h = 0; h < kSlices; ++h) {
      const int64_t stage = tile_index * kSlices + h;  // 128-column slice of the row
      if (stage >= stages) break;
      uint32_t w_lo[4], w_hi[4];  // word t of blocks 4 stage .. 4 stage + 3, rows g and g + 8
      LdMatrixX4(w_lo, tile + TileChunk(lane & 7, 4 * h + (lane >> 3)));
      LdMatrixX4(w_hi, tile + TileChunk(8 + (lane & 7), 4 * h + (lane >> 3)));
      const uint32_t sc_lo = __ldg(s_lo + stage), sc_hi = __ldg(s_hi + stage);
      float part[4] = {0, 0, 0, 0};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t a0, a1, a2, a3;
        Fp4ToE4m3(w_lo[q], &a0, &a2);
        Fp4ToE4m3(w_hi[q], &a1, &a3);
        const uint2 v = __ldg(xb + 4 * (4 * stage + q));
        float d[4];
        Mma(d, a0, a1, a2, a3, __byte_perm(v.x, v.y, 0x6420), __byte_perm(v.x, v.y, 0x7531));
        const float ws_lo = E8M0((sc_lo >> (8 * q)) & 0xff);
        const float ws_hi = E8M0((sc_hi >> (8 * q)) & 0xff);
        part[0] += d[0] * ws_lo;
        part[1] += d[1] * ws_lo;
        part[2] += d[2] * ws_hi;
        part[3] += d[3] * ws_hi;
      }
      const float xs0 = __ldg(x_scale + stage * x_rows + r0);
      const float xs1 = __ldg(x_scale + stage * x_rows + r1);
      acc[0] += part[0] * xs0;
      acc[1] += part[1] * xs1;
      acc[2] += part[2] * xs0;
      acc[3] += part[3] * xs1;
    }
    __syncwarp();  // read by all lanes before a later tile is copied over it
  }
  if (n0 < rows) {
    if (o0 + g < out) y[grp.y_row[n0] * out + o0 + g] = acc[0] * 64.0f;
    if (o0 + g + 8 < out) y[grp.y_row[n0] * out + o0 + g + 8] = acc[2] * 64.0f;
  }
  if (n1 < rows) {
    if (o0 + g < out) y[grp.y_row[n1] * out + o0 + g] = acc[1] * 64.0f;
    if (o0 + g + 8 < out) y[grp.y_row[n1] * out + o0 + g + 8] = acc[3] * 64.0f;
  }
}

}  // namespace deepinfer::kernels::expert_direct
