#include "kernels/launch.cuh"

#include <atomic>

namespace deepinfer::kernels {
namespace {
std::atomic<bool> overlapped_launches{true};
}  // namespace

void SetOverlappedLaunches(bool on) { overlapped_launches.store(on, std::memory_order_relaxed); }

bool OverlappedLaunches() { return overlapped_launches.load(std::memory_order_relaxed); }

}  // namespace deepinfer::kernels
