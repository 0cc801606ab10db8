#include "engine/scheduler/generator.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace deepinfer {

const char* GenerationEndName(GenerationEnd r) {
  switch (r) {
    case GenerationEnd::kLength:
      return "length";
    case GenerationEnd::kStop:
      return "stop";
    case GenerationEnd::kCancelled:
      return "cancelled";
  }
  return "?";
}

Status Generator::Validate(const GenerationParams& p) const {
  const int32_t vocab = model_.config().vocab_size;
  if (p.prompt.empty()) return InvalidArgument("prompt: must not be empty");
  for (int32_t id : p.prompt) {
    if (id < 0 || id >= vocab) {
      return InvalidArgument("prompt: token id " + std::to_string(id) + " outside [0, " +
                             std::to_string(vocab) + ")");
    }
  }
  if (p.max_tokens < 1) return InvalidArgument("max_tokens: must be >= 1");
  if (!p.stop_strings.empty() && tok_ == nullptr) {
    return InvalidArgument("stop: stop strings need a tokenizer; this model has none");
  }
  for (const auto& s : p.stop_strings) {
    if (s.empty()) return InvalidArgument("stop: empty stop string");
  }
  const SamplingConfig& c = p.sampling;
  if (!(c.temperature >= 0 && c.temperature <= 2))
    return InvalidArgument("temperature: must be in [0, 2]");
  if (!(c.top_p > 0 && c.top_p <= 1)) return InvalidArgument("top_p: must be in (0, 1]");
  if (c.top_k < -1 || c.top_k == 0) return InvalidArgument("top_k: must be -1 or >= 1");
  if (!(c.min_p >= 0 && c.min_p <= 1)) return InvalidArgument("min_p: must be in [0, 1]");
  if (!(c.repetition_penalty > 0 && c.repetition_penalty <= 2)) {
    return InvalidArgument("repetition_penalty: must be in (0, 2]");
  }
  if (!(c.frequency_penalty >= -2 && c.frequency_penalty <= 2)) {
    return InvalidArgument("frequency_penalty: must be in [-2, 2]");
  }
  if (!(c.presence_penalty >= -2 && c.presence_penalty <= 2)) {
    return InvalidArgument("presence_penalty: must be in [-2, 2]");
  }
  return Status::Ok();
}

RequestState::RequestState(Model& model, const Tokenizer* tokenizer, uint64_t stream,
                           GenerationParams params)
    : model_(model),
      tok_(tokenizer),
      stream_(stream),
      params_(std::move(params)),
      seq_(model.NewSequence()),
      context_(params_.prompt) {
  for (int32_t t : params_.prompt) history_.AddPrompt(t);
  for (const auto& s : params_.stop_strings) longest_stop_ = std::max(longest_stop_, s.size());
  if (tok_ != nullptr) decoder_.emplace(*tok_);
  if (params_.grammar && params_.vocabulary) {
    matcher_.emplace(*params_.grammar, *params_.vocabulary);
    mask_.resize(params_.vocabulary->mask_words());
    JumpForward();  // a forced opening joins the prompt's prefill
  }
}

void RequestState::JumpForward() {
  if (!matcher_ || tok_ == nullptr || matcher_->IsTerminated()) return;
  std::string forced = matcher_->JumpForward();
  // Only whole characters: a token for a partial one would not decode to these bytes.
  size_t end = forced.size();
  size_t lead = end;
  while (lead > 0 && (static_cast<uint8_t>(forced[lead - 1]) & 0xC0) == 0x80) --lead;
  if (lead > 0) {
    const uint8_t b = static_cast<uint8_t>(forced[lead - 1]);
    const size_t need = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    if (end - (lead - 1) < need) end = lead - 1;
  }
  forced.resize(end);
  if (forced.empty()) return;
  const size_t limit = params_.prompt.size() + static_cast<size_t>(params_.max_tokens);
  for (int32_t id : tok_->Encode(forced, SpecialTokens::kPlainText)) {
    // The forced text's canonical tokens, as far as the grammar takes them (a token the mask
    // would not allow, e.g. one crossing into free text, is left to sampling).
    if (context_.size() >= limit || id >= model_.config().vocab_size ||
        !matcher_->AcceptToken(id)) {
      break;
    }
    history_.AddOutput(id);
    context_.push_back(id);
    pending_.push_back({id, 0.0f});
    mask_ready_ = false;
  }
}

