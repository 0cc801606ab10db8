// The CUDA backend, stage 1: every op of the Backend interface runs as a kernel on the GPU
// (kernels/), checked against the CPU backend op by op and on whole models (tests/gpu). The
// Backend interface still passes host buffers, so each op stages its inputs to the device and
// its outputs back, and weights are uploaded once, on first use: FP8 block-scaled weights keep
// their released format for the decode GEMV (up to 8 rows, exact numerics); every other product
// sums an fp32 copy in the CPU backend's order, bit for bit. Stage 2 moves the forward's buffers
// to the device (no staging, CUDA graphs, tensor cores) — see docs/gpu.md.
#pragma once

#include <memory>

#include "engine/backend/backend.h"
#include "engine/common/status.h"

namespace deepinfer {

/// A CUDA backend on `device`; an error when this build has no CUDA or no device is usable. One
/// backend serves one model: weights (LinearWeight data, norm and mHC weights, sinks, RoPE
/// frequencies) are kept on the device by their host address, so they must outlive it unchanged.
Result<std::unique_ptr<Backend>> MakeCudaBackend(int device = 0);

}  // namespace deepinfer
