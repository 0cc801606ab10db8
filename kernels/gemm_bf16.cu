#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/gemm_bf16.h"
#include "kernels/launch.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kCublasError = 1000;

// hi = bf16(x), lo = bf16(x - hi): x - hi is exact in fp32, so hi + lo carries x to ~16 bits.
__global__ void SplitKernel(const float* __restrict__ x, int64_t n, __nv_bfloat16* __restrict__ hi,
                            __nv_bfloat16* __restrict__ lo) {
  AwaitProducers();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const __nv_bfloat16 h = __float2bfloat16_rn(x[i]);
    hi[i] = h;
    lo[i] = __float2bfloat16_rn(x[i] - __bfloat162float(h));
  }
}

}  // namespace

Bf16GemmContext::~Bf16GemmContext() {
  if (handle_) cublasDestroy(static_cast<cublasHandle_t>(handle_));
  if (workspace_) cudaFree(workspace_);
}

int Bf16GemmContext::Create(size_t workspace_bytes) {
  cublasHandle_t h = nullptr;
  if (const cublasStatus_t st = cublasCreate(&h); st != CUBLAS_STATUS_SUCCESS) {
    return kCublasError + static_cast<int>(st);
  }
  handle_ = h;
  if (const cudaError_t e = cudaMalloc(&workspace_, workspace_bytes); e != cudaSuccess) {
    return static_cast<int>(e);
  }
  workspace_bytes_ = workspace_bytes;
  // A preallocated workspace keeps cuBLAS from allocating inside a captured CUDA graph.
  if (const cublasStatus_t st = cublasSetWorkspace(h, workspace_, workspace_bytes_);
      st != CUBLAS_STATUS_SUCCESS) {
    return kCublasError + static_cast<int>(st);
  }
  return 0;
}

int Bf16Gemm(Bf16GemmContext& ctx, const uint16_t* w, int64_t out, int64_t in, const float* x,
             int64_t rows, uint16_t* split, float* y, void* stream) {
  if (!ctx.handle_ || in % 8 != 0 || rows < 1 || out < 1) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  auto s = static_cast<cudaStream_t>(stream);
  auto* hi = reinterpret_cast<__nv_bfloat16*>(split);
  __nv_bfloat16* lo = hi + rows * in;
  LaunchKernel(SplitKernel, 1024, 256, 0, s, x, rows * in, hi, lo);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return static_cast<int>(e);
  auto h = static_cast<cublasHandle_t>(ctx.handle_);
  if (const cublasStatus_t st = cublasSetStream(h, s); st != CUBLAS_STATUS_SUCCESS) {
    return kCublasError + static_cast<int>(st);
  }
  // Setting the stream puts cuBLAS back on its default workspace pool; ours again, so that a
  // captured graph allocates nothing.
  if (const cublasStatus_t st = cublasSetWorkspace(h, ctx.workspace_, ctx.workspace_bytes_);
      st != CUBLAS_STATUS_SUCCESS) {
    return kCublasError + static_cast<int>(st);
  }
  // Column-major view: y^T [out, rows] = W [in, out]^T * x^T [in, rows].
  const float one = 1.0f, zero = 0.0f;
  for (int term = 0; term < 2; ++term) {
    const cublasStatus_t st =
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(rows),
                     static_cast<int>(in), &one, w, CUDA_R_16BF, static_cast<int>(in),
                     term ? lo : hi, CUDA_R_16BF, static_cast<int>(in), term ? &one : &zero, y,
                     CUDA_R_32F, static_cast<int>(out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) return kCublasError + static_cast<int>(st);
  }
  return 0;
}

}  // namespace deepinfer::kernels
