#include "engine/backend/cuda/device_dense.h"

#include <algorithm>
#include <cassert>

#include "kernels/dot_cpu_order.h"
#include "kernels/forward_glue.h"
#include "kernels/gemm_bf16.h"
#include "kernels/gemm_fp8.h"
#include "kernels/linear_bf16.h"
#include "kernels/linear_fp8.h"
#include "kernels/linear_fp8_mma.h"
#include "kernels/norm_fast.h"
#include "kernels/ops.h"

namespace deepinfer {

// y = x W^T for a dense weight. FP8 weights take the activations rounded through FP8 (the
// reference numerics): up to kGemvMaxRows rows as fp32 values in `act` for the GEMV (fp32 sums),
// above as e4m3 bytes with their scales for cuBLASLt's tensor cores (which accumulate with fewer
// bits). bf16 weights take the activations as they are: up to kGemvMaxRows rows summed in fp32
// by the GEMV, above through cuBLAS with each activation split into two bf16 terms (~16 mantissa
// bits kept; the compressors, router gate, indexer weights and LM head of a prompt chunk).
// (Rounding FP8 activations inside the GEMV instead was measured 2-3x slower: every warp redoes
// the whole row's rounding.)
// With DeviceForwardOptions::dense_mma (the default), FP8 products of 2 to kGemvMaxRows rows take
// the e4m3 bytes too, on the tensor cores: each mma's 32 products summed by the tensor core (with
// fewer bits than fp32, as in the reference's own FP8 GEMMs), the mmas' sums added in fp32
// (kernels/linear_fp8_mma.h). One row stays on the GEMV, which is as fast or faster there
// (bench/RESULTS-gpu.md), except for products of kOneRowMmaMinIn inputs or more whose input has
// no FP8 round trip yet: there the tensor cores are faster (wo_b: 12.3 against 13.6 us alone),
// and rounding the input to e4m3 bytes costs the launch the GEMV's own round trip would.
// x_fp8: x's FP8 round trip where a previous kernel already made it (else null).
constexpr int64_t kOneRowMmaMinIn = 8192;

int Dense(const StepPlan& p, const DeviceLinear& w, const float* x, int rows, float* y, void* s,
          const float* x_fp8) {
  const bool fp8 = w.format == WeightFormat::kFp8Block;
  if (!fp8 && !p.cpu_order && rows > kGemvMaxRows) {      // tensor cores, activations split in two
    assert(p.bf16 != nullptr && p.buf.split != nullptr);  // made whenever max_batch > 8
    return kernels::Bf16Gemm(*p.bf16, reinterpret_cast<const uint16_t*>(w.data), w.out, w.in, x,
                             rows, p.buf.split, y, s);
  }
  if (fp8 && !p.cpu_order && rows > kGemvMaxRows) {  // e4m3 bytes: the same rounding
    DI_CUDA_TRY(kernels::QuantizeActFp8(x, rows, w.in, p.buf.act8, p.buf.act8_scale, s));
    return kernels::Fp8BlockGemm(*p.gemm, w.data, w.scale_f32, w.out, w.in, p.buf.act8,
                                 p.buf.act8_scale, rows, y, s);
  }
  const bool mma_rows = rows > 1 || (w.in >= kOneRowMmaMinIn && x_fp8 == nullptr);
  if (fp8 && p.dense_mma && mma_rows && w.in % 128 == 0) {  // up to kGemvMaxRows, tensor cores
    DI_CUDA_TRY(kernels::QuantizeActFp8(x, rows, w.in, p.buf.act8, p.buf.act8_scale, s));
    return kernels::Fp8MmaGemv(w.data, w.scale, w.out, w.in, p.buf.act8, p.buf.act8_scale,
                               kernels::Fp8GemmPaddedRows(rows), rows, y, s);
  }
  if (fp8 && x_fp8) {
    x = x_fp8;
  } else if (fp8) {
    DI_CUDA_TRY(kernels::QdqFp8Rows(x, rows, w.in, p.buf.act, s));
    x = p.buf.act;
  }
  if (p.cpu_order) {
    const auto f = fp8 ? kernels::StoredFormat::kFp8Block128 : kernels::StoredFormat::kBf16;
    return kernels::QuantizedDotCpuOrder(f, w.data, w.scale, 0, w.out, w.in, x, w.in, rows, y,
                                         w.out, s);
  }
  for (int r = 0; r < rows; r += kGemvRows) {
    const int n = std::min(kGemvRows, rows - r);
    DI_CUDA_TRY(
        fp8 ? kernels::Fp8BlockGemv(w.data, w.scale, w.out, w.in, x + r * w.in, n, y + r * w.out, s)
            : kernels::Bf16Gemv(reinterpret_cast<const uint16_t*>(w.data), w.out, w.in,
                                x + r * w.in, n, y + r * w.out, s));
  }
  return 0;
}

// Dense of the block's normed input b.x, whose FP8 round trip HyperPreNorm left in b.xq.
int DenseOfInput(const StepPlan& p, const DeviceLinear& w, int rows, float* y, void* s) {
  return Dense(p, w, p.buf.x, rows, y, s, p.buf.xq);
}

int DenseOfInputPair(const StepPlan& p, const DeviceLinear& a, float* ya, const DeviceLinear& b,
                     float* yb, int rows, void* s) {
  const bool fp8 = a.format == WeightFormat::kFp8Block;
  const bool bf16 = a.format == WeightFormat::kBF16;
  if (p.cpu_order || rows > kGemvMaxRows || a.format != b.format || a.in != b.in ||
      !(fp8 || bf16)) {
    DI_CUDA_TRY(DenseOfInput(p, a, rows, ya, s));
    return DenseOfInput(p, b, rows, yb, s);
  }
  if (fp8 && p.dense_mma && rows > 1 && a.in % 128 == 0) {  // one rounding of the input for both
    const int64_t padded = kernels::Fp8GemmPaddedRows(rows);
    DI_CUDA_TRY(kernels::QuantizeActFp8(p.buf.x, rows, a.in, p.buf.act8, p.buf.act8_scale, s));
    DI_CUDA_TRY(kernels::Fp8MmaGemv(a.data, a.scale, a.out, a.in, p.buf.act8, p.buf.act8_scale,
                                    padded, rows, ya, s));
    return kernels::Fp8MmaGemv(b.data, b.scale, b.out, b.in, p.buf.act8, p.buf.act8_scale, padded,
                               rows, yb, s);
  }
  if (fp8) {
    const kernels::Fp8GemvProduct products[2] = {{a.data, a.scale, a.out, ya},
                                                 {b.data, b.scale, b.out, yb}};
    return kernels::Fp8BlockGemvMulti(products, 2, a.in, p.buf.xq, rows, s);
  }
  const kernels::Bf16GemvProduct products[2] = {
      {reinterpret_cast<const uint16_t*>(a.data), a.out, ya},
      {reinterpret_cast<const uint16_t*>(b.data), b.out, yb}};
  return kernels::Bf16GemvMulti(products, 2, a.in, p.buf.x, rows, s);
}

int Norm(const StepPlan& p, const float* x, const float* weight, int64_t rows, int64_t dim,
         float* y, void* s) {
  const float eps = static_cast<float>(p.cfg->rms_norm_eps);
  return p.cpu_order ? kernels::RmsNorm(x, weight, rows, dim, eps, y, s)
                     : kernels::RmsNormFast(x, weight, rows, dim, eps, y, s);
}

}  // namespace deepinfer
