#include <cuda_runtime.h>

#include "kernels/dequant.h"
#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"

namespace deepinfer::kernels {
namespace {

__device__ __forceinline__ float E2M1(uint8_t nibble) {
  const float mags[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = mags[nibble & 7];
  return (nibble & 8) ? -m : m;
}

__global__ void DequantFp8Kernel(const uint8_t* __restrict__ w, const uint8_t* __restrict__ scale,
                                 int64_t out, int64_t in, int block_out, int block_in,
                                 float* __restrict__ y) {
  AwaitProducers();
  const int64_t n = out * in;
  const int64_t scale_cols = (in + block_in - 1) / block_in;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = i / in, c = i % in;
    y[i] = E4M3(w[i]) * E8M0(scale[(o / block_out) * scale_cols + c / block_in]);
  }
}

__global__ void DequantFp4Kernel(const uint8_t* __restrict__ w, const uint8_t* __restrict__ scale,
                                 int64_t out, int64_t in, float* __restrict__ y) {
  AwaitProducers();
  const int64_t n_bytes = out * in / 2;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_bytes;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = (2 * i) / in, c = (2 * i) % in;
    const float s = E8M0(scale[o * (in / 32) + c / 32]);
    const uint8_t b = w[i];
    y[2 * i] = E2M1(b & 0xf) * s;
    y[2 * i + 1] = E2M1(b >> 4) * s;
  }
}

int Blocks(int64_t n) {
  const int64_t b = (n + 255) / 256;
  return static_cast<int>(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

}  // namespace

int DequantFp8Block(const uint8_t* w, const uint8_t* scale, int64_t out, int64_t in, int block_out,
                    int block_in, float* y, void* stream) {
  LaunchKernel(DequantFp8Kernel, Blocks(out * in), 256, 0, static_cast<cudaStream_t>(stream), w,
               scale, out, in, block_out, block_in, y);
  return static_cast<int>(cudaGetLastError());
}

int DequantFp4Block32(const uint8_t* w, const uint8_t* scale, int64_t out, int64_t in, float* y,
                      void* stream) {
  if (in % 32 != 0) return static_cast<int>(cudaErrorInvalidValue);
  LaunchKernel(DequantFp4Kernel, Blocks(out * in / 2), 256, 0, static_cast<cudaStream_t>(stream), w,
               scale, out, in, y);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
