#include "engine/backend/cuda/slot_caches.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/backend/cuda/cuda_status.h"
#include "engine/backend/cuda/step_rows.h"
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
    const SlotCopyRuns runs = SlotCopyRunsFor(r.ratio, r.rows_per_slot, static_cast<int>(ring),
                                              slots_total, from, to, length);
    for (const RowRun& run : {runs.compressed, runs.ring}) {
      DI_RETURN_IF_ERROR(
          copy(cache.pool + run.to_row * kRow, cache.pool + run.from_row * kRow, run.rows * kRow));
    }
    if (cache.keys != nullptr) {  // [slots][R][width]: the compressed rows' indices
      const int64_t width = plan.cfg->index_head_dim;
      const RowRun& c = runs.compressed;
      DI_RETURN_IF_ERROR(copy(cache.keys + c.to_row * width, cache.keys + c.from_row * width,
                              c.rows * width * static_cast<int64_t>(sizeof(uint16_t))));
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
