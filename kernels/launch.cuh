// Kernel launches that overlap with the kernel before them (Hopper programmatic dependent launch).
//
// A decode step is ~180 short kernels in one CUDA graph; between two dependent kernels the GPU
// otherwise drains the first grid, then launches and ramps up the second. With the programmatic
// stream serialization attribute the next grid is launched while the current one still runs: its
// blocks start as soon as every block of the current grid has passed `AwaitProducers`, and wait
// there until the current grid has finished and its writes are visible. Every kernel therefore
// calls `AwaitProducers` before it touches global memory that an earlier kernel writes (or that a
// later one reads): it is the first statement of every kernel here, except that kernels may load
// settled weights before it (EarlyWeightLoads below). A kernel must wait even when
// it reads nothing its predecessor wrote, since ordering reaches back past the predecessor only
// through each kernel's wait. Without the attribute, or after a memcpy, memset or host node, the
// wait returns at once and ordering is the stream's.
//
// A grid launched early has its blocks placed while the grid before it still holds the SMs, and
// they can land packed onto a few of them: a latency-bound grid of a few hundred blocks then runs
// slower than after a drain (LaunchKernelAfterDrain; bench/RESULTS.md, "Grids launched early are
// packed").
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace deepinfer::kernels {

/// Waits until the kernels this grid depends on have finished and their writes are visible, then
/// lets the next kernel in the stream launch. A no-op when the grid was launched without the
/// overlap attribute.
__device__ __forceinline__ void AwaitProducers() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Whether launches carry the overlap attribute (default on). Off reproduces plain stream order,
/// for measuring what the overlap is worth; set it before graphs are captured.
void SetOverlappedLaunches(bool on);
bool OverlappedLaunches();

/// Whether kernels may load their weights before `AwaitProducers` (default on), so that a
/// product's weights stream from HBM while the kernel before it still runs. It holds only while
/// weights are settled: written by copies or kernels that finished before the launch (the device
/// forward synchronises its upload), never by a kernel that may still be running. Off loads them
/// after the wait, for measuring what it is worth.
void SetEarlyWeightLoads(bool on);
bool EarlyWeightLoads();

/// `kernel<<<grid, block, smem, stream>>>(args...)`, with the overlap attribute when `overlap`
/// and overlapped launches are on; without it the grid starts once the stream's previous work has
/// drained, its blocks spread over idle SMs (see the file comment). Errors are left for
/// cudaGetLastError, as with the triple-chevron launch.
template <typename... Params, typename... Args>
void LaunchKernelOverlapping(bool overlap, void (*kernel)(Params...), dim3 grid, dim3 block,
                             size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attrs[1];
  attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = overlap && OverlappedLaunches() ? 1 : 0;
  (void)cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

/// The launch every kernel here takes: overlapped with the kernel before it when that is on.
template <typename... Params, typename... Args>
void LaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                  cudaStream_t stream, Args&&... args) {
  LaunchKernelOverlapping(true, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

/// A launch after the stream drains, for grids that packed blocks would slow.
template <typename... Params, typename... Args>
void LaunchKernelAfterDrain(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                            cudaStream_t stream, Args&&... args) {
  LaunchKernelOverlapping(false, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

}  // namespace deepinfer::kernels
