// Tensor-core GEMM for the released dense FP8 weights: y[r, o] = sum_i xq[r, i] * W[o, i], where W
// is e4m3 with 128x128 block scales and xq is the activation rounded to e4m3 in 1x128 blocks with
// power-of-two scales (QuantizeActFp8, bit for bit what engine/model/quant.cc's
// QdqFp8Blocks(row, in, 128, 1e-4f) produces). It runs cuBLASLt's block-scaled FP8 matmul on Hopper
// (sm_90); kernels/gemm_fp8.cc spells out what cuBLASLt requires and where that is documented.
//
// Plain C++: pointers are device pointers, `stream` is a cudaStream_t passed as void*, and every
// function returns 0 on success, a CUDA error code (> 0, < 1000), kFp8GemmCublasError + the
// cublasStatus_t, or one of the negative codes below.
//
// Buffer layouts (all fp32 scales; every pointer 16-byte aligned):
//   W        [out, in] e4m3 bytes, row-major (the checkpoint's layout).
//   w_scale  [ceil(out/128), Fp8WeightScaleLd(in)] row-major: the checkpoint's [ceil(out/128),
//            ceil(in/128)] scales with each row padded to a multiple of 4 entries (zeros);
//            Fp8WeightScalesToF32 builds it from the e8m0 bytes once at load.
//   xq       [Fp8GemmPaddedRows(rows), in] e4m3 bytes, row-major; rows past `rows` are zero.
//   x_scale  [ceil(in/128), Fp8GemmPaddedRows(rows)]: x_scale[b * padded_rows + r] scales
//            xq[r, 128 b .. 128 b + 127] (row index contiguous: cuBLASLt's "N-major" layout).
//   y        [Fp8GemmPaddedRows(rows), out] fp32, row-major; rows past `rows` come out as 0.
// Constraints: out % 4 == 0, in % 16 == 0, rows >= 1 (any value: the caller sizes xq, x_scale and
// y for the padded row count and QuantizeActFp8 fills the padding).
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer::kernels {

/// Activation rows are padded to a multiple of this (cuBLASLt needs N % 4 == 0 for 1x128 scales).
inline constexpr int64_t kFp8GemmRowAlign = 16;

inline constexpr int kFp8GemmBadArgument = -1;    // shape, alignment or null pointer
inline constexpr int kFp8GemmNoContext = -2;      // context not created, or another device current
inline constexpr int kFp8GemmUnsupported = -3;    // cuBLASLt offers no algorithm for the problem
inline constexpr int kFp8GemmCublasError = 1000;  // + cublasStatus_t

/// Number of 128-wide blocks covering n values.
constexpr int64_t Fp8Blocks128(int64_t n) { return (n + 127) / 128; }
/// Rows of xq, x_scale and y for `rows` activation rows.
constexpr int64_t Fp8GemmPaddedRows(int64_t rows) {
  return (rows + kFp8GemmRowAlign - 1) / kFp8GemmRowAlign * kFp8GemmRowAlign;
}
/// Row stride (in floats) of w_scale: ceil(in/128) rounded up to a multiple of 4.
constexpr int64_t Fp8WeightScaleLd(int64_t in) { return (Fp8Blocks128(in) + 3) / 4 * 4; }
/// Floats in w_scale.
constexpr int64_t Fp8WeightScaleCount(int64_t out, int64_t in) {
  return Fp8Blocks128(out) * Fp8WeightScaleLd(in);
}
/// Floats in x_scale.
constexpr int64_t Fp8ActScaleCount(int64_t rows, int64_t in) {
  return Fp8Blocks128(in) * Fp8GemmPaddedRows(rows);
}

/// dst[i] = 2^(e8m0[i] - 127) for i < n; byte 0xFF gives NaN (engine/model/quant.h's E8M0ToF32).
int E8m0ToF32(const uint8_t* e8m0, int64_t n, float* dst, void* stream);

/// The checkpoint's e8m0 weight scales ([ceil(out/128), ceil(in/128)] bytes, row-major) as the
/// fp32 w_scale tensor Fp8BlockGemm reads (Fp8WeightScaleCount(out, in) floats; see above).
int Fp8WeightScalesToF32(const uint8_t* e8m0, int64_t out, int64_t in, float* w_scale,
                         void* stream);

/// Rounds x [rows, in] (fp32, row-major) to e4m3 in blocks of 128 along `in` with a power-of-two
/// scale per block, exactly as QdqFp8Blocks(row, in, 128, 1e-4f): scale 2^e with
/// e = ceil(log2(max(amax, 1e-4) / 448)), xq = e4m3(clamp(x / 2^e, -448, 448)) (round to nearest
/// even), so xq * 2^e is the CPU's QDQ value bit for bit. Writes Fp8GemmPaddedRows(rows) rows of xq
/// and x_scale (padding rows: zero bytes, scale 1). Needs in % 16 == 0 and xq 16-byte aligned.
int QuantizeActFp8(const float* x, int64_t rows, int64_t in, uint8_t* xq, float* x_scale,
                   void* stream);

/// Per-device cuBLASLt state: the handle, a preallocated workspace and a small cache of matmul
/// plans (descriptors + chosen algorithm) keyed by shape and pointer alignment. Create it once per
/// device, with that device current; not thread-safe (one context per thread).
class Fp8GemmContext {
 public:
  /// cuBLAS recommends 32 MiB of workspace on Hopper.
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;

  Fp8GemmContext() = default;
  ~Fp8GemmContext();
  Fp8GemmContext(const Fp8GemmContext&) = delete;
  Fp8GemmContext& operator=(const Fp8GemmContext&) = delete;

  /// Creates the cuBLASLt handle and the workspace on the current device; 0 on success.
  int Create(size_t workspace_bytes = kDefaultWorkspaceBytes);
  /// Releases everything (also done by the destructor); the context can be created again.
  void Destroy();
  bool created() const { return impl_ != nullptr; }

  struct Impl;

 private:
  friend int Fp8BlockGemm(Fp8GemmContext&, const uint8_t*, const float*, int64_t, int64_t,
                          const uint8_t*, const float*, int64_t, float*, void*);
  Impl* impl_ = nullptr;
};

/// y = xq * W^T with both block scales applied, fp32 out (layouts and constraints at the top).
/// Enqueues one cuBLASLt matmul on `stream`; allocates nothing once the shape's plan is cached
/// (the first call per shape asks cuBLASLt's heuristic, host side only).
int Fp8BlockGemm(Fp8GemmContext& ctx, const uint8_t* w, const float* w_scale, int64_t out,
                 int64_t in, const uint8_t* xq, const float* x_scale, int64_t rows, float* y,
                 void* stream);

}  // namespace deepinfer::kernels
