#include "engine/backend/cuda/slot_caches.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/backend/cuda/cuda_status.h"
#include "kernels/forward_glue.h"
#include "kernels/kv_row.h"

namespace deepinfer {
namespace {

// A layer's four compressor states (kv and gate of its compressor and of its indexer's), each
// with its floats per slot; absent ones null.
struct SlotStates {
  float* base[4];
  int64_t floats[4];
};

SlotStates StatesOf(const DeviceLayer& L, const DeviceLayerCache& cache) {
  const int64_t comp = cache.comp_kv ? L.comp.shape.state_floats() : 0;
  const int64_t index = cache.index_kv ? L.index_comp.shape.state_floats() : 0;
  return {{cache.comp_kv, cache.comp_gate, cache.index_kv, cache.index_gate},
          {comp, comp, index, index}};
}

}  // namespace

Status ResetSlotCaches(const DeviceModel& model, const StepPlan& plan, int slot,
                       cudaStream_t stream) {
  for (size_t l = 0; l < model.layers.size(); ++l) {
    const SlotStates st = StatesOf(model.layers[l], plan.caches[l]);
    for (int k = 0; k < 4; ++k) {
      if (st.base[k] == nullptr) continue;
      const float value = k % 2 == 0 ? 0.0f : -INFINITY;
      DI_RETURN_IF_ERROR(KernelStatus(
          kernels::SetFloats(st.base[k] + slot * st.floats[k], st.floats[k], value, stream),
          "reset"));
    }
  }
  return Status::Ok();
}

Status CopySlotCaches(const DeviceModel& model, const StepPlan& plan, int64_t slots_total, int from,
                      int to, int64_t length, cudaStream_t stream) {
  const int64_t ring = plan.ring;
  const auto copy = [&](void* dst, const void* src, int64_t bytes) {
    if (bytes <= 0) return Status::Ok();
    return CudaStatus(
        cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream),
        "slot copy");
  };
  constexpr int64_t kRow = kernels::kKvRowBytes;
  for (size_t l = 0; l < model.layers.size(); ++l) {
    const DeviceLayerCache& cache = plan.caches[l];
    const RatioInputs& r = plan.in.ratios[cache.ratio_index];
    const int64_t R = r.rows_per_slot;
    const int64_t rows = r.ratio > 0 ? std::min(length / r.ratio, R) : 0;
    DI_RETURN_IF_ERROR(copy(cache.pool + to * R * kRow, cache.pool + from * R * kRow, rows * kRow));
    DI_RETURN_IF_ERROR(copy(cache.pool + (slots_total * R + to * ring) * kRow,
                            cache.pool + (slots_total * R + from * ring) * kRow, ring * kRow));
    if (cache.keys != nullptr) {
      const int64_t width = plan.cfg->index_head_dim;
      DI_RETURN_IF_ERROR(copy(cache.keys + to * R * width, cache.keys + from * R * width,
                              rows * width * static_cast<int64_t>(sizeof(uint16_t))));
    }
    const SlotStates st = StatesOf(model.layers[l], cache);
    for (int k = 0; k < 4; ++k) {
      if (st.base[k] == nullptr) continue;
      DI_RETURN_IF_ERROR(copy(st.base[k] + to * st.floats[k], st.base[k] + from * st.floats[k],
                              st.floats[k] * static_cast<int64_t>(sizeof(float))));
    }
  }
  return Status::Ok();
}

}  // namespace deepinfer
