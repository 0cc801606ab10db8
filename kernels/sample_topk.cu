// SelectTopKCandidates (kernels/sample_topk.h): each row's first kTopKMax candidates in the
// sort's order without sorting the row. A candidate is one 51-bit key, the logit's descending
// order above its 19-bit id, so keys are unique and ascending key order is the full sort's order
// (ties by lower id). A block takes a 4,096-key tile and finds its kTopKMax smallest keys by a
// radix select (a histogram of the next 8 bits of the keys still in question, until the bucket
// that holds the last one needed is taken whole), without ordering them; tiles of those are
// selected the same way until one is left a row, whose keys are then ranked and unpacked.
#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>
#include <utility>

#include "kernels/launch.cuh"
#include "kernels/sample_pick.h"
#include "kernels/sample_rows.cuh"
#include "kernels/sample_topk.h"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kItems = 16;
constexpr int kTile = kThreads * kItems;  // keys a block selects from
constexpr int kFanIn = kTile / kTopKMax;  // chunks of kTopKMax a merge block takes
constexpr int kIdBits = 19;               // ids below 2^19 (the sampler's 524,288)
constexpr int kKeyBits = 32 + kIdBits;    // bits a key has
constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;
constexpr uint64_t kPastEnd = (uint64_t{1} << kKeyBits) - 1;  // pads a tile: selected last
static_assert(kTile % kTopKMax == 0, "merge tiles hold whole chunks");
static_assert(kBins == kThreads, "a thread a bin");
static_assert(kTopKMax <= kThreads, "a thread a kept key when ranking");

using BinScan = cub::BlockScan<int, kThreads>;

__device__ __forceinline__ uint64_t CandidateKey(float v, int32_t id) {
  return (static_cast<uint64_t>(DescendingKey(v)) << kIdBits) | static_cast<uint32_t>(id);
}

struct SelectState {
  typename BinScan::TempStorage scan;
  int bins[kBins];
  uint64_t kept[kTopKMax];
  uint64_t prefix;
  int need, taken;
  bool whole;
};

// The block's kTopKMax smallest keys (each thread's kItems in keys) into st.kept, in no order.
// The keys whose top bits (key >> shift) are below prefix are all kept; of those equal to it,
// `need` more. Each round histograms the next digit of the keys equal to the prefix and moves
// the prefix to the bucket holding the need-th; when that bucket holds exactly `need` keys, it
// is kept whole. Unique keys end there by the last digit; the pads (kPastEnd, all equal) fill
// what is left in any order.
__device__ void SelectSmallest(const uint64_t (&keys)[kItems], SelectState& st) {
  uint64_t prefix = 0;
  int shift = kKeyBits, need = kTopKMax;
  while (shift > 0) {
    const int bits = shift < kDigitBits ? shift : kDigitBits;
    const int next = shift - bits;
    st.bins[threadIdx.x] = 0;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      if ((keys[k] >> shift) == prefix) {
        atomicAdd(&st.bins[(keys[k] >> next) & ((1u << bits) - 1)], 1);
      }
    }
    __syncthreads();
    const int count = st.bins[threadIdx.x];
    int before;
    BinScan(st.scan).ExclusiveSum(count, before);
    if (before < need && need <= before + count) {
      st.prefix = (prefix << bits) | threadIdx.x;
      st.need = need - before;
      st.whole = need - before == count;
    }
    __syncthreads();
    prefix = st.prefix;
    need = st.need;
    shift = next;
    if (st.whole) break;
  }
  if (threadIdx.x == 0) st.taken = 0;
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if ((keys[k] >> shift) < prefix) st.kept[atomicAdd(&st.taken, 1)] = keys[k];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if ((keys[k] >> shift) == prefix) {
      const int slot = atomicAdd(&st.taken, 1);
      if (slot < kTopKMax) st.kept[slot] = keys[k];
    }
  }
  __syncthreads();
}

// Block (tile, row): the tile's kTopKMax smallest keys. Stage 0 reads the masked logits, later
// stages the previous stage's chunks. A stage of more than one tile writes its keys unordered to
// chunks_out[row][tile]; the last (one tile) ranks them (pads, all equal, by their slots) and
// writes the first kTopKMax candidates' logits and ids, as the full sort would.
__global__ void __launch_bounds__(kThreads)
    TileSelectKernel(const float* logits, int32_t vocab, const uint32_t* bitmask,
                     const int32_t* rows_of, const uint64_t* chunks_in, int64_t n_in,
                     uint64_t* chunks_out, float* sorted_keys, int32_t* sorted_ids) {
  AwaitProducers();
  __shared__ SelectState st;
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
  SelectSmallest(keys, st);
  if (threadIdx.x >= kTopKMax) return;
  const uint64_t key = st.kept[threadIdx.x];
  if (sorted_keys == nullptr) {
    const int64_t n_out = static_cast<int64_t>(gridDim.x) * kTopKMax;
    chunks_out[row * n_out + blockIdx.x * kTopKMax + threadIdx.x] = key;
    return;
  }
  int rank = 0;
  for (int j = 0; j < kTopKMax; ++j) {
    const uint64_t other = st.kept[j];
    rank += other < key || (other == key && j < static_cast<int>(threadIdx.x));
  }
  if (rank < vocab) {
    sorted_keys[row * vocab + rank] = KeyLogit(static_cast<uint32_t>(key >> kIdBits));
    sorted_ids[row * vocab + rank] = static_cast<int32_t>(key & ((1u << kIdBits) - 1));
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
  const bool one = tiles == 1;
  LaunchKernel(TileSelectKernel, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(rows)),
               kThreads, 0, s, logits, vocab, bitmask, rows_of, nullptr, int64_t{0}, scratch_a,
               one ? sorted_keys : nullptr, one ? sorted_ids : nullptr);
  uint64_t *in = scratch_a, *out = scratch_b;
  while (tiles > 1) {  // kFanIn chunks a block: V4's 129,280 ids take one merge
    const int64_t n_in = tiles * kTopKMax;
    tiles = (tiles + kFanIn - 1) / kFanIn;
    const bool last = tiles == 1;
    LaunchKernel(TileSelectKernel, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(rows)),
                 kThreads, 0, s, nullptr, vocab, nullptr, nullptr, in, n_in, out,
                 last ? sorted_keys : nullptr, last ? sorted_ids : nullptr);
    std::swap(in, out);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
