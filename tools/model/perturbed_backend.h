// deepinfer-model logits --perturb-seed: a backend whose products and attention outputs are each
// moved one float ulp up or down (a seeded coin per value) — what a different summation order on
// another device does to them — to measure how far a numerics mode carries such differences
// (docs/gpu.md, "The device forward": why production kernels diverge on test checkpoints).
#pragma once

#include <cstdint>
#include <memory>

#include "engine/backend/backend.h"

namespace deepinfer {

/// Wraps `inner` (every op forwarded; LinearRows and SparseAttention outputs perturbed).
std::unique_ptr<Backend> PerturbProducts(std::unique_ptr<Backend> inner, uint64_t seed);

}  // namespace deepinfer
