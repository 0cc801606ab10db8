#include "engine/backend/cuda/device_draws.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "engine/backend/cuda/cuda_status.h"
#include "kernels/sample_topk.h"

namespace deepinfer {

DeviceDraws::~DeviceDraws() {
  if (host_) cudaFreeHost(host_);
}

Status DeviceDraws::Reserve(DeviceMemory& mem, int64_t rows, int32_t vocab) {
  const int64_t words = (vocab + 31) / 32;
  // Device and pinned alike: a step's params then its draw rows (one upload), the masks, then
  // its ids then their log-probabilities (one copy back); each part packed to the step's draws.
  const size_t inputs = rows * (sizeof(SampleParams) + sizeof(int32_t));
  const size_t bytes =
      inputs + rows * words * sizeof(uint32_t) + rows * (sizeof(int32_t) + sizeof(float));
  DI_ASSIGN_OR_RETURN(void* dev, mem.Alloc(bytes));
  DI_RETURN_IF_ERROR(CudaStatus(cudaMallocHost(&host_, bytes), "cudaMallocHost"));
  auto layout = [&](void* base, SampleParams** params, uint32_t** masks, int32_t** next) {
    *params = static_cast<SampleParams*>(base);
    *masks = reinterpret_cast<uint32_t*>(static_cast<char*>(base) + inputs);
    *next = reinterpret_cast<int32_t*>(*masks + rows * words);
  };
  layout(dev, &dev_params_, &dev_masks_, &dev_next_);
  layout(host_, &host_params_, &host_masks_, &host_next_);
  rows_ = rows;
  vocab_ = vocab;
  undrawn_.reserve(rows);
  undrawn_rows_.reserve(rows);
  return KernelStatus(sampler_.Reserve(rows, vocab), "sampler workspace");
}

Status DeviceDraws::Queue(const float* logits, std::span<const uint8_t> drawn,
                          std::span<const SampleParams> params, const uint32_t* masks,
                          bool want_logprobs, float* host_logits, cudaStream_t stream) {
  const int64_t draws = static_cast<int64_t>(params.size()), V = vocab_, words = (V + 31) / 32;
  if (draws > rows_) return InvalidArgument("a step draws at most " + std::to_string(rows_));
  queued_draws_ = draws;
  queued_logprobs_ = false;
  if (draws > 0) {
    std::memcpy(host_params_, params.data(), draws * sizeof(SampleParams));
    auto* host_rows = reinterpret_cast<int32_t*>(host_params_ + draws);
    for (int32_t j = 0, k = 0; j < static_cast<int32_t>(drawn.size()); ++j) {
      if (drawn[j]) host_rows[k++] = j;  // where draw k's logits lie
    }
    DI_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(dev_params_, host_params_, draws * (sizeof(SampleParams) + sizeof(int32_t)),
                        cudaMemcpyHostToDevice, stream),
        "sampling inputs"));
    if (masks) {
      std::memcpy(host_masks_, masks, draws * words * sizeof(uint32_t));
      DI_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyAsync(dev_masks_, host_masks_, draws * words * sizeof(uint32_t),
                                     cudaMemcpyHostToDevice, stream),
                     "sampling masks"));
    }
    // The log-probabilities' kernel and copy only when the caller takes them and a draw asks.
    // A step of greedy draws only takes the argmax; one whose draws are greedy or without a cut
    // walks the ids in order; one whose draws are greedy or keep at most kTopKMax candidates
    // selects them; one whose draws also cut a nucleus without a top-k tries it among the
    // selected (Collect sorts the rows that run past them): none sorts each row
    // (docs/gpu-sampler.md). Others sort, and skip the walk's launches when no draw walks.
    bool greedy = true, id_order = true, top_k = V >= kernels::kTopKMax, walks = false;
    bool nucleus = top_k, cuts = false;  // cuts: some draw's nucleus is tried among the selected
    for (const SampleParams& p : params) {
      queued_logprobs_ = queued_logprobs_ || (want_logprobs && p.logprob != 0);
      const bool this_greedy = IsGreedy(p.temperature, p.top_k);
      greedy = greedy && this_greedy;
      const bool this_walks = !this_greedy && WalksIdOrder(p.temperature, p.top_k, p.top_p, vocab_);
      id_order = id_order && (this_greedy || this_walks);
      walks = walks || this_walks;
      // A top-k of the whole vocabulary (possible at 128 ids) cuts nothing: that row walks.
      const bool selects = p.top_k >= 1 && p.top_k <= kernels::kTopKMax && p.top_k < vocab_;
      top_k = top_k && (this_greedy || selects);
      const bool this_cuts = TriesNucleusAmongSelected(p.temperature, p.top_k, p.top_p, vocab_);
      nucleus = nucleus && (this_greedy || this_walks || selects || this_cuts);
      cuts = cuts || this_cuts;
    }
    // The select serves a step mixing walks and top-k draws too. After a step most of whose
    // draws ran past the selected candidates, the next kNucleusBackoff steps with a nucleus to
    // try sort at once.
    bool select_step = nucleus && !greedy && !id_order && !top_k;
    if (select_step && cuts && nucleus_backoff_ > 0) {
      --nucleus_backoff_;
      select_step = false;
    }
    queued_nucleus_ = select_step && cuts;  // only then can a draw come back undrawn
    const auto sample = greedy     ? kernels::GreedyRows
                        : id_order ? kernels::IdOrderRows
                        : top_k    ? kernels::TopKRows
                        : select_step
                            ? (walks ? kernels::NucleusRows : kernels::NucleusRowsWithoutWalks)
                        : walks ? kernels::SampleRows
                                : kernels::SortedRows;
    queued_logits_ = logits;
    queued_masked_ = masks != nullptr;
    DI_RETURN_IF_ERROR(KernelStatus(
        sample(sampler_, logits, draws, vocab_, masks ? dev_masks_ : nullptr, dev_params_,
               reinterpret_cast<const int32_t*>(dev_params_ + draws), dev_next_,
               queued_logprobs_ ? reinterpret_cast<float*>(dev_next_ + draws) : nullptr, stream),
        "sampling"));
    // The ids, and the log-probabilities right after them, in one copy back.
    DI_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(host_next_, dev_next_,
                        draws * (sizeof(int32_t) + (queued_logprobs_ ? sizeof(float) : 0)),
                        cudaMemcpyDeviceToHost, stream),
        "sampled tokens"));
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

