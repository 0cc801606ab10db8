// Overlapped launches (kernels/launch.cuh): the attribute lets the next kernel start before the
// current one ends, and AwaitProducers orders what follows it after the current one. A producer
// spins for ~2 ms before it writes a flag; the consumer launched right after it reads the flag
// once before its AwaitProducers and once after.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda_available.h"
#include "kernels/launch.cuh"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer::kernels {
namespace {

__global__ void SlowProducerKernel(int* flag, long long spin_cycles) {
  AwaitProducers();
  const long long start = clock64();
  while (clock64() - start < spin_cycles) {
  }
  *flag = 1;
}

__global__ void ConsumerKernel(const int* flag, int* seen) {
  seen[0] = *reinterpret_cast<const volatile int*>(flag);
  AwaitProducers();
  seen[1] = *reinterpret_cast<const volatile int*>(flag);
}

struct Seen {
  int before_wait, after_wait;
};

class LaunchGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  void TearDown() override { SetOverlappedLaunches(true); }

  Seen Run(bool overlap, bool graph) {
    SetOverlappedLaunches(overlap);
    testing::DeviceVector<int> flag(std::vector<int>{0}), seen(std::vector<int>{-1, -1});
    cudaStream_t s;
    EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    auto launch = [&] {
      LaunchKernel(SlowProducerKernel, 1, 32, 0, s, flag.get(), 4'000'000LL);
      LaunchKernel(ConsumerKernel, 1, 32, 0, s, flag.get(), seen.get());
    };
    if (graph) {
      cudaGraph_t g = nullptr;
      cudaGraphExec_t exec = nullptr;
      EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      launch();
      EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
      EXPECT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
      EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(g);
    } else {
      launch();
    }
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    cudaStreamDestroy(s);
    const std::vector<int> h = seen.ToHost();
    return {h[0], h[1]};
  }
};

// Inside a CUDA graph (how decode steps run) the consumer starts while the producer spins.
// Launched eagerly it did not on the H200 (driver of 2026-11), so there only the order is checked.
TEST_F(LaunchGpuTest, TheConsumerStartsEarlyAndItsWaitSeesTheProducerDone) {
  const Seen in_graph = Run(/*overlap=*/true, /*graph=*/true);
  EXPECT_EQ(in_graph.before_wait, 0);
  EXPECT_EQ(in_graph.after_wait, 1);
  EXPECT_EQ(Run(/*overlap=*/true, /*graph=*/false).after_wait, 1);
}

TEST_F(LaunchGpuTest, WithoutOverlapTheStreamOrdersEveryKernel) {
  for (bool graph : {false, true}) {
    const Seen seen = Run(/*overlap=*/false, graph);
    EXPECT_EQ(seen.before_wait, 1) << "graph " << graph;
    EXPECT_EQ(seen.after_wait, 1) << "graph " << graph;
  }
}

}  // namespace
}  // namespace deepinfer::kernels
