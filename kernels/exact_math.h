// Arithmetic the CPU backend and the CUDA kernels share bit for bit. The reference numerics round
// activations and cache rows through FP8 (3 mantissa bits), where a last-bit difference before
// the rounding moves a value a whole FP8 step; so every sum the two backends both compute is
// written once, here, in one order, with every product and sum rounded on its own (the kernels
// that include this are compiled without FMA contraction, and the host build has none).
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define DI_HOST_DEVICE __host__ __device__
#else
#define DI_HOST_DEVICE
#endif

namespace deepinfer {

/// exp in double, rounded once to float. glibc's expf and CUDA's expf differ in the last bit;
/// both libraries' double exp are accurate to far below a float ulp, so this agrees on both
/// sides except where the exact value lies within ~2^-52 of a float rounding boundary.
DI_HOST_DEVICE inline float ExpF(float x) {
#ifdef __CUDA_ARCH__
  return static_cast<float>(::exp(static_cast<double>(x)));
#else
  return static_cast<float>(std::exp(static_cast<double>(x)));
#endif
}

DI_HOST_DEVICE inline float SigmoidF(float x) { return 1.0f / (1.0f + ExpF(-x)); }

/// V4's clamped SwiGLU of one gate and up value: silu(min(g, limit)) * clamp(u, -limit, limit);
/// limit <= 0 disables clamping. (fminf/fmaxf and std::min/std::clamp agree on non-NaN values.)
DI_HOST_DEVICE inline float SwiGluF(float g, float u, float limit) {
  if (limit > 0) {
    g = g < limit ? g : limit;
    u = u < -limit ? -limit : (u > limit ? limit : u);
  }
  return g / (1.0f + ExpF(-g)) * u;
}

/// log1p in double, rounded once to float (glibc's log1pf and CUDA's differ; see ExpF).
DI_HOST_DEVICE inline float Log1pF(float x) {
#ifdef __CUDA_ARCH__
  return static_cast<float>(::log1p(static_cast<double>(x)));
#else
  return static_cast<float>(std::log1p(static_cast<double>(x)));
#endif
}

/// The MoE router's sqrt(softplus(logit)), softplus linear above 20 as in PyTorch. sqrt is
/// correctly rounded on both sides (nvcc's default -prec-sqrt=true).
DI_HOST_DEVICE inline float SqrtSoftplusF(float logit) {
  const float sp = logit > 20.0f ? logit : Log1pF(ExpF(logit));
#ifdef __CUDA_ARCH__
  return ::sqrtf(sp);
#else
  return std::sqrt(sp);
#endif
}

/// The pairwise combination of OrderedDot's eight partial sums (kernels that run the eight lanes
/// on eight threads finish with it too).
DI_HOST_DEVICE inline float CombineLanes(const float* acc) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// The dot product both backends use: eight running partial sums over i % 8 (so the host loop
/// vectorises without reassociation flags), combined pairwise, then the tail.
DI_HOST_DEVICE inline float OrderedDot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  float s = CombineLanes(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace deepinfer
