// Block-level radix select on 64-bit keys (an order-preserving image of the score above the
// complement of the index), so every key is distinct and "k largest keys" is exactly the CPU's
// "k largest scores, lower index first". Eight bits are resolved per pass from the top; the
// search stops once the bucket holding the k-th key is taken whole, which for distinct scores
// happens within the four score bytes. Few long rows would leave most SMs idle with one block
// per row, so those rows are cut into chunks whose own top-k a second pass merges: the top-k of
// a row lies within the union of its chunks' top-k.
#include <cuda_runtime.h>

#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"
#include "kernels/topk.h"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 512;
constexpr int64_t kChunk = 4096;  // scores per block in the split form

struct SelectShared {
  uint32_t hist[256];
  int bucket;
  uint32_t above, taken;
  uint64_t chosen[kMaxTopK];
};

// Finds, over the 256 buckets counted in hist, the bucket b (from the top) holding the
// needed-th key: writes b and the count of keys in higher buckets. Run by warp 0.
__device__ void FindBucket(SelectShared& sh, uint32_t needed) {
  const int lane = threadIdx.x;
  // Lane l owns buckets 255 - 8l down to 248 - 8l.
  uint32_t mine = 0;
  for (int j = 0; j < 8; ++j) mine += sh.hist[255 - 8 * lane - j];
  uint32_t inclusive = mine;
  for (int off = 1; off < 32; off <<= 1) {
    const uint32_t v = __shfl_up_sync(0xffffffffu, inclusive, off);
    if (lane >= off) inclusive += v;
  }
  const uint32_t before = inclusive - mine;
  if (before < needed && needed <= inclusive) {
    uint32_t cum = before;
    for (int j = 0; j < 8; ++j) {
      const int b = 255 - 8 * lane - j;
      if (cum + sh.hist[b] >= needed) {
        sh.bucket = b;
        sh.above = cum;
        return;
      }
      cum += sh.hist[b];
    }
  }
}

// Leaves the kk largest of the n keys key_at(0..n) in sh.chosen[0..kk), unordered. 0 < kk <= n.
template <class KeyAt>
__device__ void SelectLargest(KeyAt key_at, int64_t n, int kk, SelectShared& sh) {
  uint64_t prefix = 0, mask = 0;
  uint32_t needed = kk;
  if (kk < n) {
    for (int shift = 56; shift >= 0; shift -= 8) {
      for (int b = threadIdx.x; b < 256; b += kThreads) sh.hist[b] = 0;
      __syncthreads();
      for (int64_t i = threadIdx.x; i < n; i += kThreads) {
        const uint64_t key = key_at(i);
        const bool live = (key & mask) == prefix;
        const uint32_t b = live ? static_cast<uint32_t>(key >> shift) & 0xffu : 256u;
        // Many keys share the top bytes: one atomic per distinct bucket in the warp.
        const uint32_t peers = __match_any_sync(__activemask(), b);
        if (live && (__ffs(peers) - 1) == static_cast<int>(threadIdx.x & 31))
          atomicAdd(&sh.hist[b], __popc(peers));
      }
      __syncthreads();
      if (threadIdx.x < 32) FindBucket(sh, needed);
      __syncthreads();
      const uint32_t bucket = static_cast<uint32_t>(sh.bucket);
      prefix |= static_cast<uint64_t>(bucket) << shift;
      mask |= 0xffull << shift;
      needed -= sh.above;
      if (sh.hist[bucket] == needed) break;  // the whole bucket is taken: no lower bits matter
      __syncthreads();                       // hist is cleared for the next pass
    }
  }
  // Exactly kk keys satisfy (key & mask) >= prefix (all of them when kk == n, mask 0).
  if (threadIdx.x == 0) sh.taken = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    const uint64_t key = key_at(i);
    if ((key & mask) >= prefix) sh.chosen[atomicAdd(&sh.taken, 1u)] = key;
  }
  __syncthreads();
}

// Sorts sh.chosen[0..kk) descending and writes the indices, -1 in slots kk..k.
__device__ void SortAndWrite(SelectShared& sh, int kk, int k, int32_t* out) {
  int pow2 = 1;
  while (pow2 < kk) pow2 <<= 1;
  for (int j = kk + threadIdx.x; j < pow2; j += kThreads) sh.chosen[j] = 0;  // below every key
  __syncthreads();
  for (int size = 2; size <= pow2; size <<= 1) {  // bitonic sort
    for (int half = size >> 1; half > 0; half >>= 1) {
      for (int i = threadIdx.x; i < pow2; i += kThreads) {
        const int partner = i ^ half;
        if (partner > i) {
          const bool descending = (i & size) == 0;
          const uint64_t a = sh.chosen[i], b = sh.chosen[partner];
          if ((a < b) == descending) {
            sh.chosen[i] = b;
            sh.chosen[partner] = a;
          }
        }
      }
      __syncthreads();
    }
  }
  for (int j = threadIdx.x; j < k; j += kThreads)
    out[j] = j < kk ? static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(sh.chosen[j])) : -1;
}

