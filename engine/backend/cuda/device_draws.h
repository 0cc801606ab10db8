// The device forward's draws (SlotStepper::StepMixed on engine/backend/cuda/device_forward.h):
// after a step's LM head has written the logits of the rows asked for, the drawn rows' tokens are
// picked on the device (kernels/sampling.h, the CPU sampler's picks) and come back as one id
// each, and the other rows' logits are copied back for the host sampler. Buffers are made once:
// the sampler's workspace (~40 bytes a logit), pinned staging for the draws' parameters, masks,
// rows, ids and log-probabilities, and their device copies.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend/cuda/device_weights.h"
#include "engine/common/status.h"
#include "kernels/sampling.h"

namespace deepinfer {

class DeviceDraws {
 public:
  /// Steps that sort at once after one most of whose draws NucleusRows left undrawn: flat rows
  /// (a random model's, a hot temperature) would otherwise pay for the select and the sort both.
  static constexpr int kNucleusBackoff = 16;

  DeviceDraws() = default;
  DeviceDraws(const DeviceDraws&) = delete;
  DeviceDraws& operator=(const DeviceDraws&) = delete;
  ~DeviceDraws();

  /// Room for up to `rows` draws a step over `vocab` ids (device memory from `mem`).
  Status Reserve(DeviceMemory& mem, int64_t rows, int32_t vocab);
  /// Draws a step may make.
  int64_t rows() const { return rows_; }

  /// Queues on `stream`, after the step that wrote `logits` (its rows in `drawn`'s order,
  /// [drawn.size(), vocab]): the draws of the rows marked in `drawn` (params and masks in their
  /// order, masks null for none), and the unmarked rows' logits into host_logits[..] in their
  /// order. The draws' ids (and with want_logprobs the log-probabilities of draws asking) come
  /// back into pinned staging: after the caller synchronises the stream, Collect hands them out.
  Status Queue(const float* logits, std::span<const uint8_t> drawn,
               std::span<const SampleParams> params, const uint32_t* masks, bool want_logprobs,
               float* host_logits, cudaStream_t stream);
  /// After the queued step has finished (`stream` synchronised): its draws' ids into next[..]
  /// and, unless null, their log-probabilities into logprobs[..] (0 for draws that did not ask).
  /// The draws kernels::NucleusRows left undrawn (a nucleus past the selected candidates, or its
  /// cut within the slack of a total summed in another order) are drawn here again, sorted, on
  /// `stream`, before it returns: the same tokens as if the step had sorted at first. When they
  /// are most of the step's, the next kNucleusBackoff steps that would try the nucleus sort at
  /// once.
  Status Collect(int32_t* next, float* logprobs, cudaStream_t stream);
  /// Draws Collect drew again sorted.
  int64_t redrawn_draws() const { return redrawn_draws_; }

 private:
  int64_t rows_ = 0;
  int32_t vocab_ = 0;
  kernels::SamplerWorkspace sampler_;
  // Pinned, in the device block's order: a step's params then its draw rows (one upload), masks
  // (a second, only for masked steps); then its ids then their log-probabilities (one copy back).
  void* host_ = nullptr;
  SampleParams *host_params_ = nullptr, *dev_params_ = nullptr;
  uint32_t *host_masks_ = nullptr, *dev_masks_ = nullptr;
  int32_t *host_next_ = nullptr, *dev_next_ = nullptr;
  int64_t queued_draws_ = 0;
  bool queued_logprobs_ = false;
  bool queued_nucleus_ = false;  // queued with NucleusRows: some ids may be -1
  bool queued_masked_ = false;
  const float* queued_logits_ = nullptr;
  int64_t redrawn_draws_ = 0;
  int nucleus_backoff_ = 0;  // steps left that sort instead of trying NucleusRows
  // The draws to draw again and their logits rows: room for rows_ made once (no allocation on
  // the step's path).
  std::vector<int32_t> undrawn_, undrawn_rows_;

  // Draws again sorted the undrawn_ draws of the queued step, packed to the front of the
  // staging (params, rows, masks), and puts their ids and log-probabilities in place.
  Status Redraw(int32_t* next, float* logprobs, cudaStream_t stream);
};

}  // namespace deepinfer
