// Token sampling from logits: greedy, temperature, top-k, top-p and min-p, with a counter-based
// random stream so a request's draws depend only on (seed, request, position) — never on batch
// composition or thread timing.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer {

struct SamplingConfig {
  float temperature = 1.0f;  // 0 = greedy
  float top_p = 1.0f;        // (0, 1]
  int top_k = -1;            // -1 = off
  float min_p = 0.0f;        // [0, 1]
  uint64_t seed = 0;
};

/// A uniform double in [0, 1) from (seed, stream, position), by splitmix64 mixing.
double CounterUniform(uint64_t seed, uint64_t stream, uint64_t position);

/// Picks the next token from `logits` [vocab]. `scratch` is reused between calls.
int32_t SampleToken(const float* logits, int32_t vocab, const SamplingConfig& cfg,
                    uint64_t stream, uint64_t position, std::vector<int32_t>& scratch);

}  // namespace deepinfer