__device__ __forceinline__ int64_t VisibleCount(const int32_t* counts, int64_t row, int64_t n) {
  if (counts == nullptr) return n;
  const int64_t c = counts[row] > 0 ? counts[row] : 0;
  return c < n ? c : n;
}

__global__ void __launch_bounds__(kThreads)
    RowTopKKernel(const float* scores, int64_t stride, const int32_t* counts, int64_t n, int k,
                  int32_t* idx) {
  AwaitProducers();
  __shared__ SelectShared sh;
  const int64_t row = blockIdx.x;
  const float* s = scores + row * stride;
  const int64_t n_r = VisibleCount(counts, row, n);
  const int kk = static_cast<int>(n_r < k ? n_r : k);
  if (kk > 0) SelectLargest([s](int64_t i) { return RankKey(s[i], i); }, n_r, kk, sh);
  SortAndWrite(sh, kk, k, idx + row * k);
}

// Split form, first pass: chunk blockIdx.x of row blockIdx.y writes its top-k keys (0 after).
__global__ void __launch_bounds__(kThreads)
    ChunkTopKKernel(const float* scores, int64_t stride, const int32_t* counts, int64_t n, int k,
                    uint64_t* candidates) {
  AwaitProducers();
  __shared__ SelectShared sh;
  const int64_t row = blockIdx.y, begin = blockIdx.x * kChunk;
  const int64_t n_r = VisibleCount(counts, row, n);
  const int64_t len = n_r - begin < 0 ? 0 : (n_r - begin < kChunk ? n_r - begin : kChunk);
  const int kk = static_cast<int>(len < k ? len : k);
  const float* s = scores + row * stride + begin;
  if (kk > 0)
    SelectLargest([s, begin](int64_t i) { return RankKey(s[i], begin + i); }, len, kk, sh);
  uint64_t* out = candidates + (row * gridDim.x + blockIdx.x) * k;
  for (int j = threadIdx.x; j < k; j += kThreads) out[j] = j < kk ? sh.chosen[j] : 0;
}

// Split form, second pass: the row's top-k among its chunks' candidates (the zeros of short
// chunks rank below every real key and there are always kk real ones).
__global__ void __launch_bounds__(kThreads)
    MergeTopKKernel(const uint64_t* candidates, int chunks, const int32_t* counts, int64_t n, int k,
                    int32_t* idx) {
  AwaitProducers();
  __shared__ SelectShared sh;
  const int64_t row = blockIdx.x;
  const int64_t n_r = VisibleCount(counts, row, n);
  const int kk = static_cast<int>(n_r < k ? n_r : k);
  const uint64_t* c = candidates + row * chunks * k;
  if (kk > 0) SelectLargest([c](int64_t i) { return c[i]; }, int64_t{chunks} * k, kk, sh);
  SortAndWrite(sh, kk, k, idx + row * k);
}

int64_t SplitChunks(int64_t rows, int64_t n) {
  // One block per row fills the GPU from about 128 rows; fewer, long rows are split.
  if (rows >= 128 || n <= 2 * kChunk) return 1;
  return (n + kChunk - 1) / kChunk;
}

}  // namespace

size_t RowTopKWorkspace(int64_t rows, int64_t n, int k) {
  const int64_t chunks = SplitChunks(rows, n);
  return chunks == 1 ? 0 : static_cast<size_t>(rows * chunks * k) * sizeof(uint64_t);
}

int RowTopK(const float* scores, int64_t rows, int64_t stride, const int32_t* counts, int64_t n,
            int k, int32_t* idx, void* workspace, void* stream) {
  if (k < 1 || k > kMaxTopK || rows < 0 || n < 0 || n > 0x7fffffffll || rows > 0x7fffffffll) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0) return 0;
  auto st = static_cast<cudaStream_t>(stream);
  const int64_t chunks = SplitChunks(rows, n);
  if (chunks == 1) {
    LaunchKernel(RowTopKKernel, static_cast<unsigned>(rows), kThreads, 0, st, scores, stride,
                 counts, n, k, idx);
    return cudaGetLastError();
  }
  if (workspace == nullptr) return cudaErrorInvalidValue;
  auto* candidates = static_cast<uint64_t*>(workspace);
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(rows));
  LaunchKernel(ChunkTopKKernel, grid, kThreads, 0, st, scores, stride, counts, n, k, candidates);
  LaunchKernel(MergeTopKKernel, static_cast<unsigned>(rows), kThreads, 0, st, candidates,
               static_cast<int>(chunks), counts, n, k, idx);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
