#include "engine/scheduler/generator.h"

#include <algorithm>
#include <optional>

namespace deepinfer {

const char* GenerationEndName(GenerationEnd r) {
  switch (r) {
    case GenerationEnd::kLength: return "length";
    case GenerationEnd::kStop: return "stop";
    case GenerationEnd::kCancelled: return "cancelled";
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
  if (!(c.temperature >= 0 && c.temperature <= 2)) return InvalidArgument("temperature: must be in [0, 2]");
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

Result<GenerationEnd> Generator::Run(uint64_t request_id, const GenerationParams& p,
                                    const std::function<bool(const GeneratedToken&)>& emit,
                                    const std::atomic<bool>* cancel) {
  DI_RETURN_IF_ERROR(Validate(p));
  const int32_t vocab = model_.config().vocab_size;
  const int32_t eos = model_.config().eos_token_id;
  SequenceState seq = model_.NewSequence();
  std::vector<float> logits(p.prompt.size() * static_cast<size_t>(vocab));
  DI_RETURN_IF_ERROR(model_.Forward(seq, p.prompt, logits.data(), nullptr));
  float* last = &logits[(p.prompt.size() - 1) * static_cast<size_t>(vocab)];
  TokenHistory history;
  for (int32_t t : p.prompt) history.AddPrompt(t);
  TokenLogprobs logprobs;

  size_t longest_stop = 0;
  for (const auto& s : p.stop_strings) longest_stop = std::max(longest_stop, s.size());
  std::optional<StreamDecoder> decoder;
  if (tok_ != nullptr) decoder.emplace(*tok_);
  std::string held;  // decoded text not yet emitted: it may begin a stop string
  std::vector<int32_t> scratch;
  for (int step = 0; step < p.max_tokens; ++step) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return GenerationEnd::kCancelled;
    ApplyLogitProcessors(last, vocab, p.sampling, history);
    const int32_t token = SampleToken(last, vocab, p.sampling, request_id,
                                      static_cast<uint64_t>(p.prompt.size() + step), scratch);
    ComputeLogprobs(last, vocab, token, 0, &logprobs);
    history.AddOutput(token);
    const bool stop_id = (!p.ignore_eos && token == eos) ||
                         std::find(p.stop_ids.begin(), p.stop_ids.end(), token) != p.stop_ids.end();
    GeneratedToken out{token, "", logprobs.chosen};
    if (decoder) {
      std::string piece;
      // Model vocabularies are padded past the tokenizer's ids; those rows decode to nothing.
      if (token < tok_->vocab_size()) DI_RETURN_IF_ERROR(decoder->Push(token, &piece));
      if (stop_id || step + 1 == p.max_tokens) decoder->Finish(&piece);
      held += piece;
      // A stop string ends the text right before it; a suffix that could still grow into one
      // is held back.
      size_t cut = std::string::npos;
      for (const auto& s : p.stop_strings) cut = std::min(cut, held.find(s));
      if (cut != std::string::npos) {
        out.text = held.substr(0, cut);
        if (!emit(out)) return GenerationEnd::kCancelled;
        return GenerationEnd::kStop;
      }
      size_t keep = 0;
      for (size_t k = std::min(longest_stop - (longest_stop > 0), held.size()); k > 0; --k) {
        bool prefix = false;
        for (const auto& s : p.stop_strings) prefix = prefix || s.compare(0, k, held, held.size() - k, k) == 0;
        if (prefix) {
          keep = k;
          break;
        }
      }
      const bool final_token = stop_id || step + 1 == p.max_tokens;
      if (final_token) keep = 0;
      out.text = held.substr(0, held.size() - keep);
      held.erase(0, held.size() - keep);
    }
    if (!emit(out)) return GenerationEnd::kCancelled;
    if (stop_id) return GenerationEnd::kStop;
    if (step + 1 == p.max_tokens) break;
    DI_RETURN_IF_ERROR(model_.Forward(seq, std::span<const int32_t>(&token, 1), logits.data(), nullptr));
    last = logits.data();
  }
  return GenerationEnd::kLength;
}

}  // namespace deepinfer
