// The names a checkpoint may give an official tensor (engine/model/tensor_names.h): transformers'
// module names for each family the V4 checkpoint holds, and the order the loader tries them in.
#include "engine/model/tensor_names.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace deepinfer {
namespace {

TEST(TensorNamesTest, TransformersModuleNames) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"embed.weight", "embed_tokens.weight"},
      {"head.weight", "lm_head.weight"},
      {"hc_head_base", "hc_head.hc_base"},
      {"layers.0.attn_norm.weight", "layers.0.input_layernorm.weight"},
      {"layers.7.hc_ffn_scale", "layers.7.ffn_hc.scale"},
      {"layers.3.attn.wq_a.weight", "layers.3.self_attn.q_a_proj.weight"},
      {"layers.3.attn.wq_a.scale", "layers.3.self_attn.q_a_proj.scale"},
      {"layers.3.attn.q_norm.weight", "layers.3.self_attn.q_a_norm.weight"},
      {"layers.2.attn.attn_sink", "layers.2.self_attn.sinks"},
      {"layers.2.attn.compressor.ape", "layers.2.self_attn.compressor.position_bias"},
      {"layers.2.attn.indexer.compressor.ape",
       "layers.2.self_attn.compressor.indexer.position_bias"},
      {"layers.2.attn.indexer.weights_proj.weight",
       "layers.2.self_attn.compressor.indexer.scorer.weights_proj.weight"},
      {"layers.2.attn.indexer.wq_b.weight",
       "layers.2.self_attn.compressor.indexer.q_b_proj.weight"},
      {"layers.4.ffn.gate.bias", "layers.4.mlp.gate.e_score_correction_bias"},
      {"layers.4.ffn.shared_experts.w2.weight", "layers.4.mlp.shared_experts.down_proj.weight"},
  };
  for (const auto& [official, hf] : cases) {
    EXPECT_EQ(TransformersTensorName(official), hf) << official;
  }
}

TEST(TensorNamesTest, CandidatesInLookupOrder) {
  EXPECT_EQ(TensorNameCandidates("layers.5.attn.kv_norm.weight"),
            (std::vector<std::string>{
                "layers.5.attn.kv_norm.weight", "model.layers.5.attn.kv_norm.weight",
                "model.layers.5.attn.norm.weight", "layers.5.self_attn.kv_norm.weight",
                "model.layers.5.self_attn.kv_norm.weight"}));
  // transformers keeps its LM head unprefixed.
  const auto head = TensorNameCandidates("head.weight");
  EXPECT_NE(std::find(head.begin(), head.end(), "lm_head.weight"), head.end());
  EXPECT_EQ(std::find(head.begin(), head.end(), "model.lm_head.weight"), head.end());
}

}  // namespace
}  // namespace deepinfer
