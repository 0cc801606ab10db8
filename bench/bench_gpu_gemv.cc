// FP8 block-scaled GEMV on the GPU: achieved HBM bandwidth for V4-Flash decode shapes at batch
// 1..8, against the device-to-device copy rate measured in the same run (the ceiling). Each shape
// twice: the CUDA-core GEMV on fp32 activations ("kernel": "gemv") and the tensor-core one on
// activations already in e4m3 ("mma"; the quantising launch is not timed).
//   bench_gpu_gemv
#include <cuda_runtime_api.h>

#include <cstdio>
#include <random>
#include <vector>

#include "kernels/gemm_fp8.h"
#include "kernels/linear_fp8.h"
#include "kernels/linear_fp8_mma.h"

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  // Ceiling: a 1 GiB device-to-device copy (bytes read + written).
  const size_t copy_bytes = size_t{1} << 30;
  void *src, *dst;
  cudaMalloc(&src, copy_bytes);
  cudaMalloc(&dst, copy_bytes);
  cudaMemcpy(dst, src, copy_bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(a);
  for (int i = 0; i < 10; ++i) cudaMemcpy(dst, src, copy_bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  const double copy_tbs = 2.0 * copy_bytes * 10 / (ms * 1e-3) / 1e12;
  cudaFree(src);
  cudaFree(dst);
  std::printf("{\"ceiling_d2d_copy_tb_s\": %.3f}\n", copy_tbs);
  struct Shape {
    const char* name;
    int64_t out, in;
  } shapes[] = {{"wq_b", 32768, 1024},
                {"wo_a", 8192, 4096},
                {"wo_b", 4096, 8192},
                {"shared_w1", 2048, 4096},
                {"wq_a", 1024, 4096}};
  std::mt19937 rng(1);
  for (const Shape& s : shapes) {
    // Many copies of the weight so that each launch reads cold HBM, not L2.
    const int copies = 64;
    const size_t wbytes = s.out * s.in, sbytes = ((s.out + 127) / 128) * ((s.in + 127) / 128);
    std::vector<uint8_t> hw(wbytes), hs(sbytes, 127);
    for (auto& v : hw) v = static_cast<uint8_t>(rng() & 0x77);
    uint8_t *dw, *ds;
    float *dx, *dy;
    cudaMalloc(reinterpret_cast<void**>(&dw), wbytes * copies);
    cudaMalloc(reinterpret_cast<void**>(&ds), sbytes);
    cudaMalloc(reinterpret_cast<void**>(&dx), 8 * s.in * sizeof(float));
    cudaMalloc(reinterpret_cast<void**>(&dy), 8 * s.out * sizeof(float));
    for (int c = 0; c < copies; ++c)
      cudaMemcpy(dw + c * wbytes, hw.data(), wbytes, cudaMemcpyHostToDevice);
    cudaMemcpy(ds, hs.data(), sbytes, cudaMemcpyHostToDevice);
    cudaMemset(dx, 0, 8 * s.in * sizeof(float));
    const int64_t padded = deepinfer::kernels::Fp8GemmPaddedRows(8);
    uint8_t* xq;
    float* xs;
    cudaMalloc(reinterpret_cast<void**>(&xq), padded * s.in);
    cudaMalloc(reinterpret_cast<void**>(&xs),
               deepinfer::kernels::Fp8ActScaleCount(8, s.in) * sizeof(float));
    deepinfer::kernels::QuantizeActFp8(dx, 8, s.in, xq, xs, nullptr);
    for (const bool mma : {false, true}) {
      for (int rows : {1, 8}) {
        const auto launch = [&](int c) {
          if (mma) {
            deepinfer::kernels::Fp8MmaGemv(dw + c * wbytes, ds, s.out, s.in, xq, xs, padded, rows,
                                           dy, nullptr);
          } else {
            deepinfer::kernels::Fp8BlockGemv(dw + c * wbytes, ds, s.out, s.in, dx, rows, dy,
                                             nullptr);
          }
        };
        for (int c = 0; c < copies; ++c) launch(c);
        cudaEventRecord(a);
        for (int c = 0; c < copies; ++c) launch(c);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&ms, a, b);
        const double us = ms * 1e3 / copies;
        const double tbs = (wbytes + sbytes) / (us * 1e-6) / 1e12;
        std::printf(
            "{\"kernel\": \"%s\", \"shape\": \"%s\", \"out\": %lld, \"in\": %lld, "
            "\"rows\": %d, \"us\": %.2f, \"weight_tb_s\": %.3f, \"of_copy_ceiling\": %.2f}\n",
            mma ? "mma" : "gemv", s.name, static_cast<long long>(s.out),
            static_cast<long long>(s.in), rows, us, tbs, tbs / copy_tbs);
      }
    }
    cudaFree(xq);
    cudaFree(xs);
    cudaFree(dw);
    cudaFree(ds);
    cudaFree(dx);
    cudaFree(dy);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
