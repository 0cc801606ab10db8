// Runs one generation request on a Model: prefill the prompt, then sample token by token until
// max_tokens, EOS, a stop id or a stop string, or cancellation. The single-request engine of the
// daemon; the batching scheduler replaces its loop but keeps its stop rules.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/common/status.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "grammar/matcher.h"

namespace deepinfer {

struct GenerationParams {
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  SamplingConfig sampling;
  std::vector<int32_t> stop_ids;          // besides the model's EOS
  std::vector<std::string> stop_strings;  // need a tokenizer
  bool ignore_eos = false;
  /// Report each sampled token's log-probability (GeneratedToken::logprob; else 0). A full
  /// log-softmax over the vocabulary: ~1 ms a token at V4's 129K ids on one core, 10x a greedy
  /// pick, so only when asked.
  bool logprobs = false;
  /// Structured output: every sampled token must be allowed by this grammar (masked before
  /// sampling); the request ends when the grammar accepts EOS. Both shared, read-only. Text the
  /// grammar forces (one possible continuation) is appended as tokens without sampling
  /// ("jump-forward"; needs the tokenizer) and fed to the model as one chunk.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  std::shared_ptr<const grammar::TokenVocabulary> vocabulary;
};

/// How a request ended. A grammar that allows no token at all is an error instead
/// (InvalidArgument "grammar: no token can continue the output").
enum class GenerationEnd { kLength, kStop, kCancelled };
const char* GenerationEndName(GenerationEnd r);

/// One generated token and the text it completes (empty without a tokenizer or while a
/// character or a possible stop string is still incomplete).
struct GeneratedToken {
  int32_t token;
  std::string text;
  float logprob = 0;  // of the chosen token, after logit processors, before temperature (0
                      // unless GenerationParams::logprobs)
};

/// One request's decoding state, advanced one model step at a time by whoever forms the batches:
/// feed NextInput(), run the model, hand the last row's logits to OnStep.
class RequestState {
 public:
  RequestState(Model& model, const Tokenizer* tokenizer, uint64_t stream, GenerationParams params);

  SequenceState& seq() { return seq_; }
  /// More than one token to feed: the prompt, or a replay after preemption.
  bool prefilling() const { return context_.size() - static_cast<size_t>(seq_.length) > 1; }
  /// The tokens for the next step: up to `budget` (at least one) of those the model has not
  /// seen — prompt chunks, then the token sampled last.
  /// With stop_at_block, a chunk ends at the first 128-token boundary it reaches (so the state
  /// at every boundary can be snapshotted for the prefix cache); a chunk that would pass position
  /// stop_at ends there (the slot path's copy of a shared prefix; 0: none).
  std::span<const int32_t> NextInput(int64_t budget, bool stop_at_block = false,
                                     int64_t stop_at = 0);
  /// Frees the cache state; the request continues later by recomputing its prompt and output
  /// (exactly, since the forward does not depend on how a sequence is split).
  void Preempt() {
    seq_ = SequenceState();  // first give back the slot (on the slot path) the new state may take
    seq_ = model_.NewSequence();
  }
  /// Every token so far: the prompt, then the sampled ones.
  std::span<const int32_t> context() const { return context_; }
  /// Moves context() out, for a request that has ended (parked slots keep it as their key).
  std::vector<int32_t> TakeContext() { return std::move(context_); }
  /// Continues from a cached state covering the first state.length tokens of context().
  void ResumeFrom(SequenceState state) { seq_ = std::move(state); }
  /// After the step: `last_logits` [vocab] of the last row fed (modified in place). While the
  /// prompt is not finished nothing is sampled. Returns the end of the request, or nullopt to go
  /// on.
  Result<std::optional<GenerationEnd>> OnStep(
      float* last_logits, const std::function<bool(const GeneratedToken&)>& emit);
  /// OnStep in two halves, for a batch: Sample (logit processors, grammar mask, the draw, the
  /// grammar and history updates) touches only this request, so different requests may sample
  /// in parallel; Emit (text, stop rules, the callback) then runs on the caller's thread.
  Status Sample(float* last_logits);
  Result<std::optional<GenerationEnd>> Emit(const std::function<bool(const GeneratedToken&)>& emit);
  /// Computes the grammar mask the next OnStep will apply, so that it can run while the model
  /// step does (it reads only the grammar state, never the sequence). No-op without a grammar.
  void PrepareMask();
  /// The request follows a grammar (its masks are worth preparing during the model step).
  bool constrained() const { return matcher_.has_value(); }
  /// Whether this request's draws can be made on the slot stepper (BatchItem::sample): no logit
  /// processors (a grammar's mask goes with the draw, DrawMask).
  bool DrawsOnStepper() const;
  /// For a draw on the stepper under a grammar: the next token's mask over the model's `vocab`
  /// ids in `words` (ceil(vocab / 32); ids the grammar's vocabulary does not cover are not
  /// allowed). Prepares it now if the step has not. False when no token is allowed (Sample then
  /// reports the grammar's error: the request takes the host path).
  bool DrawMask(uint32_t* words, int32_t vocab);
  /// The next draw's parameters for BatchItem::sample: Sample's, at the same position.
  SampleParams DrawParams() const;
  /// Sample's second half, for a token drawn on the stepper with DrawParams() (and its
  /// log-probability, reported when the request asked for them): the history and the context
  /// take it, and Emit hands it out.
  Status Accept(int32_t token, float logprob = 0.0f);

 private:
  Model& model_;
  const Tokenizer* tok_;
  uint64_t stream_;
  GenerationParams params_;
  SequenceState seq_;
  std::vector<int32_t> context_;  // prompt, then every sampled token
  int step_ = 0;
  TokenHistory history_;
  TokenLogprobs logprobs_;
  std::optional<StreamDecoder> decoder_;
  std::string held_;
  size_t longest_stop_ = 0;
  std::vector<int32_t> scratch_;
  std::optional<grammar::GrammarMatcher> matcher_;
  std::vector<uint32_t> mask_;
  bool mask_ready_ = false;  // mask_ is for the matcher's current state
  // Output tokens Emit has not handled yet: the sampled one and the grammar's forced ones.
  struct Pending {
    int32_t token;
    float logprob;
  };
  std::vector<Pending> pending_;
  bool sampled_ = false;  // this step's Sample drew a token: Emit hands pending_ out
  void JumpForward();
  Result<std::optional<GenerationEnd>> EmitOne(
      const Pending& t, const std::function<bool(const GeneratedToken&)>& emit);
};

class Generator {
 public:
  /// `tokenizer` may be null: then there is no text and stop strings are rejected.
  Generator(Model& model, const Tokenizer* tokenizer) : model_(model), tok_(tokenizer) {}

  /// Validates and runs the request. `emit` receives each token; returning false stops the
  /// request (reported as cancelled). `cancel` is polled before every step.
  Result<GenerationEnd> Run(uint64_t request_id, const GenerationParams& params,
                            const std::function<bool(const GeneratedToken&)>& emit,
                            const std::atomic<bool>* cancel = nullptr);

  Status Validate(const GenerationParams& params) const;

 private:
  Model& model_;
  const Tokenizer* tok_;
};

}  // namespace deepinfer
