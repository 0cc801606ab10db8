#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace deepinfer {
namespace {

uint64_t Mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int32_t Argmax(const float* logits, int32_t vocab) {
  return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
}

}  // namespace

void TokenHistory::Bump(int32_t t, bool output) {
  if (t < 0) return;
  if (static_cast<size_t>(t) >= index_.size()) index_.resize(t + 1, 0);
  if (index_[t] == 0) {
    entries_.push_back({t, 0});
    index_[t] = static_cast<int32_t>(entries_.size());
  }
  if (output) entries_[index_[t] - 1].output_count++;
}

void ApplyLogitProcessors(float* logits, int32_t vocab, const SamplingConfig& cfg,
                          const TokenHistory& history) {
  for (const auto& [token, bias] : cfg.logit_bias) {
    if (token >= 0 && token < vocab) logits[token] += bias;
  }
  const bool repetition = cfg.repetition_penalty != 1.0f;
  if (!repetition && cfg.frequency_penalty == 0 && cfg.presence_penalty == 0) return;
  for (const auto& e : history.entries()) {
    if (e.token >= vocab) continue;
    float& l = logits[e.token];
    if (repetition) l = l > 0 ? l / cfg.repetition_penalty : l * cfg.repetition_penalty;
    if (e.output_count > 0) {
      l -= cfg.frequency_penalty * static_cast<float>(e.output_count) + cfg.presence_penalty;
    }
  }
}

void ComputeLogprobs(const float* logits, int32_t vocab, int32_t chosen, int top_n,
                     TokenLogprobs* out) {
  const float mx = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double log_z = mx + std::log(sum);
  out->chosen = static_cast<float>(logits[chosen] - log_z);
  out->top.clear();
  if (top_n <= 0) return;
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  const int n = std::min(top_n, vocab);
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [logits](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int i = 0; i < n; ++i)
    out->top.emplace_back(order[i], static_cast<float>(logits[order[i]] - log_z));
}

double CounterUniform(uint64_t seed, uint64_t stream, uint64_t position) {
  const uint64_t bits = Mix(Mix(Mix(seed) ^ stream) ^ position);
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

int32_t SampleToken(const float* logits, int32_t vocab, const SamplingConfig& cfg, uint64_t stream,
                    uint64_t position, std::vector<int32_t>& order) {
  if (cfg.temperature <= 0.0f || cfg.top_k == 1) return Argmax(logits, vocab);
  // Candidates by descending logit; ties by lower id, so the order is fully determined.
  order.resize(vocab);
  std::iota(order.begin(), order.end(), 0);
  int32_t n = vocab;
  if (cfg.top_k > 0 && cfg.top_k < vocab) n = cfg.top_k;
  auto by_logit = [logits](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + n, order.end(), by_logit);
  const double inv_t = 1.0 / cfg.temperature;
  const double top = logits[order[0]];
  std::vector<double> p(n);
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += (p[i] = std::exp((logits[order[i]] - top) * inv_t));
  // min-p: drop candidates below min_p times the most likely one.
  int32_t keep = n;
  if (cfg.min_p > 0) {
    while (keep > 1 && p[keep - 1] < cfg.min_p * p[0]) sum -= p[--keep];
  }
  // top-p: the smallest prefix whose mass reaches top_p.
  if (cfg.top_p < 1.0f) {
    double acc = 0;
    for (int32_t i = 0; i < keep; ++i) {
      acc += p[i];
      if (acc >= cfg.top_p * sum) {
        keep = i + 1;
        sum = acc;
        break;
      }
    }
  }
  const double u = CounterUniform(cfg.seed, stream, position) * sum;
  double acc = 0;
  for (int32_t i = 0; i < keep; ++i) {
    acc += p[i];
    if (u < acc) return order[i];
  }
  return order[keep - 1];
}

}  // namespace deepinfer
