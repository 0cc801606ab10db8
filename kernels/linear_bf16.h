// y[r, o] = sum_i x[r, i] * W[o, i] for a bf16 weight and fp32 activations, summed in fp32: the
// decode-time product of V4's bf16 tensors (compressor, indexer head weights, router gate),
// which the reference evaluates in fp32 without quantising activations. Device pointers; `stream`
// is a cudaStream_t as void*; returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

/// rows <= 8; in a multiple of 8 and w, x 16-byte aligned (every V4 bf16 tensor is).
int Bf16Gemv(const uint16_t* w, int64_t out, int64_t in, const float* x, int rows, float* y,
             void* stream);

/// Products of one activation batch by several bf16 weights of the same width in one launch
/// (the compressors' kv and gate weights): each product's y [rows, out] is bit for bit what
/// Bf16Gemv gives for it alone. n in 1..4 (kMaxGemvProducts); conditions as Bf16Gemv.
struct Bf16GemvProduct {
  const uint16_t* w;
  int64_t out;
  float* y;
};
int Bf16GemvMulti(const Bf16GemvProduct* products, int n, int64_t in, const float* x, int rows,
                  void* stream);

}  // namespace deepinfer::kernels
