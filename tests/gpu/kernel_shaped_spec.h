// The tiny checkpoint the device-forward GPU tests share: random weights with the production
// kernels' shapes (head_dim 512, 64 indexer heads of 128, FP8 dense weights, FP4 experts), small
// enough for the CPU forward to serve as the reference in seconds.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "engine/model/tiny_checkpoint.h"
#include "engine/model/weights.h"
#include "tests/unit/test_util.h"

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

/// The checkpoint of KernelShapedSpec(seed) written to `dir` and loaded; null, with the reason
/// reported as a test failure, when either fails.
inline std::unique_ptr<Checkpoint> KernelShapedCheckpoint(const TempDir& dir, uint64_t seed) {
  const Status made = MakeTinyCheckpoint(KernelShapedSpec(seed), dir.path());
  if (!made.ok()) {
    ADD_FAILURE() << made.ToString();
    return nullptr;
  }
  auto ck = LoadCheckpoint(dir.path());
  if (!ck.ok()) {
    ADD_FAILURE() << ck.status().ToString();
    return nullptr;
  }
  return std::move(ck).value();
}

}  // namespace deepinfer::testing
