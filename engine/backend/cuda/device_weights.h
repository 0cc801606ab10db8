// A checkpoint's weights on the device for the device forward (device_forward.h), each tensor in
// its released format — FP8 e4m3 bytes with their e8m0 128x128 scales, MXFP4 experts with their
// per-32 scales, bf16 — plus the small fp32 parameters (norms, mHC, sinks, RoPE frequencies).
// Uploading checks that every tensor has a shape and format the production kernels take.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/common/status.h"
#include "engine/model/weights.h"
#include "kernels/compress.h"
#include "kernels/ops.h"

namespace deepinfer {

/// Device allocations freed together (cudaFree on destruction).
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory();
  /// `bytes` of zeroed device memory, 256-byte aligned.
  Result<void*> Alloc(size_t bytes);
  /// The same, not zeroed (memory the caller fills at once).
  Result<void*> AllocRaw(size_t bytes);
  template <class T>
  Result<T*> Take(size_t count) {
    DI_ASSIGN_OR_RETURN(void* p, Alloc(count * sizeof(T)));
    return static_cast<T*>(p);
  }
  /// A device copy of `bytes` bytes at `host` (not zeroed past them).
  Result<void*> Upload(const void* host, size_t bytes);
  size_t bytes() const { return bytes_; }

 private:
  std::vector<void*> blocks_;
  size_t bytes_ = 0;
};

/// A [out, in] weight on the device in its stored format (FP8 block or bf16 for dense products,
/// FP4 block for routed experts).
struct DeviceLinear {
  WeightFormat format = WeightFormat::kBF16;
  int64_t out = 0, in = 0;
  const uint8_t* data = nullptr;
  const uint8_t* scale = nullptr;    // FP8: e8m0 [out / 128, in / 128]; FP4: e8m0 [out, in / 32]
  const float* scale_f32 = nullptr;  // FP8: the scales as the tensor-core GEMM reads them
};

struct DeviceCompressor {
  kernels::CompressorShape shape;
  DeviceLinear wkv, wgate;
  const float* ape = nullptr;   // [ratio, proj]
  const float* norm = nullptr;  // [width]
};

struct DeviceLayer {
  AttnType type = AttnType::kSliding;
  int ratio = 0;
  kernels::HyperWeights hc_attn{}, hc_ffn{};
  const float *attn_norm = nullptr, *ffn_norm = nullptr;
  DeviceLinear wq_a, wq_b, wkv, wo_a, wo_b;
  const float *q_norm = nullptr, *kv_norm = nullptr, *sinks = nullptr, *inv_freq = nullptr;
  bool has_compressor = false, has_indexer = false;
  DeviceCompressor comp, index_comp;
  DeviceLinear index_wq_b, index_weights_proj;
  DeviceLinear gate;
  const float* gate_bias = nullptr;  // score-routed layers
  const int32_t* tid2eid = nullptr;  // hash-routed layers: [vocab, top_k]
  // Expert e's tensors: device arrays of n_routed_experts pointers each.
  const uint8_t **w1 = nullptr, **s1 = nullptr, **w3 = nullptr, **s3 = nullptr;
  const uint8_t **w2 = nullptr, **s2 = nullptr;
  bool has_shared = false;
  DeviceLinear shared_w1, shared_w2, shared_w3;
};

struct DeviceModel {
  DeviceLinear embed, head;
  const float* norm = nullptr;
  kernels::HyperWeights hc_head{};
  std::vector<DeviceLayer> layers;
};

/// Uploads the main model (not the MTP block) into `memory`; with gemm_scales also the FP8
/// weights' scales as the tensor-core GEMM reads them. An error names the first tensor or config
/// value the production kernels do not take (e.g. head_dim other than 512).
Status UploadModel(const Checkpoint& checkpoint, bool gemm_scales, DeviceMemory& memory,
                   DeviceModel* model);

/// Whether every routed expert matrix's MXFP4 scales fold (kernels/fp4_e4m3.h's ScalesFold), as
/// the folded expert GEMM (kernels/expert_fp4_wgmma.h) requires; the error names the first that
/// does not.
Status CheckExpertScalesFold(const Checkpoint& checkpoint);

}  // namespace deepinfer
