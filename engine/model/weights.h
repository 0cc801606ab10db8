// The DeepSeek-V4 weights as views into the mapped checkpoint. Linear weights stay in their
// released formats (F32/BF16, FP8 e4m3 with block scales, FP4 e2m1 with per-32 scales); small
// parameters (norms, sinks, mHC) are converted to fp32 at load.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/dtype.h"
#include "engine/model/safetensors.h"

namespace deepinfer {

enum class WeightFormat { kF32, kBF16, kF16, kFp8Block, kFp4Block };
const char* WeightFormatName(WeightFormat f);

/// A [out, in] linear weight in its stored format.
struct LinearWeight {
  WeightFormat format = WeightFormat::kF32;
  int64_t out = 0, in = 0;
  const uint8_t* data = nullptr;
  const uint8_t* scale = nullptr;  // FP8: [ceil(out/bo), ceil(in/bi)]; FP4: [out, in/32]
  DType scale_dtype = DType::kF8E8M0;
  int block_out = 1, block_in = 1;
  std::string name;

  bool quantized() const {
    return format == WeightFormat::kFp8Block || format == WeightFormat::kFp4Block;
  }
  size_t bytes() const;
};

/// Writes the fp32 values of row `row` (length w.in) into `out`.
void DequantizeRow(const LinearWeight& w, int64_t row, float* out);

struct CompressorWeights {
  int width = 0;         // output row width (head_dim, or index_head_dim for the indexer)
  int ratio = 0;         // tokens per compressed row
  bool overlap = false;  // CSA: two series, each projection is 2*width wide
  LinearWeight wkv, wgate;
  std::vector<float> ape;   // [ratio, (overlap ? 2 : 1) * width]
  std::vector<float> norm;  // [width]
};

struct AttentionWeights {
  LinearWeight wq_a, wq_b, wkv, wo_a, wo_b;
  std::vector<float> q_norm, kv_norm, attn_sink;
  bool has_compressor = false;
  CompressorWeights compressor;
  bool has_indexer = false;
  LinearWeight index_wq_b, index_weights_proj;
  CompressorWeights index_compressor;
};

struct FfnWeights {
  LinearWeight w1, w2, w3;  // gate, down, up
};

struct MoeWeights {
  LinearWeight gate;
  std::vector<float> gate_bias;  // empty for hash-routed layers
  std::vector<int32_t> tid2eid;  // [vocab, top_k], hash-routed layers only
  std::vector<FfnWeights> experts;
  bool has_shared = false;
  FfnWeights shared;
};

struct HyperConnWeights {
  std::vector<float> fn;  // [(2 + n) * n, n * hidden]
  std::vector<float> base, scale;
};

struct HyperHeadWeights {
  std::vector<float> fn;  // [n, n * hidden]
  std::vector<float> base, scale;
};

struct LayerWeights {
  AttnType type = AttnType::kSliding;
  int ratio = 0;
  bool hash_routed = false;
  HyperConnWeights hc_attn, hc_ffn;
  std::vector<float> attn_norm, ffn_norm;
  AttentionWeights attn;
  MoeWeights ffn;
};

struct MtpWeights {
  LinearWeight e_proj, h_proj;
  std::vector<float> enorm, hnorm, norm;
  HyperHeadWeights hc_head;
  LayerWeights layer;
};

struct ModelWeights {
  LinearWeight embed, head;
  std::vector<float> norm;
  HyperHeadWeights hc_head;
  std::vector<LayerWeights> layers;
  bool has_mtp = false;
  MtpWeights mtp;
};

/// A loaded checkpoint: config, mapped tensors and the validated weight views.
struct Checkpoint {
  ModelConfig config;
  std::shared_ptr<TensorStore> store;
  ModelWeights weights;
  std::string naming;                 // "official" or "transformers"
  std::vector<std::string> warnings;  // e.g. MTP declared but absent
};

/// Loads and validates every tensor (presence, dtype, shape, scale shape) before anything runs.
Result<std::unique_ptr<Checkpoint>> LoadCheckpoint(const std::string& model_dir);

}  // namespace deepinfer
