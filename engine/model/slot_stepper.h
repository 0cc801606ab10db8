// The slot contract: sequences live in numbered slots whose caches an implementation holds (the
// device forward, engine/backend/cuda/device_forward.h, on the GPU; HostSlotStepper on the CPU as
// its reference), and a step appends rows to them — one decode token per slot, or a prompt chunk
// of one slot's consecutive rows — returning the next-token logits of the rows asked for. The
// Model runs its steps through a stepper after Model::UseSlots; a sequence's state then holds a
// SlotLease.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/common/status.h"
#include "kernels/sample_pick.h"

namespace deepinfer {

/// Runs steps of rows on sequences it holds in slots (the contract above).
class SlotStepper {
 public:
  virtual ~SlotStepper() = default;
  virtual int slots() const = 0;            // slots 0 .. slots() - 1
  virtual int max_rows() const = 0;         // rows a step takes
  virtual int max_chunk() const = 0;        // rows of one slot a step takes
  virtual int64_t max_context() const = 0;  // positions per sequence
  /// Empties slot `slot` for a new sequence (length 0).
  virtual Status ResetSlot(int slot) = 0;
  /// Tokens the sequence in `slot` holds.
  virtual int64_t length(int slot) const = 0;
  /// Appends tokens[i] to the sequence in slots[i] (a slot's rows consecutive: CheckStepRows)
  /// and writes the next-token logits after row logit_rows[k] to logits[k * vocab ..] — the rows
  /// a caller needs, ascending (CheckLogitRows; empty: every row), so that a prompt chunk costs
  /// the copy of its last row only, and the LM head of that row alone wherever the head is not
  /// cheaper run on all of a small step's rows. Bad input changes nothing.
  virtual Status Step(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                      std::span<const int32_t> logit_rows, float* logits) = 0;
  /// Step with every row's logits.
  Status Step(std::span<const int32_t> slots, std::span<const int32_t> tokens, float* logits) {
    return Step(slots, tokens, {}, logits);
  }
  /// Whether StepMixed works here (the engine then draws tokens on the stepper, and only the
  /// rows the host samples leave it as logits).
  virtual bool SamplesRows() const { return false; }
  /// As Step, but some rows come back as draws instead of logits: next[k] is the token
  /// SampleToken (engine/sampling/sampler.h) picks with params[k] from the logits after row
  /// sample_rows[k], among the tokens whose bit is set in row k of `bitmask` ([draws,
  /// ceil(vocab / 32)] words, bit t % 32 of word t / 32; null: every token). Where
  /// params[k].logprob is set and `logprobs` is not null, logprobs[k] is that token's
  /// log-probability among the masked logits (ComputeLogprobs; on the GPU within float rounding
  /// of it), else 0. The logits after row logit_rows[k] go to logits[k * vocab ..]. Both lists
  /// ascending, no row in both (both empty: every row drawn); at most min(max_rows(), slots())
  /// draws (one a sequence's next token). No logit processors are applied: a request with
  /// penalties or biases takes logits and the host sampler. Bad input (also CheckSampleParams'
  /// and a params count other than the draws) changes nothing.
  virtual Status StepMixed(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                           std::span<const int32_t> sample_rows,
                           std::span<const SampleParams> params, const uint32_t* bitmask,
                           int32_t* next, float* logprobs, std::span<const int32_t> logit_rows,
                           float* logits) {
    (void)slots, (void)tokens, (void)sample_rows, (void)params, (void)bitmask, (void)next;
    (void)logprobs, (void)logit_rows, (void)logits;
    return Unimplemented("this slot stepper cannot sample");
  }
  /// Draws StepMixed made twice: a first try that could not decide them (the GPU sampler's
  /// nucleus among the selected candidates, kernels/sampling.h NucleusRows), then a sort. The
  /// tokens are the same; this counts what the first try costs where it misses.
  virtual int64_t redrawn_draws() const { return 0; }
  /// StepMixed with draws only (empty sample_rows: every row).
  Status StepSample(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                    std::span<const int32_t> sample_rows, std::span<const SampleParams> params,
                    const uint32_t* bitmask, int32_t* next) {
    return StepMixed(slots, tokens, sample_rows, params, bitmask, next, nullptr, {}, nullptr);
  }
  /// StepSample of every row.
  Status StepSample(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                    std::span<const SampleParams> params, const uint32_t* bitmask, int32_t* next) {
    return StepMixed(slots, tokens, {}, params, bitmask, next, nullptr, {}, nullptr);
  }
  /// A fault that stops every later call (the device forward's device fault), else Ok. Any
  /// thread may ask, also while a step runs.
  virtual Status fault() const { return Status::Ok(); }
  /// Whether CopySlot works here (the engine shares prompt prefixes between requests with it).
  virtual bool CopiesSlots() const { return false; }
  /// Makes slot `to` hold what slot `from` holds — caches, window ring, compressor partial
  /// windows, length — so that both continue as the same sequence would. `from` is unchanged;
  /// from == to or a slot out of range is an error that changes nothing.
  virtual Status CopySlot(int from, int to) {
    (void)from;
    (void)to;
    return Unimplemented("this slot stepper cannot copy slots");
  }
};

/// The limits a step's rows are checked against.
struct StepLimits {
  int slots = 0;            // slots 0 .. slots - 1 hold sequences
  int max_rows = 0;         // rows per step
  int max_chunk = 1;        // rows of one slot per step
  int64_t max_context = 0;  // positions per sequence
  int32_t vocab = 0;
};

/// Whether rows (slots[i], tokens[i]) form a valid step: at most max_batch rows, each slot's rows
/// consecutive (one run, at most max_chunk long), slots in range, token ids in the vocabulary,
/// and every sequence (lengths[slot] tokens so far) with room for its rows. `seen` is scratch of
/// `slots` zeros, left zero. Nothing else is touched, so a bad step changes nothing.
Status CheckStepRows(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                     const int64_t* lengths, const StepLimits& limits, std::vector<uint8_t>& seen);

/// Whether params holds `rows` valid draws (top_p in (0, 1], min_p in [0, 1]) and every row of
/// `bitmask` (null: none) allows at least one of the `vocab` tokens.
Status CheckSampleParams(std::span<const SampleParams> params, int64_t rows,
                         const uint32_t* bitmask, int32_t vocab);

/// The rows StepMixed computes: sample_rows and logit_rows merged in ascending order into
/// `merged` (each list ascending, no row in both, rows of a step of `rows` rows; both empty:
/// every row), with drawn[j] telling which list merged[j] came from.
Status MergeStepRows(std::span<const int32_t> sample_rows, std::span<const int32_t> logit_rows,
                     int64_t rows, std::vector<int32_t>& merged, std::vector<uint8_t>& drawn);

/// Whether logit_rows lists rows of a step of `rows` rows in ascending order, each once.
Status CheckLogitRows(std::span<const int32_t> logit_rows, int64_t rows);

/// The free slots of one stepper, shared by the leases taken from it.
class SlotPool {
 public:
  explicit SlotPool(int slots);
  /// A free slot, or -1 when every slot is leased.
  int Take();
  /// Returns a slot taken before (the next Take gets it first).
  void Give(int slot);
  /// Slots not leased now.
  int free_slots() const;

 private:
  mutable std::mutex mu_;
  std::vector<int> free_;
};

/// A sequence's slot, given back to its pool when the lease ends. A copy holds no slot (a slot's
/// caches cannot be shared) but remembers that it was copied from one, so the slot path refuses
/// it with a reason instead of running it on another sequence's caches.
class SlotLease {
 public:
  SlotLease() = default;
  SlotLease(std::shared_ptr<SlotPool> pool, int slot) : pool_(std::move(pool)), slot_(slot) {}
  SlotLease(const SlotLease& other) : copied_(other.slot_ >= 0 || other.copied_) {}
  SlotLease& operator=(const SlotLease& other);
  SlotLease(SlotLease&& other) noexcept;
  SlotLease& operator=(SlotLease&& other) noexcept;
  ~SlotLease() { Release(); }

  int slot() const { return slot_; }  // -1: none
  bool copied() const { return copied_; }
  bool leased() const { return pool_ != nullptr; }  // taken from a pool (slot -1: none was free)

 private:
  void Release();
  std::shared_ptr<SlotPool> pool_;
  int slot_ = -1;
  bool copied_ = false;
};

}  // namespace deepinfer
