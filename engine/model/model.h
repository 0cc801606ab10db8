// The DeepSeek-V4 forward pass, written once against the Backend interface: embedding, mHC
// streams, sliding-window / CSA / HCA attention with sinks, hash- and score-routed MoE, the
// hyper-head and LM head, and the MTP block.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/common/status.h"
#include "engine/model/rope.h"
#include "engine/model/sequence_state.h"
#include "engine/model/weights.h"

namespace deepinfer {

/// exact: fp32 activations and cache, matches transformers. reference: the official FP8/FP4
/// activation, KV and indexer rounding (reference/deepseek-v4.md §2.7).
enum class Numerics { kExact, kReference };
Result<Numerics> ParseNumerics(const std::string& s);

/// One sequence's part of a batched forward: its tokens (appended at its current length) and
/// where its logits [n, vocab] and, optionally, final streams [n, hc_mult, hidden] go.
struct BatchItem {
  SequenceState* seq = nullptr;
  std::span<const int32_t> tokens;
  float* logits = nullptr;  // [n, vocab], or [1, vocab] with last_logits_only
  float* streams = nullptr;
  bool last_logits_only = false;  // a prefill chunk needs only its last row's logits
  // On a stepper that samples (Model::samples_on_stepper), instead of logits: the token drawn
  // there from the item's last row with *sample, among the tokens `mask` allows (ceil(vocab /
  // 32) words, bit t % 32 of word t / 32; null: all), goes to *next. Other items of the step may
  // take logits.
  // With sample->logprob, the token's log-probability goes to *logprob.
  const SampleParams* sample = nullptr;
  const uint32_t* mask = nullptr;
  int32_t* next = nullptr;
  float* logprob = nullptr;
};

class Model {
 public:
  Model(const Checkpoint& checkpoint, Backend& backend, Numerics numerics);

  const ModelConfig& config() const { return cfg_; }
  /// Whether MtpForward can run (the checkpoint has the block and the steps are not on slots).
  bool has_mtp() const { return w_.has_mtp && stepper_ == nullptr; }

  /// From now on, the main model's steps run on `stepper` (the device forward, or its CPU
  /// reference) instead of the backend: NewSequence leases a free slot, given back when the
  /// state is destroyed (a copy of a state holds none and is refused: no prefix snapshots on this
  /// path), and ForwardBatch is one Step of all items' rows. The stepper holds this model's
  /// checkpoint and outlives its sequences. No MTP and no streams out on this path. Call before
  /// the first NewSequence.
  void UseSlots(SlotStepper* stepper);
  /// The most tokens of one sequence a ForwardBatch takes: the stepper's chunk on the slot path,
  /// else no limit.
  int64_t max_chunk() const { return stepper_ ? stepper_->max_chunk() : INT64_MAX; }
  /// On the slot path, the stepper's slots and those no sequence leases now (else 0 and 0).
  int slots_total() const { return stepper_ ? stepper_->slots() : 0; }
  int slots_free() const { return slot_pool_ ? slot_pool_->free_slots() : 0; }
  /// On the slot path, the draws the stepper made twice (SlotStepper::redrawn_draws; else 0).
  int64_t stepper_redrawn_draws() const { return stepper_ ? stepper_->redrawn_draws() : 0; }

  /// A fresh sequence with empty caches (on the slot path: with a slot, or with none when all are
  /// leased, which its first step reports).
  SequenceState NewSequence() const;
  /// Whether CopySequence works: on the slot path, when the stepper copies slots.
  bool copies_sequences() const { return stepper_ != nullptr && stepper_->CopiesSlots(); }
  /// On the slot path, a second sequence that continues exactly as `from` would: a free slot
  /// leased and given a copy of `from`'s slot. An error when no slot is free or the stepper
  /// cannot copy; `from` is unchanged either way.
  Result<SequenceState> CopySequence(const SequenceState& from) const;
  /// Whether ForwardBatch's items may ask for draws instead of logits (BatchItem::sample): on
  /// the slot path, when the stepper samples (the device forward, or its CPU reference).
  bool samples_on_stepper() const { return stepper_ != nullptr && stepper_->SamplesRows(); }
  /// The blocks holding every sequence's compressed rows and indexer keys.
  BlockPool::Stats block_pool_stats() const { return pool_->stats(); }

