// The tiny checkpoint the device-forward GPU tests share: random weights with the production
// kernels' shapes (head_dim 512, 64 indexer heads of 128, FP8 dense weights, FP4 experts), small
// enough for the CPU forward to serve as the reference in seconds.
#pragma once

#include <cstdint>

#include "engine/model/tiny_checkpoint.h"

namespace deepinfer::testing {

inline TinySpec KernelShapedSpec(uint64_t seed) {
  TinySpec s;
  s.seed = seed;
  s.quantize = "fp8-fp4";
  s.hidden = 512;
  s.heads = 16;
  s.head_dim = 512;
  s.rope_dim = 64;
  s.q_lora = 256;
  s.o_groups = 2;
  s.o_lora = 256;
  s.window = 64;
  s.index_heads = 64;
  s.index_head_dim = 128;
  s.index_topk = 16;
  s.experts = 16;
  s.top_k = 4;
  s.moe_inter = 256;
  return s;
}

}  // namespace deepinfer::testing
