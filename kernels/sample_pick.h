// The part of token sampling the CPU sampler (engine/sampling/sampler.cc) and the GPU sampler
// (kernels/sampling.cu) share, written once so their picks agree: the counter-based draw and the
// walk over the candidates' probabilities (min-p, top-p, then the draw).
#pragma once

#include <cstdint>

#include "kernels/exact_math.h"  // DI_HOST_DEVICE

namespace deepinfer {

/// One row's sampling parameters, for a draw made from its logits after the logit processors
/// (penalties, biases) have been applied: SamplingConfig's sampling part (engine/sampling/
/// sampler.h) and the counter of the draw (seed, the request's stream, the token's position).
struct SampleParams {
  float temperature = 1.0f;  // <= 0: greedy
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1]
  int32_t top_k = -1;        // <= 0: off
  uint64_t seed = 0, stream = 0, position = 0;
  // Nonzero: the draw also reports the chosen token's log-probability among the (masked)
  // logits, before temperature (engine/sampling/sampler.h's ComputeLogprobs).
  uint32_t logprob = 0;
};

/// Greedy decoding: the largest logit, lowest id among equals.
DI_HOST_DEVICE inline bool IsGreedy(float temperature, int32_t top_k) {
  return temperature <= 0.0f || top_k == 1;
}

/// How many of the sorted candidates sampling considers.
DI_HOST_DEVICE inline int32_t CandidateCount(int32_t top_k, int32_t vocab) {
  return top_k > 0 && top_k < vocab ? top_k : vocab;
}

/// splitmix64's finaliser.
DI_HOST_DEVICE inline uint64_t SplitMix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A uniform double in [0, 1) from (seed, stream, position).
DI_HOST_DEVICE inline double CounterDraw(uint64_t seed, uint64_t stream, uint64_t position) {
  const uint64_t bits = SplitMix(SplitMix(SplitMix(seed) ^ stream) ^ position);
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

/// The index of the candidate drawn from p[0 .. n) (unnormalised probabilities, most likely
/// first; sum = p[0] + p[1] + ... added in that order, which the caller forms while it computes
/// them): drop those below min_p times the first, keep the smallest prefix whose mass reaches
/// top_p, then walk the prefix to the draw u in [0, 1) — every sum in this one sequence.
DI_HOST_DEVICE inline int32_t PickCandidate(const double* p, int32_t n, double sum, float min_p,
                                            float top_p, double u) {
  int32_t keep = n;
  if (min_p > 0) {
    while (keep > 1 && p[keep - 1] < min_p * p[0]) sum -= p[--keep];
  }
  if (top_p < 1.0f) {
    double acc = 0;
    for (int32_t i = 0; i < keep; ++i) {
      acc += p[i];
      if (acc >= top_p * sum) {
        keep = i + 1;
        sum = acc;
        break;
      }
    }
  }
  const double target = u * sum;
  double acc = 0;
  for (int32_t i = 0; i < keep; ++i) {
    acc += p[i];
    if (target < acc) return i;
  }
  return keep - 1;
}

}  // namespace deepinfer
