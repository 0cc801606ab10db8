// The DeepSeek-V4 model configuration, read from config.json in either the official DeepSeek
// layout (compress_ratios, num_hash_layers, rope_scaling, quantization_config, expert_dtype) or
// the transformers layout (layer_types, mlp_layer_types, compress_rates, rope_parameters).
#pragma once

#include <string>
#include <vector>

#include "engine/common/status.h"

namespace deepinfer {

enum class AttnType { kSliding, kCsa, kHca };
const char* AttnTypeName(AttnType t);

enum class ScoringFunc { kSqrtSoftplus, kSigmoid, kSoftmax };

struct YarnParams {
  bool enabled = false;
  double factor = 1.0;
  double original_max_position = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

struct ModelConfig {
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int head_dim = 0;
  int rope_dim = 0;  // trailing dims of each head that get interleaved RoPE
  int q_lora_rank = 0;
  int o_lora_rank = 0;
  int o_groups = 0;
  int sliding_window = 128;
  double rope_theta = 10000.0;
  double compress_rope_theta = 160000.0;
  YarnParams yarn;  // applies to layers with a compressor only
  long long max_position_embeddings = 0;

  std::vector<AttnType> attn_types;  // per main layer
  std::vector<int> compress_ratio;   // per main layer: 0, CSA rate, or HCA rate
  std::vector<bool> hash_routed;     // per main layer
  int csa_rate = 4;
  int hca_rate = 128;

  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;

  int n_routed_experts = 0;
  int num_experts_per_tok = 0;
  int n_shared_experts = 0;
  int moe_intermediate_size = 0;
  ScoringFunc scoring_func = ScoringFunc::kSqrtSoftplus;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;  // 0 disables the clamp

  int hc_mult = 4;
  int hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-6;

  int num_mtp_layers = 0;  // num_nextn_predict_layers as declared by the config
  bool tie_word_embeddings = false;
  int bos_token_id = 0;
  int eos_token_id = 1;

  std::string expert_dtype;  // "fp4", "fp8" or "" (unquantised)
  bool fp8_dense = false;    // quantization_config.quant_method == fp8
  int fp8_block_out = 128, fp8_block_in = 128;
  std::string source_layout;  // "official" or "transformers"

  int q_heads_per_group() const { return num_heads / o_groups; }
  bool has_compressor(int layer) const { return attn_types[layer] != AttnType::kSliding; }
};

/// Parses config.json text. Every missing required key or out-of-range value is an error naming it.
Result<ModelConfig> ParseModelConfig(const std::string& json_text, const std::string& origin);
Result<ModelConfig> LoadModelConfig(const std::string& model_dir);

}  // namespace deepinfer
