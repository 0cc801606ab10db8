// The host sampler at V4's vocabulary (129,280 ids): one pick (engine/sampling/sampler.h,
// SampleToken) for greedy, temperature 0.7 with top-p 0.95 and temperature 1.0, and the chosen
// token's log-probability (ComputeLogprobs, the full log-softmax a request pays for with
// `logprobs`), in ms per token on one core, over normally distributed logits of standard
// deviation --logit-sd (1 and 2: flat rows, whose top-p nucleus holds thousands of ids and goes
// to the sort; 3 and 8: rows whose nucleus the sampler finds among its first candidates without
// a sort; docs/gpu-sampler.md, "The host's nucleus").
//   bench_sampler [--reps N] [--logit-sd 3]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "engine/sampling/sampler.h"

int main(int argc, char** argv) {
  using deepinfer::SamplingConfig;
  int reps = 50;
  float sd = 3.0f;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--logit-sd") == 0 && i + 1 < argc) {
      sd = std::strtof(argv[++i], nullptr);
    } else {
      std::fprintf(stderr, "usage: bench_sampler [--reps N] [--logit-sd 3]\n");
      return 2;
    }
  }
  if (reps < 1 || !(sd > 0.0f)) return 2;
  constexpr int32_t kVocab = 129280;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, sd);
  std::vector<float> logits(kVocab);
  for (float& v : logits) v = normal(rng);
  std::vector<int32_t> order;
  deepinfer::TokenLogprobs lp;
  using Clock = std::chrono::steady_clock;
  const auto ms = [&](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count() / reps;
  };
  long long checksum = 0;
  for (const float temperature : {0.0f, 0.7f, 1.0f}) {
    SamplingConfig cfg;
    cfg.temperature = temperature;
    cfg.top_p = temperature == 0.7f ? 0.95f : 1.0f;
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < reps; ++i) {
      checksum += deepinfer::SampleToken(logits.data(), kVocab, cfg, 1, i, order);
    }
    const Clock::time_point t1 = Clock::now();
    for (int i = 0; i < reps; ++i) deepinfer::ComputeLogprobs(logits.data(), kVocab, i, 0, &lp);
    const Clock::time_point t2 = Clock::now();
    std::printf(
        "{\"vocab\": %d, \"logit_sd\": %.1f, \"temperature\": %.1f, \"top_p\": %.2f, "
        "\"pick_ms\": %.3f, \"logprob_ms\": %.3f}\n",
        kVocab, sd, temperature, cfg.top_p, ms(t0, t1), ms(t1, t2));
  }
  return checksum == 0 ? 1 : 0;  // keeps the picks from being optimised away
}