Status DeviceDraws::Collect(int32_t* next, float* logprobs, cudaStream_t stream) {
  std::copy_n(host_next_, queued_draws_, next);
  if (logprobs != nullptr) {
    if (queued_logprobs_) {
      std::copy_n(reinterpret_cast<const float*>(host_next_ + queued_draws_), queued_draws_,
                  logprobs);
    } else {
      std::fill(logprobs, logprobs + queued_draws_, 0.0f);
    }
  }
  if (!queued_nucleus_) return Status::Ok();
  undrawn_.clear();
  for (int32_t k = 0; k < queued_draws_; ++k) {
    if (next[k] < 0) undrawn_.push_back(k);
  }
  if (undrawn_.empty()) return Status::Ok();
  redrawn_draws_ += static_cast<int64_t>(undrawn_.size());
  if (2 * static_cast<int64_t>(undrawn_.size()) > queued_draws_) {
    nucleus_backoff_ = kNucleusBackoff;
  }
  return Redraw(next, logprobs, stream);
}

Status DeviceDraws::Redraw(int32_t* next, float* logprobs, cudaStream_t stream) {
  // The step has finished, so its staging is free: the undrawn draws' params, logits rows and
  // masks are packed to its front (draw j of them is draw undrawn_[j] >= j) and drawn again from
  // the same logits, which the next step has not yet overwritten.
  const int64_t m = static_cast<int64_t>(undrawn_.size()), words = (vocab_ + 31) / 32;
  const auto* rows = reinterpret_cast<const int32_t*>(host_params_ + queued_draws_);
  undrawn_rows_.clear();
  for (const int32_t k : undrawn_) undrawn_rows_.push_back(rows[k]);
  for (int64_t j = 0; j < m; ++j) {
    host_params_[j] = host_params_[undrawn_[j]];
    if (queued_masked_ && undrawn_[j] != j) {
      std::memcpy(host_masks_ + j * words, host_masks_ + undrawn_[j] * words,
                  words * sizeof(uint32_t));
    }
  }
  std::copy_n(undrawn_rows_.data(), m, reinterpret_cast<int32_t*>(host_params_ + m));
  DI_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(dev_params_, host_params_, m * (sizeof(SampleParams) + sizeof(int32_t)),
                      cudaMemcpyHostToDevice, stream),
      "sampling inputs"));
  if (queued_masked_) {
    DI_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(dev_masks_, host_masks_, m * words * sizeof(uint32_t),
                                   cudaMemcpyHostToDevice, stream),
                   "sampling masks"));
  }
  // Every one of them cuts a nucleus, so none walks the ids: the sort alone.
  DI_RETURN_IF_ERROR(KernelStatus(
      kernels::SortedRows(
          sampler_, queued_logits_, m, vocab_, queued_masked_ ? dev_masks_ : nullptr, dev_params_,
          reinterpret_cast<const int32_t*>(dev_params_ + m), dev_next_,
          queued_logprobs_ ? reinterpret_cast<float*>(dev_next_ + m) : nullptr, stream),
      "sampling"));
  DI_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(host_next_, dev_next_,
                                 m * (sizeof(int32_t) + (queued_logprobs_ ? sizeof(float) : 0)),
                                 cudaMemcpyDeviceToHost, stream),
                 "sampled tokens"));
  DI_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream), "sampling again"));
  for (int64_t j = 0; j < m; ++j) {
    next[undrawn_[j]] = host_next_[j];
    if (logprobs != nullptr && queued_logprobs_) {
      logprobs[undrawn_[j]] = reinterpret_cast<const float*>(host_next_ + m)[j];
    }
  }
  return Status::Ok();
}

}  // namespace deepinfer
