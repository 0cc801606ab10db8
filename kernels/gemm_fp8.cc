// Fp8BlockGemm: cuBLASLt's block-scaled FP8 matmul (Hopper) for the released dense weights.
//
// What cuBLASLt requires, from the cuBLAS documentation (CUDA 13.x, cuBLASLt API, section 3.1.4
// "Narrow Precision Data Types Usage",
// https://docs.nvidia.com/cuda/cublas/#narrow-precision-data-types-usage, its subsection
// "128-element 1D and 128x128 2D Block Scaling For FP8 Data Types",
// https://docs.nvidia.com/cuda/cublas/#element-1d-and-128x128-2d-block-scaling-for-fp8-data-types
// with "Scaling factors layouts", https://docs.nvidia.com/cuda/cublas/#scaling-factors-layouts,
// and the FP8 requirements under https://docs.nvidia.com/cuda/cublas/#cublasltmatmul), in my words:
//
// - Both modes are Hopper-only (compute capability 9.0 in the "Scaling Mode Support Overview"
//   table; Blackwell uses the MX modes instead), need cuBLAS 12.9 or later (NVIDIA's answer in
//   https://github.com/NVIDIA/CUDALibrarySamples/issues/310), FP8 A and B, and fp32 scales.
//   They are enabled per operand with CUBLASLT_MATMUL_DESC_A_SCALE_MODE / _B_SCALE_MODE (int32)
//   set to CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F (one fp32 per 128 consecutive K values, i.e.
//   1x128) or CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F (one per 128x128 tile); the scale
//   tensors go in CUBLASLT_MATMUL_DESC_A_SCALE_POINTER / _B_SCALE_POINTER (device pointers). The
//   other scale modes stay at their defaults.
// - Allowed A/B combinations: VEC128 x VEC128, VEC128 x BLK128x128 and BLK128x128 x VEC128; not
//   BLK x BLK. So the weight takes BLK128x128 and the activation VEC128.
// - D may be CUDA_R_16F, CUDA_R_16BF or CUDA_R_32F (never FP8 with these modes; footnote 8 of the
//   FP8 type table). For fp32 D the table pairs it with C = CUDA_R_32F. We output fp32.
// - FP8 on Hopper wants the "TN" format: A transposed, B not. Compute type CUBLAS_COMPUTE_32F,
//   scale type CUDA_R_32F. Pointers 16-byte aligned and dimensions meeting the tensor-core
//   alignment rules (leading dimensions * element size multiples of 16 bytes).
// - Scale layouts, with L = ceil(K / 128) and L4 = L rounded up to a multiple of 4; the scale
//   tensors' start addresses must be 16-byte aligned and M and N must be multiples of 4:
//     VEC128:      A's scales are M x L, "M-major" (M index contiguous, so element (m, l) sits at
//                  l * M + m); B's are N x L, N-major (element (n, l) at l * N + n).
//     BLK128x128:  K-major, shape L4 x ceil(M/128) for A (L4 x ceil(N/128) for B): element
//                  (l, p) at p * L4 + l; the stride between columns must be a multiple of 4.
//   Partial blocks are defined (L and the tile count use ceil), so M and K need not be multiples
//   of 128. PyTorch's checks for the same two modes agree (aten/src/ATen/native/cuda/
//   ScaledBlas.cpp; pytorch/pytorch#166752 "Fix DeepSeek scaling tensor handling" adds the L4).
// - Fast accumulation must stay off (PyTorch rejects it for both block modes).
//
// Our mapping (cuBLASLt is column-major): y [rows, out] row-major is D = M x N column-major with
// M = out, N = padded rows, ldd = out. A = W: W [out, in] row-major is a K x M column-major matrix
// (ld = in), used transposed (op(A) = M x K). B = xq: [rows, in] row-major is K x N column-major
// (ld = in), not transposed. Hence: out % 4 == 0 (M, and D's 16-byte leading dimension), in % 16
// == 0 (A's and B's leading dimension), N a multiple of 4 (we pad to kFp8GemmRowAlign = 16); the
// weight's scales are the checkpoint's [ceil(out/128), ceil(in/128)] row-major grid with rows
// padded to L4; the activation scales are [L, N] with the row index contiguous.
#include "kernels/gemm_fp8.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>

namespace deepinfer::kernels {
namespace {

constexpr size_t kMaxPlans = 32;

struct Plan {
  bool used = false;
  int64_t out = 0, in = 0, n = 0;
  uint32_t align_w = 0, align_x = 0, align_y = 0;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo = {};
};

void Release(Plan& p) {
  if (p.d != nullptr) cublasLtMatrixLayoutDestroy(p.d);
  if (p.b != nullptr) cublasLtMatrixLayoutDestroy(p.b);
  if (p.a != nullptr) cublasLtMatrixLayoutDestroy(p.a);
  if (p.desc != nullptr) cublasLtMatmulDescDestroy(p.desc);
  p = Plan{};
}

// Largest power of two (up to 256, cuBLASLt's default assumption) dividing the address.
uint32_t Alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t low = a & (~a + 1);
  return low == 0 || low > 256 ? 256u : static_cast<uint32_t>(low);
}

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

int Status(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? 0 : kFp8GemmCublasError + s; }

}  // namespace

struct Fp8GemmContext::Impl {
  int device = -1;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::array<Plan, kMaxPlans> plans{};
  size_t next_victim = 0;
};

