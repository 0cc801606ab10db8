// The routed experts of the benchmarked decode step or prefill chunk (bench/decode_step.cu), by
// the kernels StepKernels::experts picks: exact integer sums at one token, the CUDA-core GEMV on
// fp32 activations, or FP8 activations on the tensor cores (mma.sync windows or the folded wgmma
// GEMM).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "bench/decode_layer.h"
#include "kernels/expert_fp4.h"

namespace deepinfer::bench {

/// The step's expert groups and buffers (device pointers), as DecodeStepOps allocates them.
struct RoutedExpertsStep {
  int batch = 0;
  int64_t pairs = 0;       // token-expert pairs
  bool cuda_core = false;  // the CUDA-core kernels (else the tensor cores)
  bool cpu_order = false;  // StepKernels::cpu_order
  ExpertKernels kind = ExpertKernels::kAuto;
  int max_rows = 1;  // the CUDA-core GEMV's group bound
  int window = 1;    // ExpertMmaWindow for the mma.sync kernel
  const kernels::ExpertGroup* up = nullptr;
  const kernels::ExpertGroup* down = nullptr;
  int n_groups = 0;  // the groups' capacity (the live count is on the device)
  const int32_t* n_live = nullptr;
  const float* xn = nullptr;  // the normed input [batch, hidden]
  uint8_t* xq = nullptr;      // its FP8 form, padded rows xq_rows
  float* xs = nullptr;
  int64_t xq_rows = 0;
  float *gate = nullptr, *upv = nullptr, *act = nullptr, *out = nullptr;  // per pair
  uint8_t* act_q = nullptr;  // the pairs' activations in FP8, padded rows pairs_padded
  float* act_s = nullptr;
  int64_t pairs_padded = 0;
  uint8_t* limbs = nullptr;  // one-token steps: integer limbs of the row, then of its pairs
  float* limb_scales = nullptr;
};

/// Takes the per-pair buffers (gate .. limb_scales) for `pairs` token-expert pairs from the arena
/// and sets e->pairs; false when the arena is full.
bool TakeRoutedExpertBuffers(DeviceArena& a, int64_t pairs, RoutedExpertsStep* e);

/// Launches the step's routed experts of layer copy `l` on `s`; the CUDA error code.
int LaunchRoutedExperts(const RoutedExpertsStep& e, const LayerWeights& l, cudaStream_t s);

}  // namespace deepinfer::bench