std::span<const int32_t> RequestState::NextInput(int64_t budget, bool stop_at_block,
                                                 int64_t stop_at) {
  const size_t done = static_cast<size_t>(seq_.length);
  size_t n = std::min<size_t>(context_.size() - done, std::max<int64_t>(budget, 1));
  // With stop_at_block a chunk ends at the first 128-token boundary it reaches, so that the
  // state at every boundary exists for the prefix cache (a chunk running past one would leave
  // no snapshot there, and a request sharing just that block would recompute it). Otherwise a
  // chunk that stops short of the end still prefers to stop on a boundary.
  constexpr size_t kBlock = 128;
  if (stop_at_block) {
    const size_t next = (done / kBlock + 1) * kBlock;
    if (next < done + n) n = next - done;
  } else if (done + n < context_.size()) {
    const size_t aligned = (done + n) / kBlock * kBlock;
    if (aligned > done) n = aligned - done;
  }
  if (stop_at > static_cast<int64_t>(done) && stop_at < static_cast<int64_t>(done + n)) {
    n = static_cast<size_t>(stop_at) - done;
  }
  return std::span<const int32_t>(&context_[done], n);
}

void RequestState::PrepareMask() {
  if (!matcher_ || mask_ready_) return;
  matcher_->FillNextTokenBitmask(mask_.data());
  mask_ready_ = true;
}

Result<std::optional<GenerationEnd>> RequestState::OnStep(
    float* last, const std::function<bool(const GeneratedToken&)>& emit) {
  DI_RETURN_IF_ERROR(Sample(last));
  return Emit(emit);
}

Status RequestState::Sample(float* last) {
  const GenerationParams& p = params_;
  // Still catching up with the prompt (or a replay): nothing to sample yet.
  if (static_cast<size_t>(seq_.length) < context_.size()) return Status::Ok();
  const int32_t vocab = model_.config().vocab_size;
  ApplyLogitProcessors(last, vocab, p.sampling, history_);
  if (matcher_) {
    // Structured output: tokens the grammar does not allow cannot be sampled.
    PrepareMask();
    mask_ready_ = false;  // the token sampled below moves the grammar on
    const int32_t covered = std::min<int32_t>(vocab, params_.vocabulary->size());
    bool any = false;
    for (int32_t t = 0; t < vocab; ++t) {
      const bool allowed = t < covered && ((mask_[t >> 5] >> (t & 31)) & 1u);
      if (!allowed) last[t] = -INFINITY;
      any = any || allowed;
    }
    if (!any) return InvalidArgument("grammar: no token can continue the output");
  }
  // The draw's position is the token's place in the context, so forced tokens keep every
  // request's random stream a function of (seed, stream, position).
  const int32_t token = SampleToken(last, vocab, p.sampling, stream_,
                                    static_cast<uint64_t>(context_.size()), scratch_);
  if (p.logprobs) ComputeLogprobs(last, vocab, token, 0, &logprobs_);
  return Accept(token, logprobs_.chosen);
}

bool RequestState::DrawsOnStepper() const {
  const SamplingConfig& s = params_.sampling;
  return s.repetition_penalty == 1.0f && s.frequency_penalty == 0.0f &&
         s.presence_penalty == 0.0f && s.logit_bias.empty();
}

SampleParams RequestState::DrawParams() const {
  const SamplingConfig& s = params_.sampling;
  return {s.temperature,
          s.top_p,
          s.min_p,
          s.top_k,
          s.seed,
          stream_,
          static_cast<uint64_t>(context_.size()),
          params_.logprobs ? 1u : 0u};
}

bool RequestState::DrawMask(uint32_t* words, int32_t vocab) {
  if (!matcher_) return false;
  PrepareMask();
  const int32_t covered = std::min<int32_t>(vocab, params_.vocabulary->size());
  const int32_t n = (vocab + 31) / 32;
  bool any = false;
  for (int32_t w = 0; w < n; ++w) {
    const int32_t valid = std::clamp(covered - w * 32, 0, 32);
    const uint32_t bits = valid == 32 ? ~0u : (1u << valid) - 1;
    words[w] = valid > 0 ? mask_[w] & bits : 0u;
    any = any || words[w] != 0;
  }
  return any;
}