  /// Appends `tokens` to the sequence and writes next-token logits [n, vocab]. If `streams` is
  /// not null it receives the final mHC streams [n, hc_mult, hidden] (the MTP block's input).
  Status Forward(SequenceState& seq, std::span<const int32_t> tokens, float* logits,
                 float* streams);

  /// Several sequences in one step (prefill chunks and decode tokens mixed): the dense work runs
  /// on all rows at once, attention and caches per sequence. Each row's arithmetic is the same as
  /// alone, so logits do not depend on the batch (batch invariance). Nothing changes when any
  /// item is invalid.
  Status ForwardBatch(std::span<BatchItem> items);

  /// MTP draft logits: row i combines the main model's final streams of MTP position
  /// seq.mtp_length + i with the embedding of `next_tokens[i]` (the token after that position)
  /// and predicts the token after next_tokens[i].
  Status MtpForward(SequenceState& seq, const float* streams, std::span<const int32_t> next_tokens,
                    float* logits);

 private:
  // Rows [begin, begin + count) of a batched step belong to the sequence owning `cache`.
  struct Segment {
    LayerCache* cache;
    int64_t begin, count;
  };
  void DecoderLayer(const LayerWeights& L, std::span<const Segment> segs, const RopeTable& rope,
                    float* X, const int32_t* tokens, const int64_t* pos, int64_t T);
  void Attention(const LayerWeights& L, std::span<const Segment> segs, const RopeTable& rope,
                 const float* x, const int64_t* pos, int64_t T, float* out);
  void Compress(const CompressorWeights& w, CompressorState& st, const float* x, const int64_t* pos,
                int64_t T, const RopeTable& rope, bool indexer, PagedRows& rows);
  void SelectCompressed(const AttentionWeights& a, const LayerCache& cache, const RopeTable& rope,
                        const float* x, const float* q_residual, const int64_t* pos, int64_t T,
                        std::span<std::vector<int32_t>> selected);
  void Moe(const LayerWeights& L, const float* u, const int32_t* tokens, int64_t T, float* out);
  void Ffn(const FfnWeights& f, const float* x, int64_t rows, float* out);
  void Head(const HyperHeadWeights& hc, const std::vector<float>& norm, const float* X, int64_t T,
            float* logits);
  void LayerCacheInit(const LayerWeights& L, LayerCache& cache) const;
  Status ForwardOnSlots(std::span<BatchItem> items);
  // ForwardOnSlots' step when items ask for draws: one StepMixed of the rows it gathered (the
  // drawn items' tokens set; the logits in step_logits_ for the caller to hand out).
  Status DrawOnSlots(std::span<BatchItem> items);
  bool QuantizeActs(const LinearWeight& w) const {
    return numerics_ == Numerics::kReference && w.quantized();
  }

  const ModelConfig& cfg_;
  const ModelWeights& w_;
  Backend& be_;
  Numerics numerics_;
  std::vector<RopeTable> layer_rope_;
  RopeTable main_rope_;
  // Compressed rows and indexer keys of every sequence of this model, shared between sequences
  // and prefix snapshots with a common prefix.
  std::shared_ptr<BlockPool> pool_ = BlockPool::Create();
  // The slot path (UseSlots): the stepper, its free slots, and a step's rows and logits,
  // allocated once for its largest step.
  SlotStepper* stepper_ = nullptr;
  std::shared_ptr<SlotPool> slot_pool_;
  std::vector<int32_t> step_slots_, step_tokens_, step_logit_rows_;
  std::vector<uint8_t> slot_seen_;  // one mark per slot while a step's items are checked
  std::vector<float> step_logits_;
  std::vector<int32_t> step_sample_rows_;  // a step's drawn rows (BatchItem::sample)
  std::vector<SampleParams> step_params_;
  std::vector<uint32_t> step_masks_;
  std::vector<int32_t> step_next_;
  std::vector<float> step_logprobs_;
};

}  // namespace deepinfer
