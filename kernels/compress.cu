// A window's pooling touches, for channel c, only the state columns c and width + c, so blocks
// own disjoint channel chunks of a sequence and need no communication: each walks its
// sequence's tokens in order, as the CPU does. At a window end the exponentials of the chunk
// (slots x channels) are taken by all threads at once; then one thread per channel sums them in
// the CPU's slot order, every operation rounded on its own.
#include <cuda_runtime.h>

#include "kernels/compress.h"
#include "kernels/exact_math.h"
#include "kernels/launch.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 128, kChannels = 8;  // a block's chunk of channels
constexpr int kMaxSlots = 256;                // 2 x the largest ratio (HCA's 128)

__global__ void __launch_bounds__(kThreads)
    CompressorPoolKernel(CompressorShape sh, const float* kv, const float* gate, int64_t stride,
                         const float* ape, const int64_t* pos, const int64_t* seg_begin,
                         const int32_t* state_slot, float* kv_state, float* gate_state,
                         float* pooled, int32_t* emitted) {
  AwaitProducers();
  __shared__ float weight[kMaxSlots][kChannels], value[kMaxSlots][kChannels];
  __shared__ float max_part[kThreads / kChannels][kChannels], denom_s[kChannels];
  const int m = sh.ratio, width = sh.width, proj = sh.proj();
  const int64_t seg = blockIdx.x;
  const int c0 = blockIdx.y * kChannels;
  const int n_ch = min(kChannels, width - c0);
  const int64_t slot_index = state_slot != nullptr ? state_slot[seg] : seg;
  float* st_kv = kv_state + slot_index * sh.state_floats();
  float* st_gate = gate_state + slot_index * sh.state_floats();
  const int cur = sh.overlap ? m : 0;  // first row of the current window in the state
  const int slots = sh.overlap ? 2 * m : m;
  const int series = sh.overlap ? 2 : 1;
  // This block's state columns: c0 + j and, with overlap, width + c0 + j, for j < n_ch.
  const int n_cols = series * n_ch;
  auto column = [&](int i) { return (i < n_ch ? 0 : width - n_ch) + c0 + i; };
  // Slot s of channel j reads the first series before the current window, the second after.
  auto col_of = [&](int s, int j) { return (sh.overlap && s >= m ? width : 0) + c0 + j; };
  for (int64_t t = seg_begin[seg]; t < seg_begin[seg + 1]; ++t) {
    const int slot = static_cast<int>(pos[t] % m);
    for (int i = threadIdx.x; i < n_cols; i += kThreads) {
      const int c = column(i);
      st_kv[(cur + slot) * proj + c] = kv[t * stride + c];
      st_gate[(cur + slot) * proj + c] = __fadd_rn(gate[t * stride + c], ape[slot * proj + c]);
    }
    const bool closes = (pos[t] + 1) % m == 0;
    if (threadIdx.x == 0 && blockIdx.y == 0) emitted[t] = closes ? 1 : 0;
    if (!closes) continue;  // uniform over the block
    __syncthreads();
    // Per channel max (exact in any order): kThreads / kChannels threads per channel.
    const int j = threadIdx.x % kChannels, part = threadIdx.x / kChannels;
    float mx = -INFINITY;
    if (j < n_ch) {
      for (int s = part; s < slots; s += kThreads / kChannels)
        mx = fmaxf(mx, st_gate[s * proj + col_of(s, j)]);
    }
    max_part[part][j] = mx;
    __syncthreads();
    for (int p = 0; p < kThreads / kChannels; ++p) mx = fmaxf(mx, max_part[p][j]);
    // Everything but the two running sums in parallel: the exponentials, the kv values, then
    // (once each channel's denominator is known) the normalised weights.
    for (int s = part; s < slots; s += kThreads / kChannels) {
      if (j < n_ch) {
        weight[s][j] = ExpF(__fsub_rn(st_gate[s * proj + col_of(s, j)], mx));
        value[s][j] = st_kv[s * proj + col_of(s, j)];
      }
    }
    __syncthreads();
    if (threadIdx.x < n_ch) {  // the CPU's sum, in slot order
      float denom = 0.0f;
      for (int s = 0; s < slots; ++s) denom = __fadd_rn(denom, weight[s][threadIdx.x]);
      denom_s[threadIdx.x] = denom;
    }
    __syncthreads();
    for (int s = part; s < slots; s += kThreads / kChannels) {
      if (j < n_ch) weight[s][j] = __fdiv_rn(weight[s][j], denom_s[j]);
    }
    __syncthreads();
    if (threadIdx.x < n_ch) {
      float acc = 0.0f;
      for (int s = 0; s < slots; ++s)
        acc = __fadd_rn(acc, __fmul_rn(weight[s][threadIdx.x], value[s][threadIdx.x]));
      pooled[t * width + c0 + threadIdx.x] = acc;
    }
    __syncthreads();
    if (sh.overlap) {  // this window becomes the previous one
      for (int i = threadIdx.x; i < m * n_cols; i += kThreads) {
        const int s = i / n_cols, c = column(i % n_cols);
        st_kv[s * proj + c] = st_kv[(m + s) * proj + c];
        st_gate[s * proj + c] = st_gate[(m + s) * proj + c];
      }
      __syncthreads();
    }
  }
}

}  // namespace

int CompressorPool(const CompressorShape& shape, const float* kv, const float* gate,
                   int64_t row_stride, const float* ape, const int64_t* pos,
                   const int64_t* seg_begin, int64_t segments, const int32_t* state_slot,
                   float* kv_state, float* gate_state, float* pooled, int32_t* emitted,
                   void* stream) {
  const int slots = (shape.overlap ? 2 : 1) * shape.ratio;
  if (shape.ratio < 1 || slots > kMaxSlots || shape.width < 1 || row_stride < shape.proj() ||
      segments < 0 || segments > 0x7fffffffll) {
    return cudaErrorInvalidValue;
  }
  if (segments == 0) return 0;
  const dim3 grid(static_cast<unsigned>(segments),
                  static_cast<unsigned>((shape.width + kChannels - 1) / kChannels));
  LaunchKernel(CompressorPoolKernel, grid, kThreads, 0, static_cast<cudaStream_t>(stream), shape,
               kv, gate, row_stride, ape, pos, seg_begin, state_slot, kv_state, gate_state, pooled,
               emitted);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
