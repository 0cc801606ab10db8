// The device forward (stage 2 of the CUDA backend, docs/gpu.md): the V4 decode step on device
// buffers only, in the reference numerics — FP8 activations, the KV cache in 584-byte rows, bf16
// indexer keys — with the production kernels (or, for checking, CPU-order ones). Sequences live
// in slots whose caches (rings, compressed rows, indexer keys, compressor states) are
// preallocated on the device; a step takes up to max_batch rows (a decode token or a prompt
// chunk per slot), uploads one small input block, replays the CUDA graph captured for its batch
// bucket and copies back the logits (Step) or the sampled ids (StepSample): its only
// synchronisation.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "engine/common/status.h"
#include "engine/model/slot_stepper.h"
#include "engine/model/weights.h"
#include "kernels/sampling.h"

namespace deepinfer {

struct DeviceForwardOptions {
  int max_batch = 8;           // rows a step takes (buckets 1, 2, 4, ... up to it)
  int max_chunk = 1;           // rows of one sequence a step may take (a prompt chunk)
  int slots = 8;               // sequences whose caches the device holds at once
  int64_t max_context = 4096;  // positions per sequence; a multiple of 128
  bool graphs = true;          // replay each bucket's step as a CUDA graph
  // Kernels that sum in the CPU's order instead of the production ones: the logits are then the
  // CPU forward's (reference numerics) bit for bit, which checks the caches, slots and graphs
  // exactly. Slow; for tests.
  bool cpu_order = false;
  // FP8 dense products of 2 to kGemvMaxRows rows, and one-row products of 8,192 inputs or more
  // (wo_b), on the tensor cores (kernels/linear_fp8_mma.h) instead of the CUDA-core GEMV: 1.2x
  // faster steps at batch 8 (docs/gpu.md). Off: fp32 sums.
  bool dense_mma = true;
  // Steps of up to kGemvMaxRows rows run the compressors, the indexer and the shared expert on two
  // side streams beside the query path and the routed experts (StepBranches in device_step.h):
  // the same kernels and bits, less time where single kernels leave the GPU idle. Off: one stream.
  bool branches = true;
  // Steps whose routed experts average 64 tokens or more (ExpertMmaWindow 8: prompt chunks of
  // ~2,700 tokens at 256 experts, top-6) take the folded-scale wgmma GEMM (kernels/
  // expert_fp4_wgmma.h): 2.8x faster experts at 8K-token chunks (bench/RESULTS-gpu.md), their
  // sums within ~1e-3 of the products' magnitudes instead of fp32 rounding (the tensor cores'
  // FP8 accumulator), so a token's expert sums then depend on its step's size. Create fails
  // unless every expert's scales fold. Off: mma.sync at every size, batch-invariant fp32 sums.
  bool folded_experts = false;
  // StepMixed's sampler (~40 bytes a logit for each of min(max_batch, slots) draws, ~1 GB at
  // V4's vocabulary and 256 slots). Off: SamplesRows() is false, nothing is reserved.
  bool draws = true;
  int device = 0;
};

class DeviceForward : public SlotStepper {
 public:
  /// Uploads the checkpoint's main model and allocates every buffer and cache (the checkpoint
  /// may be released afterwards). Errors: no CUDA device, shapes or formats the production
  /// kernels do not take, options out of range. A device fault in a later call stops the
  /// forward: that call and every later one return the fault (its caches may be partly
  /// advanced; `fault()` reports it), and the daemon exits for systemd to restart it.
  static Result<std::unique_ptr<DeviceForward>> Create(const Checkpoint& checkpoint,
                                                       const DeviceForwardOptions& options);
  virtual ~DeviceForward() = default;

  // ResetSlot, length and Step: the SlotStepper contract (engine/model/slot_stepper.h). A step
  // takes up to max_batch rows — one decode token per slot, or a prompt chunk of up to
  // max_chunk consecutive rows of one slot at the sequence's next positions, each row seeing the
  // ones before it — so prefill and decode rows of different sequences share a step, replayed
  // as its bucket's CUDA graph. Bad input (slot, token id, a slot's rows split or over
  // max_chunk, a full sequence) changes nothing.
  using SlotStepper::Step;

  // StepSample (SlotStepper): SampleToken's pick made on the device (kernels/sampling.h) from
  // the asked rows' logits after the grammar mask; the step's one synchronisation copies those
  // rows' ids only.
  /// Device memory held: weights, caches, activations.
  virtual size_t device_bytes() const = 0;
};

}  // namespace deepinfer