Status RequestState::Accept(int32_t token, float logprob) {
  if (static_cast<size_t>(seq_.length) != context_.size()) {
    return Internal("a token drawn before the model has seen the context");
  }
  if (matcher_ && !matcher_->AcceptToken(token)) {
    return Internal("grammar: the sampled token was not accepted");
  }
  mask_ready_ = false;  // the token moves the grammar on
  history_.AddOutput(token);
  context_.push_back(token);
  pending_.push_back({token, params_.logprobs ? logprob : 0.0f});
  sampled_ = true;
  JumpForward();
  return Status::Ok();
}

Result<std::optional<GenerationEnd>> RequestState::Emit(
    const std::function<bool(const GeneratedToken&)>& emit) {
  // Forced tokens before the first sample wait for it, so the output starts in order.
  if (!sampled_) return std::optional<GenerationEnd>();
  sampled_ = false;
  for (size_t i = 0; i < pending_.size(); ++i) {
    DI_ASSIGN_OR_RETURN(std::optional<GenerationEnd> end, EmitOne(pending_[i], emit));
    if (end) {
      pending_.clear();
      return end;
    }
  }
  pending_.clear();
  return std::optional<GenerationEnd>();
}

Result<std::optional<GenerationEnd>> RequestState::EmitOne(
    const Pending& pending, const std::function<bool(const GeneratedToken&)>& emit) {
  const GenerationParams& p = params_;
  const int32_t eos = model_.config().eos_token_id;
  const int32_t token = pending.token;
  // The grammar ended with the last pending token (the sampled EOS), not with the forced ones
  // queued before it.
  const bool grammar_done = matcher_ && matcher_->IsTerminated() && &pending == &pending_.back();
  const bool stop_id = grammar_done || (!p.ignore_eos && token == eos) ||
                       std::find(p.stop_ids.begin(), p.stop_ids.end(), token) != p.stop_ids.end();
  const bool final_token = stop_id || step_ + 1 == p.max_tokens;
  GeneratedToken out{token, "", pending.logprob};
  if (decoder_) {
    std::string piece;
    // Model vocabularies are padded past the tokenizer's ids; those rows decode to nothing.
    // The stop token itself (EOS, a stop id) adds no text.
    if (token < tok_->vocab_size() && !stop_id) DI_RETURN_IF_ERROR(decoder_->Push(token, &piece));
    if (final_token) decoder_->Finish(&piece);
    held_ += piece;
    // A stop string ends the text right before it; a suffix that could still grow into one is
    // held back.
    size_t cut = std::string::npos;
    for (const auto& s : p.stop_strings) cut = std::min(cut, held_.find(s));
    if (cut != std::string::npos) {
      out.text = held_.substr(0, cut);
      if (!emit(out)) return std::optional<GenerationEnd>(GenerationEnd::kCancelled);
      return std::optional<GenerationEnd>(GenerationEnd::kStop);
    }
    size_t keep = 0;
    for (size_t k = std::min(longest_stop_ - (longest_stop_ > 0), held_.size());
         k > 0 && !final_token; --k) {
      bool prefix = false;
      for (const auto& s : p.stop_strings) {
        prefix = prefix || s.compare(0, k, held_, held_.size() - k, k) == 0;
      }
      if (prefix) {
        keep = k;
        break;
      }
    }
    out.text = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
  }
  ++step_;
  if (!emit(out)) return std::optional<GenerationEnd>(GenerationEnd::kCancelled);
  if (stop_id) return std::optional<GenerationEnd>(GenerationEnd::kStop);
  if (step_ == p.max_tokens) return std::optional<GenerationEnd>(GenerationEnd::kLength);
  return std::optional<GenerationEnd>();
}

Result<GenerationEnd> Generator::Run(uint64_t request_id, const GenerationParams& p,
                                     const std::function<bool(const GeneratedToken&)>& emit,
                                     const std::atomic<bool>* cancel) {
  DI_RETURN_IF_ERROR(Validate(p));
  RequestState state(model_, tok_, request_id, p);
  std::vector<float> logits(model_.config().vocab_size);
  for (;;) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed))
      return GenerationEnd::kCancelled;
    BatchItem item{&state.seq(), state.NextInput(model_.max_chunk()), logits.data(), nullptr, true};
    DI_RETURN_IF_ERROR(model_.ForwardBatch(std::span<BatchItem>(&item, 1)));
    DI_ASSIGN_OR_RETURN(std::optional<GenerationEnd> end, state.OnStep(logits.data(), emit));
    if (end) return *end;
  }
}

}  // namespace deepinfer
