#include <cuda_runtime.h>

#include "kernels/attention_rows.h"
#include "kernels/launch.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ int64_t WindowFirst(const AttentionRowsArgs& a, int64_t q) {
  const int64_t p = a.pos[q];
  int64_t first = p - a.window + 1 > 0 ? p - a.window + 1 : 0;
  if (a.window_from != nullptr && a.window_from[q] > first) first = a.window_from[q];
  return first;
}

__device__ __forceinline__ int64_t CompressedCount(const AttentionRowsArgs& a, int64_t q) {
  const int64_t v = a.visible[q] > 0 ? a.visible[q] : 0;
  return a.selected != nullptr && a.top_k < v ? a.top_k : v;
}

// One block: each query's count, then an inclusive scan over the queries in chunks.
__global__ void __launch_bounds__(kThreads) OffsetsKernel(AttentionRowsArgs a, int64_t* offsets) {
  AwaitProducers();
  __shared__ int64_t scan[kThreads];
  __shared__ int64_t carry;
  if (threadIdx.x == 0) {
    carry = 0;
    offsets[0] = 0;
  }
  for (int64_t base = 0; base < a.queries; base += kThreads) {
    const int64_t q = base + threadIdx.x;
    const int64_t count =
        q < a.queries ? (a.pos[q] - WindowFirst(a, q) + 1) + CompressedCount(a, q) : 0;
    __syncthreads();
    scan[threadIdx.x] = count;
    __syncthreads();
    for (int off = 1; off < kThreads; off <<= 1) {
      const int64_t v = threadIdx.x >= off ? scan[threadIdx.x - off] : 0;
      __syncthreads();
      scan[threadIdx.x] += v;
      __syncthreads();
    }
    if (q < a.queries) offsets[q + 1] = carry + scan[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == kThreads - 1) carry += scan[threadIdx.x];
  }
}

__global__ void __launch_bounds__(kThreads)
    RowsKernel(AttentionRowsArgs a, const int64_t* offsets, int32_t* row_index) {
  AwaitProducers();
  const int64_t q = blockIdx.x;
  int32_t* out = row_index + offsets[q];
  const int64_t first = WindowFirst(a, q), n_window = a.pos[q] - first + 1;
  for (int64_t i = threadIdx.x; i < n_window; i += kThreads)
    out[i] = a.ring_row[q] + static_cast<int32_t>((first + i) % (a.ring > 0 ? a.ring : a.window));
  const int64_t n_comp = CompressedCount(a, q);
  const int32_t* pages = a.page_table + q * a.pages_per_query;
  for (int64_t i = threadIdx.x; i < n_comp; i += kThreads) {
    const int64_t j = a.selected != nullptr ? a.selected[q * a.top_k + i] : i;
    out[n_window + i] =
        pages[j / a.page_rows] * a.page_rows + static_cast<int32_t>(j % a.page_rows);
  }
}

}  // namespace

int BuildAttentionRows(const AttentionRowsArgs& a, int64_t* offsets, int32_t* row_index,
                       void* stream) {
  if (a.queries < 0 || a.queries > 0x7fffffffll || a.window < 1 ||
      (a.ring != 0 && a.ring < a.window) || a.page_rows < 1 || a.pages_per_query < 1 ||
      (a.selected != nullptr && a.top_k < 1) || !a.pos || !a.ring_row || !a.visible ||
      !a.page_table) {
    return cudaErrorInvalidValue;
  }
  if (a.queries == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  LaunchKernel(OffsetsKernel, 1, kThreads, 0, s, a, offsets);
  LaunchKernel(RowsKernel, static_cast<unsigned>(a.queries), kThreads, 0, s, a, offsets, row_index);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
