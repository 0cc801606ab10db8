#include "kernels/launch.cuh"

#include <atomic>

namespace deepinfer::kernels {
namespace {
std::atomic<bool> overlapped_launches{true};
std::atomic<bool> early_weight_loads{true};
}  // namespace

void SetOverlappedLaunches(bool on) { overlapped_launches.store(on, std::memory_order_relaxed); }

bool OverlappedLaunches() { return overlapped_launches.load(std::memory_order_relaxed); }

void SetEarlyWeightLoads(bool on) { early_weight_loads.store(on, std::memory_order_relaxed); }

bool EarlyWeightLoads() { return early_weight_loads.load(std::memory_order_relaxed); }

}  // namespace deepinfer::kernels
