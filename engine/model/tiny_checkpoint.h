// Random small DeepSeek-V4 checkpoints in the official layout, covering every layer type, hash
// and score routing and the MTP block. Deterministic: the same spec gives the same bytes on every
// machine (a fixed integer RNG, no library distributions).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/common/status.h"

namespace deepinfer {

struct TinySpec {
  uint64_t seed = 1;
  std::string quantize = "none";  // none (F32) | bf16 | fp8-fp4 (like the released weights)
  int vocab = 512;
  int hidden = 192;
  std::vector<int> compress_ratios = {0, 0, 4, 128, 4, 128};
  int num_hash_layers = 3;
  bool mtp = true;
  int heads = 4;
  int head_dim = 64;
  int rope_dim = 16;
  int q_lora = 96;
  int o_groups = 2;
  int o_lora = 48;
  int window = 128;
  int index_heads = 8;
  int index_head_dim = 32;
  int index_topk = 8;
  int experts = 8;
  int top_k = 2;
  int moe_inter = 64;
  long long max_position = 1048576;  // max_position_embeddings written to config.json
  // Gain of the weights whose outputs join the residual streams (attention's wo_b, the experts'
  // and shared expert's w2). Below 1 each layer moves the streams less, as a trained model's do,
  // and last-bit differences grow less through the layers (docs/gpu.md, "How sensitive").
  float residual_gain = 1.0f;
  // Gain of the experts' gate and up weights: 4 pushes some pre-activations past the SwiGLU clamp.
  float expert_gain = 4.0f;
  // Threads that draw and quantise the weights (0: one per hardware thread, up to 32). The bytes
  // do not depend on it.
  int threads = 0;
};

/// Writes DIR/config.json and DIR/model.safetensors.
Status MakeTinyCheckpoint(const TinySpec& spec, const std::string& dir);

}  // namespace deepinfer
