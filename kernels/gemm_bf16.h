// y = x W^T for a bf16 weight and fp32 activations on tensor cores, for the bf16 tensors the
// reference evaluates in fp32 (compressor, indexer head weights, router gate) at prefill and large
// decode batches. Each activation is split into two bf16 terms, x = hi + lo (hi = x rounded to
// bf16, lo = the remainder rounded), and y = hi W^T + lo W^T through cuBLAS with fp32
// accumulation: the activation keeps ~16 of fp32's 24 mantissa bits (relative error ~2^-17 per
// product) where a plain bf16 GEMM keeps 8. Device pointers; `stream` is a cudaStream_t as void*.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer::kernels {

/// A cuBLAS handle bound to one device and stream use; create once per device and thread.
class Bf16GemmContext {
 public:
  Bf16GemmContext() = default;
  ~Bf16GemmContext();
  Bf16GemmContext(const Bf16GemmContext&) = delete;
  Bf16GemmContext& operator=(const Bf16GemmContext&) = delete;
  /// Creates the handle and a workspace of `workspace_bytes` on the current device; 0 on success.
  int Create(size_t workspace_bytes = size_t{32} << 20);

 private:
  friend int Bf16Gemm(Bf16GemmContext&, const uint16_t*, int64_t, int64_t, const float*, int64_t,
                      uint16_t*, float*, void*);
  void* handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

/// y[rows, out] = x[rows, in] * W[out, in]^T. `split` is scratch of 2 * rows * in bf16 values.
/// in % 8 == 0; pointers 16-byte aligned. Returns 0, a CUDA error code, or 1000 + cublasStatus_t.
int Bf16Gemm(Bf16GemmContext& ctx, const uint16_t* w, int64_t out, int64_t in, const float* x,
             int64_t rows, uint16_t* split, float* y, void* stream);

}  // namespace deepinfer::kernels
