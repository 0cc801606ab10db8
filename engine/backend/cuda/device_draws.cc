#include "engine/backend/cuda/device_draws.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "engine/backend/cuda/cuda_status.h"

namespace deepinfer {

DeviceDraws::~DeviceDraws() {
  if (host_) cudaFreeHost(host_);
}

Status DeviceDraws::Reserve(DeviceMemory& mem, int64_t rows, int32_t vocab) {
  const int64_t words = (vocab + 31) / 32;
  const size_t bytes = rows * (sizeof(SampleParams) + words * sizeof(uint32_t) + sizeof(int32_t));
  DI_ASSIGN_OR_RETURN(void* dev, mem.Alloc(bytes));
  DI_RETURN_IF_ERROR(CudaStatus(cudaMallocHost(&host_, bytes), "cudaMallocHost"));
  dev_params_ = static_cast<SampleParams*>(dev);
  dev_masks_ = reinterpret_cast<uint32_t*>(dev_params_ + rows);
  dev_rows_ = reinterpret_cast<int32_t*>(dev_masks_ + rows * words);
  host_params_ = static_cast<SampleParams*>(host_);
  host_masks_ = reinterpret_cast<uint32_t*>(host_params_ + rows);
  host_rows_ = reinterpret_cast<int32_t*>(host_masks_ + rows * words);
  DI_ASSIGN_OR_RETURN(dev_next_, mem.Take<int32_t>(rows));
  DI_ASSIGN_OR_RETURN(dev_logprobs_, mem.Take<float>(rows));
  rows_ = rows;
  vocab_ = vocab;
  return KernelStatus(sampler_.Reserve(rows, vocab), "sampler workspace");
}

Status DeviceDraws::Queue(const float* logits, std::span<const uint8_t> drawn,
                          std::span<const SampleParams> params, const uint32_t* masks,
                          int32_t* next, float* logprobs, float* host_logits, cudaStream_t stream) {
  const int64_t draws = static_cast<int64_t>(params.size()), V = vocab_, words = (V + 31) / 32;
  if (draws > rows_) return InvalidArgument("a step draws at most " + std::to_string(rows_));
  if (draws > 0) {
    std::memcpy(host_params_, params.data(), draws * sizeof(SampleParams));
    if (masks) std::memcpy(host_masks_, masks, draws * words * sizeof(uint32_t));
    for (int32_t j = 0, k = 0; j < static_cast<int32_t>(drawn.size()); ++j) {
      if (drawn[j]) host_rows_[k++] = j;  // where draw k's logits lie
    }
    const std::pair<const void*, size_t> parts[3] = {
        {host_params_, draws * sizeof(SampleParams)},
        {masks ? host_masks_ : nullptr, draws * words * sizeof(uint32_t)},
        {host_rows_, draws * sizeof(int32_t)}};
    void* dev_parts[3] = {dev_params_, dev_masks_, dev_rows_};
    for (int i = 0; i < 3; ++i) {
      if (parts[i].first == nullptr) continue;
      DI_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(dev_parts[i], parts[i].first, parts[i].second,
                                                    cudaMemcpyHostToDevice, stream),
                                    "sampling inputs"));
    }
    // The log-probabilities' kernel and copy only when a draw asks for one; the others' are 0.
    bool asked = false;
    for (const SampleParams& p : params) asked = asked || p.logprob != 0;
    if (logprobs != nullptr && !asked) std::fill(logprobs, logprobs + draws, 0.0f);
    if (!asked) logprobs = nullptr;
    // A step of greedy draws only takes the argmax, without the sort (bench/RESULTS-gpu.md).
    bool greedy = true;
    for (const SampleParams& p : params) greedy = greedy && IsGreedy(p.temperature, p.top_k);
    const auto sample = greedy ? kernels::GreedyRows : kernels::SampleRows;
    DI_RETURN_IF_ERROR(KernelStatus(
        sample(sampler_, logits, draws, vocab_, masks ? dev_masks_ : nullptr, dev_params_,
               dev_rows_, dev_next_, logprobs ? dev_logprobs_ : nullptr, stream),
        "sampling"));
    DI_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(next, dev_next_, draws * sizeof(int32_t), cudaMemcpyDeviceToHost, stream),
        "sampled tokens"));
    if (logprobs) {
      DI_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(logprobs, dev_logprobs_, draws * sizeof(float),
                                                    cudaMemcpyDeviceToHost, stream),
                                    "log-probabilities"));
    }
  }
  // The other rows' logits, each run of consecutive ones in one copy.
  for (size_t j = 0, l = 0; j < drawn.size();) {
    if (drawn[j]) {
      ++j;
      continue;
    }
    size_t end = j;
    while (end < drawn.size() && !drawn[end]) ++end;
    DI_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(host_logits + l * V, logits + j * V,
                                   (end - j) * V * sizeof(float), cudaMemcpyDeviceToHost, stream),
                   "logits"));
    l += end - j;
    j = end;
  }
  return Status::Ok();
}

}  // namespace deepinfer
