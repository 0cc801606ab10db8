#include <cuda_runtime.h>

#include <cub/device/device_segmented_radix_sort.cuh>

#include "kernels/launch.cuh"
#include "kernels/sample_pick.h"
#include "kernels/sampling.h"

namespace deepinfer::kernels {
namespace {

// The masked logits as sort keys (-0 as +0: the CPU's comparison ties them) and their ids.
__global__ void PrepareKernel(const float* logits, int64_t total, int32_t vocab,
                              const uint32_t* bitmask, float* keys, int32_t* ids) {
  AwaitProducers();
  const int64_t words = (vocab + 31) / 32;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / vocab;
    const int32_t id = static_cast<int32_t>(i % vocab);
    float v = logits[i] + 0.0f;
    if (bitmask && !((bitmask[row * words + id / 32] >> (id % 32)) & 1u)) v = -INFINITY;
    keys[i] = v;
    ids[i] = id;
  }
}

// Block r: every candidate's probability exp((logit - top) / T) in double, in parallel (each
// value is what the CPU computes for it).
__global__ void ProbsKernel(const float* sorted_keys, int32_t vocab, const SampleParams* params,
                            double* probs) {
  AwaitProducers();
  const int64_t row = blockIdx.x;
  const SampleParams p = params[row];
  if (IsGreedy(p.temperature, p.top_k)) return;
  const int32_t n = CandidateCount(p.top_k, vocab);
  const float* k = sorted_keys + row * vocab;
  const double inv_t = 1.0 / p.temperature, top = k[0];
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x)
    probs[row * vocab + i] = exp((k[i] - top) * inv_t);
}

// One thread per row: min-p, top-p and the draw, the CPU sampler's own code (sample_pick.h).
__global__ void PickKernel(const int32_t* sorted_ids, const double* probs, int64_t rows,
                           int32_t vocab, const SampleParams* params, int32_t* out) {
  AwaitProducers();
  const int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (row >= rows) return;
  const SampleParams c = params[row];
  const int32_t* ids = sorted_ids + row * vocab;
  if (IsGreedy(c.temperature, c.top_k)) {
    out[row] = ids[0];  // the largest logit, lowest id among equals
    return;
  }
  const int32_t n = CandidateCount(c.top_k, vocab);
  const double* p = probs + row * vocab;
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += p[i];  // the CPU's order
  const double u = CounterDraw(c.seed, c.stream, c.position);
  out[row] = ids[PickCandidate(p, n, sum, c.min_p, c.top_p, u)];
}

__global__ void OffsetsKernel(int32_t* offsets, int64_t rows, int32_t vocab) {
  AwaitProducers();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i <= rows;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    offsets[i] = static_cast<int32_t>(i * vocab);
  }
}

}  // namespace

SamplerWorkspace::~SamplerWorkspace() {
  for (void* p : {static_cast<void*>(keys_), static_cast<void*>(sorted_keys_),
                  static_cast<void*>(ids_), static_cast<void*>(sorted_ids_),
                  static_cast<void*>(offsets_), static_cast<void*>(probs_), temp_}) {
    if (p) cudaFree(p);
  }
}

int SamplerWorkspace::Reserve(int64_t rows, int32_t vocab) {
  if (rows < 1 || vocab < 1 || rows * vocab > INT32_MAX) {
    return static_cast<int>(cudaErrorInvalidValue);  // CUB's segment offsets are 32-bit
  }
  const int64_t total = rows * vocab;
  cudaError_t e = cudaSuccess;
  auto take = [&](auto** p, size_t bytes) {
    if (e == cudaSuccess) e = cudaMalloc(reinterpret_cast<void**>(p), bytes);
  };
  take(&keys_, total * sizeof(float));
  take(&sorted_keys_, total * sizeof(float));
  take(&ids_, total * sizeof(int32_t));
  take(&sorted_ids_, total * sizeof(int32_t));
  take(&offsets_, (rows + 1) * sizeof(int32_t));
  take(&probs_, total * sizeof(double));
  if (e != cudaSuccess) return static_cast<int>(e);
  LaunchKernel(OffsetsKernel, 64, 256, 0, nullptr, offsets_, rows, vocab);
  e = cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, temp_bytes_, keys_, sorted_keys_, ids_, sorted_ids_, static_cast<int>(total),
      static_cast<int>(rows), offsets_, offsets_ + 1);
  if (e != cudaSuccess) return static_cast<int>(e);
  take(&temp_, temp_bytes_);
  if (e != cudaSuccess) return static_cast<int>(e);
  rows_ = rows;
  vocab_ = vocab;
  return static_cast<int>(cudaDeviceSynchronize());
}

int SampleRows(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
               const uint32_t* bitmask, const SampleParams* params, int32_t* out, void* stream) {
  if (rows > ws.rows_ || vocab != ws.vocab_) return static_cast<int>(cudaErrorInvalidValue);
  if (rows == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t total = rows * vocab;
  LaunchKernel(PrepareKernel, 1024, 256, 0, s, logits, total, vocab, bitmask, ws.keys_, ws.ids_);
  size_t temp_bytes = ws.temp_bytes_;
  cudaError_t e = cub::DeviceSegmentedRadixSort::SortPairsDescending(
      ws.temp_, temp_bytes, ws.keys_, ws.sorted_keys_, ws.ids_, ws.sorted_ids_,
      static_cast<int>(total), static_cast<int>(rows), ws.offsets_, ws.offsets_ + 1, 0,
      sizeof(float) * 8, s);
  if (e != cudaSuccess) return static_cast<int>(e);
  LaunchKernel(ProbsKernel, static_cast<unsigned>(rows), 256, 0, s, ws.sorted_keys_, vocab, params,
               ws.probs_);
  LaunchKernel(PickKernel, static_cast<unsigned>((rows + 127) / 128), 128, 0, s, ws.sorted_ids_,
               ws.probs_, rows, vocab, params, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
