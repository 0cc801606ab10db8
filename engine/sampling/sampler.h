// Token sampling from logits: greedy, temperature, top-k, top-p and min-p, with a counter-based
// random stream so a request's draws depend only on (seed, request, position) — never on batch
// composition or thread timing.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/sample_pick.h"

namespace deepinfer {

struct SamplingConfig {
  float temperature = 1.0f;  // 0 = greedy
  float top_p = 1.0f;        // (0, 1]
  int top_k = -1;            // -1 = off
  float min_p = 0.0f;        // [0, 1]
  uint64_t seed = 0;
  // Logit processors, applied before everything above (and before logprobs are taken).
  float repetition_penalty = 1.0f;  // > 0; 1 = off (prompt and generated tokens)
  float frequency_penalty = 0.0f;   // [-2, 2], times the token's count in the output
  float presence_penalty = 0.0f;    // [-2, 2], once if the token occurred in the output
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the token's logit
};

/// The tokens a request has seen: the prompt (for the repetition penalty) and the output (for
/// all three penalties).
class TokenHistory {
 public:
  void AddPrompt(int32_t t) { Bump(t, false); }
  void AddOutput(int32_t t) { Bump(t, true); }
  /// (token, times in the output, in the prompt or output at all), in first-seen order.
  struct Entry {
    int32_t token;
    int output_count;
  };
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  void Bump(int32_t t, bool output);
  std::vector<Entry> entries_;
  std::vector<int32_t> index_;  // token -> entry + 1 (0 = unseen), grown on demand
};

/// Applies logit_bias and the penalties to `logits` in place (HF's repetition penalty: divide a
/// positive logit, multiply a negative one; OpenAI's frequency and presence penalties).
void ApplyLogitProcessors(float* logits, int32_t vocab, const SamplingConfig& cfg,
                          const TokenHistory& history);

/// log-softmax probability of `chosen`, and the `top_n` most likely tokens with theirs
/// (descending, ties by lower id), from logits after the processors and before temperature.
struct TokenLogprobs {
  float chosen = 0;
  std::vector<std::pair<int32_t, float>> top;
};
void ComputeLogprobs(const float* logits, int32_t vocab, int32_t chosen, int top_n,
                     TokenLogprobs* out);

/// A uniform double in [0, 1) from (seed, stream, position), by splitmix64 mixing.
double CounterUniform(uint64_t seed, uint64_t stream, uint64_t position);

/// Picks the next token from `logits` [vocab]: greedy, the largest logit (lowest id among
/// equals); with a top-k or top-p cut, a draw over the candidates sorted by descending logit;
/// without one, a draw over them in id order, which needs no sort (kernels/sample_pick.h,
/// WalksIdOrder). A top-p draw without top-k first tries NucleusDraw, which needs no sort
/// either. `scratch` is reused between calls.
int32_t SampleToken(const float* logits, int32_t vocab, const SamplingConfig& cfg, uint64_t stream,
                    uint64_t position, std::vector<int32_t>& scratch);
/// SampleToken's top-p draw (top_p < 1, no top-k, not greedy) made from the first 2,048
/// candidates by descending logit, which a histogram of their keys finds without sorting the
/// row, against an interval holding the sorted total: where every total in it cuts at the same
/// candidate (kernels/sample_pick.h, TopPCutWithin's rule) the sorted draw's token, bit for bit;
/// else -1 (a nucleus past those candidates, or a share on the interval's edge), and SampleToken
/// sorts. docs/gpu-sampler.md, "The host's nucleus".
int32_t NucleusDraw(const float* logits, int32_t vocab, const SamplingConfig& cfg, uint64_t stream,
                    uint64_t position);
/// The same pick with one row's SampleParams (kernels/sample_pick.h: the GPU sampler's form),
/// its stream and position included.
int32_t SampleToken(const float* logits, int32_t vocab, const SampleParams& p,
                    std::vector<int32_t>& scratch);

}  // namespace deepinfer