namespace {

// Descriptors and the heuristic's first choice for one problem; `p` is empty on entry.
int BuildPlan(Fp8GemmContext::Impl& im, Plan& p, const float* w_scale, const float* x_scale) {
#define DI_LT(call)                            \
  do {                                         \
    const int rc_ = Status(call);              \
    if (rc_ != 0) {                            \
      if (pref != nullptr) {                   \
        cublasLtMatmulPreferenceDestroy(pref); \
      }                                        \
      Release(p);                              \
      return rc_;                              \
    }                                          \
  } while (0)
  cublasLtMatmulPreference_t pref = nullptr;
  DI_LT(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  DI_LT(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)));
  DI_LT(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)));
  const int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  const int32_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  DI_LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode,
                                       sizeof(a_mode)));
  DI_LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode,
                                       sizeof(b_mode)));
  // The heuristic wants the scale pointers set; each call sets its own afterwards.
  DI_LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale,
                                       sizeof(w_scale)));
  DI_LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale,
                                       sizeof(x_scale)));
  const auto out = static_cast<uint64_t>(p.out), in = static_cast<uint64_t>(p.in),
             n = static_cast<uint64_t>(p.n);
  DI_LT(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, in, out, p.in));
  DI_LT(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, in, n, p.in));
  DI_LT(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, out, n, p.out));
  DI_LT(cublasLtMatmulPreferenceCreate(&pref));
  DI_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &im.workspace_bytes, sizeof(im.workspace_bytes)));
  // Only algorithms that work with the buffers' actual alignment (the default assumes 256 B).
  DI_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                             &p.align_w, sizeof(p.align_w)));
  DI_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                             &p.align_x, sizeof(p.align_x)));
  DI_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                             &p.align_y, sizeof(p.align_y)));
  DI_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                             &p.align_y, sizeof(p.align_y)));
  cublasLtMatmulHeuristicResult_t result = {};
  int returned = 0;
  DI_LT(cublasLtMatmulAlgoGetHeuristic(im.handle, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result,
                                       &returned));
#undef DI_LT
  cublasLtMatmulPreferenceDestroy(pref);
  if (returned < 1 || result.state != CUBLAS_STATUS_SUCCESS) {
    Release(p);
    return kFp8GemmUnsupported;
  }
  p.algo = result.algo;
  p.used = true;
  return 0;
}

}  // namespace

Fp8GemmContext::~Fp8GemmContext() { Destroy(); }

int Fp8GemmContext::Create(size_t workspace_bytes) {
  Destroy();
  auto* im = new Impl;
  int rc = static_cast<int>(cudaGetDevice(&im->device));
  if (rc == 0) rc = Status(cublasLtCreate(&im->handle));
  if (rc == 0 && workspace_bytes > 0) {
    rc = static_cast<int>(cudaMalloc(&im->workspace, workspace_bytes));  // 256-byte aligned
  }
  if (rc != 0) {
    if (im->handle != nullptr) cublasLtDestroy(im->handle);
    delete im;
    return rc;
  }
  im->workspace_bytes = workspace_bytes;
  impl_ = im;
  return 0;
}

void Fp8GemmContext::Destroy() {
  if (impl_ == nullptr) return;
  for (Plan& p : impl_->plans) Release(p);
  if (impl_->workspace != nullptr) cudaFree(impl_->workspace);
  if (impl_->handle != nullptr) cublasLtDestroy(impl_->handle);
  delete impl_;
  impl_ = nullptr;
}

int Fp8BlockGemm(Fp8GemmContext& ctx, const uint8_t* w, const float* w_scale, int64_t out,
                 int64_t in, const uint8_t* xq, const float* x_scale, int64_t rows, float* y,
                 void* stream) {
  Fp8GemmContext::Impl* im = ctx.impl_;
  if (im == nullptr) return kFp8GemmNoContext;
  if (out <= 0 || in <= 0 || rows <= 0 || out % 4 != 0 || in % 16 != 0) {
    return kFp8GemmBadArgument;
  }
  if (!Aligned16(w) || !Aligned16(w_scale) || !Aligned16(xq) || !Aligned16(x_scale) ||
      !Aligned16(y) || w == nullptr || w_scale == nullptr || xq == nullptr || x_scale == nullptr ||
      y == nullptr) {
    return kFp8GemmBadArgument;
  }
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess || device != im->device) return kFp8GemmNoContext;

  const int64_t n = Fp8GemmPaddedRows(rows);
  const uint32_t aw = Alignment(w), ax = Alignment(xq), ay = Alignment(y);
  Plan* plan = nullptr;
  for (Plan& p : im->plans) {
    if (p.used && p.out == out && p.in == in && p.n == n && p.align_w == aw && p.align_x == ax &&
        p.align_y == ay) {
      plan = &p;
      break;
    }
  }
  if (plan == nullptr) {
    Plan* slot = nullptr;
    for (Plan& p : im->plans) {
      if (!p.used) {
        slot = &p;
        break;
      }
    }
    if (slot == nullptr) {  // full: evict round-robin
      slot = &im->plans[im->next_victim];
      im->next_victim = (im->next_victim + 1) % kMaxPlans;
      Release(*slot);
    }
    slot->out = out;
    slot->in = in;
    slot->n = n;
    slot->align_w = aw;
    slot->align_x = ax;
    slot->align_y = ay;
    const int rc = BuildPlan(*im, *slot, w_scale, x_scale);
    if (rc != 0) return rc;
    plan = slot;
  }

  int rc = Status(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                 &w_scale, sizeof(w_scale)));
  if (rc == 0) {
    rc = Status(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                               &x_scale, sizeof(x_scale)));
  }
  if (rc != 0) return rc;
  const float alpha = 1.0f, beta = 0.0f;
  // In place (C == D, same descriptor) with beta = 0: C is never read.
  return Status(cublasLtMatmul(im->handle, plan->desc, &alpha, w, plan->a, xq, plan->b, &beta, y,
                               plan->d, y, plan->d, &plan->algo, im->workspace, im->workspace_bytes,
                               static_cast<cudaStream_t>(stream)));
}

}  // namespace deepinfer::kernels
