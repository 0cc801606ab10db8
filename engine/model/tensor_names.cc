#include "engine/model/tensor_names.h"

#include <regex>
#include <utility>

namespace deepinfer {
namespace {

// transformers' save_pretrained writes official names under "model." except for these three,
// which its reverse renaming gets wrong (observed with transformers 5.17.0; the head stays
// unprefixed as "head.weight").
std::string SavePretrainedName(const std::string& n) {
  static const std::vector<std::pair<std::regex, std::string>> kRules = {
      {std::regex(R"(^embed\.weight$)"), "embed_tokens.weight"},
      {std::regex(R"(^hc_head_(fn|base|scale)$)"), "hc_head.hc_$1"},
      {std::regex(R"(^layers\.(\d+)\.attn\.kv_norm\.)"), "layers.$1.attn.norm."},
  };
  std::string s = n;
  for (const auto& [re, target] : kRules) s = std::regex_replace(s, re, target);
  return s;
}

}  // namespace

std::string TransformersTensorName(const std::string& n) {
  static const std::vector<std::pair<std::regex, std::string>> kRules = [] {
    std::vector<std::pair<std::string, std::string>> r = {
        {R"(^embed\.weight$)", "embed_tokens.weight"},
        {R"(^head\.weight$)", "lm_head.weight"},
        {R"(^hc_head_fn$)", "hc_head.hc_fn"},
        {R"(^hc_head_base$)", "hc_head.hc_base"},
        {R"(^hc_head_scale$)", "hc_head.hc_scale"},
        {R"(^layers\.(\d+)\.attn_norm\.)", "layers.$1.input_layernorm."},
        {R"(^layers\.(\d+)\.ffn_norm\.)", "layers.$1.post_attention_layernorm."},
        {R"(^layers\.(\d+)\.hc_(attn|ffn)_(fn|base|scale)$)", "layers.$1.$2_hc.$3"},
        {R"(^layers\.(\d+)\.attn\.)", "layers.$1.self_attn."},
        {R"(^layers\.(\d+)\.ffn\.)", "layers.$1.mlp."},
        {R"(\.self_attn\.attn_sink$)", ".self_attn.sinks"},
        {R"(\.self_attn\.indexer\.compressor\.norm\.)", ".self_attn.compressor.indexer.kv_norm."},
        {R"(\.self_attn\.indexer\.compressor\.ape$)",
         ".self_attn.compressor.indexer.position_bias"},
        {R"(\.self_attn\.indexer\.compressor\.)", ".self_attn.compressor.indexer."},
        {R"(\.self_attn\.indexer\.weights_proj\.)",
         ".self_attn.compressor.indexer.scorer.weights_proj."},
        {R"(\.self_attn\.indexer\.)", ".self_attn.compressor.indexer."},
        {R"(\.self_attn\.compressor\.norm\.)", ".self_attn.compressor.kv_norm."},
        {R"(\.self_attn\.compressor\.ape$)", ".self_attn.compressor.position_bias"},
        {R"(\.wq_a\.)", ".q_a_proj."},
        {R"(\.wq_b\.)", ".q_b_proj."},
        {R"(\.wkv\.)", ".kv_proj."},
        {R"(\.wgate\.)", ".gate_proj."},
        {R"(\.wo_a\.)", ".o_a_proj."},
        {R"(\.wo_b\.)", ".o_b_proj."},
        {R"(\.self_attn\.q_norm\.)", ".self_attn.q_a_norm."},
        {R"(\.mlp\.gate\.bias$)", ".mlp.gate.e_score_correction_bias"},
        {R"(\.shared_experts\.w1\.)", ".shared_experts.gate_proj."},
        {R"(\.shared_experts\.w2\.)", ".shared_experts.down_proj."},
        {R"(\.shared_experts\.w3\.)", ".shared_experts.up_proj."},
    };
    std::vector<std::pair<std::regex, std::string>> out;
    for (auto& [p, t] : r) out.emplace_back(std::regex(p), t);
    return out;
  }();
  std::string s = n;
  for (const auto& [re, target] : kRules) s = std::regex_replace(s, re, target);
  return s;
}

std::vector<std::string> TensorNameCandidates(const std::string& official) {
  const std::string hf = TransformersTensorName(official);
  std::vector<std::string> c = {official, "model." + official,
                                "model." + SavePretrainedName(official), hf};
  if (hf.rfind("lm_head", 0) != 0) c.push_back("model." + hf);
  return c;
}

}  // namespace deepinfer
