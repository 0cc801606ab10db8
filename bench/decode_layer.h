// One decode step of a V4-Flash-shaped layer (hidden 4096, 64 heads of 512, 256 experts top-6,
// CSA with the indexer or HCA) as the sequence of our kernels, on random weights made on the
// device, with what each kernel must read in the released formats (the HBM floor) and its FLOPs.
// For bench_decode; the device-resident forward of stage 2 will run the same sequence.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/gemm_bf16.h"
#include "kernels/gemm_fp8.h"

namespace deepinfer::bench {

constexpr int64_t kHidden = 4096, kHeads = 64, kHeadDim = 512, kRopeDim = 64, kQLora = 1024;
constexpr int64_t kOGroups = 8, kOLora = 1024, kExperts = 256, kTopK = 6, kMoeInter = 2048;
constexpr int64_t kIndexHeads = 64, kIndexDim = 128, kIndexTopK = 512, kWindow = 128;
constexpr int64_t kHc = 4, kHcMix = (2 + kHc) * kHc;

/// Bump allocation from one cudaMalloc; Reset() frees the per-configuration part.
class DeviceArena {
 public:
  explicit DeviceArena(size_t bytes);
  ~DeviceArena();
  void* Alloc(size_t bytes);  // null when full
  template <class T>
  T* Take(size_t count) {
    return static_cast<T*>(Alloc(count * sizeof(T)));
  }
  size_t used() const { return used_; }
  void Rewind(size_t mark) { used_ = mark; }

 private:
  uint8_t* base_ = nullptr;
  size_t size_ = 0, used_ = 0;
};

struct Fp8Weight {
  uint8_t* w = nullptr;
  uint8_t* scale = nullptr;    // e8m0 [out / 128, in / 128]
  float* scale_f32 = nullptr;  // the same as the tensor-core GEMM's fp32 layout
  int64_t out = 0, in = 0;
  double bytes() const { return static_cast<double>(out * in + (out / 128) * (in / 128)); }
};

struct Bf16Weight {
  uint16_t* w = nullptr;
  int64_t out = 0, in = 0;
  double bytes() const { return 2.0 * out * in; }
};

/// The weights of one layer, in their released formats.
struct LayerWeights {
  bool csa = false;
  Fp8Weight wq_a, wq_b, wkv, wo_a, wo_b, shared_w1, shared_w3, shared_w2, index_wq_b;
  Bf16Weight compressor, index_compressor, index_weights, gate;  // wkv|wgate fused
  float *hc_attn_fn, *hc_ffn_fn, *hc_base, *hc_scale, *norm, *sinks, *inv_freq;
  // Expert e's w1/w3/w2 bytes and scales: device arrays of kExperts pointers each.
  const uint8_t **w1, **s1, **w3, **s3, **w2, **s2;
};

/// Fills `layer` with random weights of the given kind from `arena`; false when it is full.
bool MakeLayer(DeviceArena& arena, bool csa, uint32_t seed, LayerWeights* layer);

/// One kernel of the step: how to launch it on a layer, and what it must read and compute.
struct Op {
  std::string name;
  double floor_bytes = 0;  // weights and cache in the released / reference cache formats
  double flops = 0;
  std::function<int(const LayerWeights&, int layer_index, cudaStream_t)> launch;
};

/// How the step computes: the production kernels (parallel reductions, the tensor-core FP8 GEMM
/// above gemv_max_rows rows when `gemm` is given) or stage 1's CPU-order kernels (bit-exact).
// Which kernels take the routed experts: the device forward's choice (CUDA cores at one token,
// tensor cores from two), tensor cores at every batch, or CUDA cores up to 8 rows (the device
// forward's choice before the tensor-core kernel streamed its weights through shared memory), or
// the folded-scale wgmma GEMM (kernels/expert_fp4_wgmma.h) wherever the tensor cores take them.
enum class ExpertKernels { kAuto, kTensorCores, kCudaCore, kFolded };

struct StepKernels {
  bool cpu_order = false;
  kernels::Fp8GemmContext* gemm = nullptr;
  int gemv_max_rows = 2;  // dense FP8 products of more rows take the GEMM
  ExpertKernels experts = ExpertKernels::kAuto;
  kernels::Bf16GemmContext* bf16 = nullptr;  // bf16 products of more than 8 rows
  bool mma_attention = false;  // MqaMmaFp8Rows (auto: MqaDecodeFp8Rows, the same at 64 heads)
};

/// The decode step of `batch` sequences at `context` tokens for a layer of the given kind, with
/// its activations and per-layer cache allocated from `arena` for `layers` layer copies; with
/// `prefill`, instead a chunk of `batch` tokens of one sequence ending at `context` (one shared
/// cache; production kernels only). Returns an empty list when the arena is full.
std::vector<Op> DecodeStepOps(DeviceArena& arena, bool csa, int batch, int64_t context, int layers,
                              uint32_t seed, StepKernels kernels, bool prefill);

/// The cache one layer copy reads, random: attention rows in the 584-byte reference layout and
/// indexer keys in bf16 (production, the rows made in fp32 in `scratch`, scratch_rows at a time,
/// and packed), or both in fp32 (the CPU-order kernels).
struct LayerCache {
  uint8_t* rows8 = nullptr;
  uint16_t* keys16 = nullptr;
  float *rows = nullptr, *keys = nullptr;
};
bool MakeLayerCache(DeviceArena& arena, bool cpu_order, int64_t rows, int64_t keys, uint32_t seed,
                    float* scratch, int64_t scratch_rows, LayerCache* cache);

/// Random fills on the device.
void FillBytes(uint8_t* p, size_t n, uint32_t seed, uint8_t and_mask, uint8_t or_mask);
void FillFloats(float* p, size_t n, uint32_t seed, float scale);

}  // namespace deepinfer::bench
