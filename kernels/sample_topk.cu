// SelectTopKCandidates (kernels/sample_topk.h): each row's first kTopKMax candidates in the
// sort's order without sorting the row. A candidate is one 51-bit key, the logit's descending
// order above its 19-bit id, so keys are unique and ascending key order is the full sort's order
// (ties by lower id). Blocks sort 4,096-key tiles in shared memory and keep
// their first kTopKMax; tiles of those are merged the same way until one is left a row.
#include <cuda_runtime.h>

#include <cub/block/block_radix_sort.cuh>
#include <utility>

#include "kernels/launch.cuh"
#include "kernels/sample_pick.h"
#include "kernels/sample_rows.cuh"
#include "kernels/sample_topk.h"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kItems = 16;
constexpr int kTile = kThreads * kItems;  // keys a block sorts
constexpr int kFanIn = kTile / kTopKMax;  // chunks of kTopKMax a merge block takes
constexpr int kIdBits = 19;               // ids below 2^19 (the sampler's 524,288)
constexpr int kKeyBits = 32 + kIdBits;    // bits a tile's sort looks at
constexpr uint64_t kPastEnd = (uint64_t{1} << kKeyBits) - 1;  // pads a tile: sorts last
static_assert(kTile % kTopKMax == 0, "merge tiles hold whole chunks");

using TileSort = cub::BlockRadixSort<uint64_t, kThreads, kItems>;

__device__ __forceinline__ uint64_t CandidateKey(float v, int32_t id) {
  return (static_cast<uint64_t>(DescendingKey(v)) << kIdBits) | static_cast<uint32_t>(id);
}

// Block (tile, row): the tile's keys sorted, its first kTopKMax written to out[row][tile].
// Stage 0 reads the masked logits; later stages read the previous stage's chunks.
__global__ void __launch_bounds__(kThreads)
    TileTopKKernel(const float* logits, int32_t vocab, const uint32_t* bitmask,
                   const int32_t* rows_of, const uint64_t* chunks_in, int64_t n_in,
                   uint64_t* chunks_out) {
  AwaitProducers();
  __shared__ typename TileSort::TempStorage temp;
  const int64_t row = blockIdx.y;
  const MaskedRow x =
      logits ? MaskedRow::Of(logits, vocab, bitmask, rows_of, row) : MaskedRow{nullptr, nullptr};
  uint64_t keys[kItems];
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * kTile + k * kThreads + threadIdx.x;
    if (logits != nullptr) {
      keys[k] = i < vocab ? CandidateKey(x[i], static_cast<int32_t>(i)) : kPastEnd;
    } else {
      keys[k] = i < n_in ? chunks_in[row * n_in + i] : kPastEnd;
    }
  }
  TileSort(temp).Sort(keys, 0, kKeyBits);  // blocked: thread t holds ranks t * kItems ..
  const int64_t n_out = static_cast<int64_t>(gridDim.x) * kTopKMax;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int rank = threadIdx.x * kItems + k;
    if (rank < kTopKMax) chunks_out[row * n_out + blockIdx.x * kTopKMax + rank] = keys[k];
  }
}

// Row r's one chunk as the sort's outputs: logits (float) and ids, first kTopKMax entries.
__global__ void UnpackTopKKernel(const uint64_t* chunk, int32_t vocab, float* sorted_keys,
                                 int32_t* sorted_ids) {
  AwaitProducers();
  const int64_t row = blockIdx.x;
  for (int i = threadIdx.x; i < kTopKMax && i < vocab; i += blockDim.x) {
    const uint64_t key = chunk[row * kTopKMax + i];
    sorted_keys[row * vocab + i] = KeyLogit(static_cast<uint32_t>(key >> kIdBits));
    sorted_ids[row * vocab + i] = static_cast<int32_t>(key & ((1u << kIdBits) - 1));
  }
}

}  // namespace

int SelectTopKCandidates(const float* logits, int64_t rows, int32_t vocab, const uint32_t* bitmask,
                         const int32_t* rows_of, uint64_t* scratch_a, uint64_t* scratch_b,
                         float* sorted_keys, int32_t* sorted_ids, void* stream) {
  if (rows < 1 || rows > 65535 || vocab < 1 || vocab > (1 << kIdBits)) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  auto s = static_cast<cudaStream_t>(stream);
  int64_t tiles = (vocab + kTile - 1) / kTile;
  LaunchKernel(TileTopKKernel, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(rows)),
               kThreads, 0, s, logits, vocab, bitmask, rows_of, nullptr, int64_t{0}, scratch_a);
  uint64_t *in = scratch_a, *out = scratch_b;
  while (tiles > 1) {  // kFanIn chunks a block: V4's 129,280 ids take one merge
    const int64_t n_in = tiles * kTopKMax;
    tiles = (tiles + kFanIn - 1) / kFanIn;
    LaunchKernel(TileTopKKernel, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(rows)),
                 kThreads, 0, s, nullptr, vocab, nullptr, nullptr, in, n_in, out);
    std::swap(in, out);
  }
  LaunchKernel(UnpackTopKKernel, static_cast<unsigned>(rows), kTopKMax, 0, s, in, vocab,
               sorted_keys, sorted_ids);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
