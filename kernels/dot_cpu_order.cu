// Compiled without FMA contraction (kernels/CMakeLists.txt), as OrderedDot on the host.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/device_math.cuh"
#include "kernels/dot_cpu_order.h"
#include "kernels/exact_math.h"
#include "kernels/launch.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 128;

__device__ float E2M1(uint32_t nibble) {
  const float m = E2M1Magnitude(nibble);
  return (nibble & 8) ? -m : m;
}

// Weight (o, i) as DequantizeRow gives it: the decoded value times its block's scale.
__device__ float Weight(StoredFormat f, const uint8_t* w, const uint8_t* scale, int64_t o,
                        int64_t i, int64_t in) {
  switch (f) {
    case StoredFormat::kBf16:
      return __uint_as_float(static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(w)[o * in + i])
                             << 16);
    case StoredFormat::kFp8Block128:
      return E4M3(w[o * in + i]) * E8M0(scale[(o / 128) * ((in + 127) / 128) + i / 128]);
    case StoredFormat::kFp4Block32: {
      const uint32_t byte = w[o * (in / 2) + i / 2];
      return E2M1((i & 1) ? byte >> 4 : byte & 0xf) * E8M0(scale[o * (in / 32) + i / 32]);
    }
  }
  return 0.0f;
}

// OrderedDot(x, W[o]) with the weights decoded on the fly.
__device__ float Dot(StoredFormat f, const uint8_t* w, const uint8_t* scale, int64_t o,
                     const float* x, int64_t in) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= in; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += x[i + k] * Weight(f, w, scale, o, i + k, in);
  }
  float s = CombineLanes(acc);
  for (; i < in; ++i) s += x[i] * Weight(f, w, scale, o, i, in);
  return s;
}

__global__ void DotKernel(StoredFormat f, const uint8_t* w, const uint8_t* scale, int64_t out_begin,
                          int64_t out, int64_t in, const float* x, int64_t x_stride, int64_t rows,
                          float* y, int64_t y_stride) {
  AwaitProducers();
  const int64_t k = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (k >= rows * out) return;
  const int64_t r = k / out, o = k % out;
  y[r * y_stride + o] = Dot(f, w, scale, out_begin + o, x + r * x_stride, in);
}

__global__ void ExpertKernel(const uint8_t* const* weights, const uint8_t* const* scales,
                             int64_t out, int64_t in, const ExpertGroup* groups, const float* x,
                             float* y, const int32_t* live_groups, int first) {
  AwaitProducers();
  const int g = first + static_cast<int>(blockIdx.y);
  if (live_groups != nullptr && g >= *live_groups) return;
  const ExpertGroup& grp = groups[g];
  const int64_t k = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (k >= grp.rows * out) return;
  const int j = static_cast<int>(k / out);
  const int64_t o = k % out;
  const int e = grp.expert;
  y[static_cast<int64_t>(grp.y_row[j]) * out + o] =
      Dot(StoredFormat::kFp4Block32, weights[e], scales[e], o,
          x + static_cast<int64_t>(grp.x_row[j]) * in, in);
}

}  // namespace

int QuantizedDotCpuOrder(StoredFormat format, const uint8_t* w, const uint8_t* scale,
                         int64_t out_begin, int64_t out, int64_t in, const float* x,
                         int64_t x_stride, int64_t rows, float* y, int64_t y_stride, void* stream) {
  if (rows < 0 || out < 0 || in < 1) return cudaErrorInvalidValue;
  if (rows == 0 || out == 0) return 0;
  const int64_t n = rows * out;
  LaunchKernel(DotKernel, static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0,
               static_cast<cudaStream_t>(stream), format, w, scale, out_begin, out, in, x, x_stride,
               rows, y, y_stride);
  return cudaGetLastError();
}

int Fp4ExpertCpuOrder(const uint8_t* const* weights, const uint8_t* const* scales, int64_t out,
                      int64_t in, const ExpertGroup* groups, int n_groups, const float* x, float* y,
                      const int32_t* live_groups, void* stream) {
  if (n_groups < 0 || in % 32 != 0) return cudaErrorInvalidValue;
  if (n_groups == 0) return 0;
  // Groups run along grid.y, which holds at most 65,535: more take several launches.
  constexpr int kMaxGridY = 65535;
  for (int first = 0; first < n_groups; first += kMaxGridY) {
    const dim3 grid(static_cast<unsigned>((kExpertGroupRows * out + kThreads - 1) / kThreads),
                    static_cast<unsigned>(std::min(kMaxGridY, n_groups - first)));
    LaunchKernel(ExpertKernel, grid, kThreads, 0, static_cast<cudaStream_t>(stream), weights,
                 scales, out, in, groups, x, y, live_groups, first);
  }
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
