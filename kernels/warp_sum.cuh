// The sum of a value over the 32 lanes of a warp (every lane gets it), for the kernels' final
// reductions.
#pragma once

namespace deepinfer::kernels {

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

}  // namespace deepinfer::kernels
