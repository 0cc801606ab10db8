// ParseModelConfig on the official DeepSeek-V4-Flash layout (reference §1.1/1.2) and on the
// config.json transformers 5.17 wrote for the tiny golden model; errors name the bad key.
#include "engine/model/config.h"

#include <gtest/gtest.h>
#include <stdio.h>

#include <map>
#include <string>

namespace deepinfer {
namespace {

// The official V4-Flash config.json keys as raw JSON values; tests override or drop entries.
std::map<std::string, std::string> FlashKeys() {
  std::string ratios = "[0, 0";
  for (int l = 2; l < 43; ++l) ratios += l % 2 == 0 ? ", 4" : ", 128";
  ratios += ", 0]";  // entry 43: the MTP block
  // clang-format off
  return {
      {"architectures", R"(["DeepseekV4ForCausalLM"])"}, {"model_type", R"("deepseek_v4")"},
      {"vocab_size", "129280"}, {"hidden_size", "4096"}, {"num_hidden_layers", "43"},
      {"num_attention_heads", "64"}, {"num_key_value_heads", "1"}, {"head_dim", "512"},
      {"qk_rope_head_dim", "64"}, {"q_lora_rank", "1024"}, {"o_lora_rank", "1024"},
      {"o_groups", "8"}, {"sliding_window", "128"}, {"rope_theta", "10000"},
      {"compress_rope_theta", "160000"},
      {"rope_scaling", R"({"type": "yarn", "factor": 16, "original_max_position_embeddings":
                         65536, "beta_fast": 32, "beta_slow": 1})"},
      {"max_position_embeddings", "1048576"}, {"compress_ratios", ratios},
      {"index_n_heads", "64"}, {"index_head_dim", "128"}, {"index_topk", "512"},
      {"n_routed_experts", "256"}, {"num_experts_per_tok", "6"}, {"n_shared_experts", "1"},
      {"moe_intermediate_size", "2048"}, {"scoring_func", R"("sqrtsoftplus")"},
      {"topk_method", R"("noaux_tc")"}, {"norm_topk_prob", "true"},
      {"routed_scaling_factor", "1.5"}, {"num_hash_layers", "3"}, {"swiglu_limit", "10.0"},
      {"hc_mult", "4"}, {"hc_sinkhorn_iters", "20"}, {"hc_eps", "1e-6"},
      {"rms_norm_eps", "1e-6"}, {"num_nextn_predict_layers", "1"}, {"hidden_act", R"("silu")"},
      {"tie_word_embeddings", "false"}, {"bos_token_id", "0"}, {"eos_token_id", "1"},
      {"torch_dtype", R"("bfloat16")"}, {"expert_dtype", R"("fp4")"},
      {"quantization_config", R"({"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
          "activation_scheme": "dynamic", "weight_block_size": [128, 128]})"},
  };
  // clang-format on
}

std::string ToJson(const std::map<std::string, std::string>& keys) {
  std::string s = "{";
  for (const auto& [k, v] : keys) s += (s.size() > 1 ? ",\n\"" : "\"") + k + "\": " + v;
  return s + "}";
}

// The config.json saved by transformers for tests/data/golden/tiny-bf16.
std::string TinyTransformersConfig() {
  const std::string cmd = std::string("tar xzf ") + DEEPINFER_TEST_DATA +
                          "/golden/tiny-bf16/save_pretrained.tgz -O config.json";
  FILE* p = popen(cmd.c_str(), "r");
  std::string s;
  if (p == nullptr) return s;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) s.append(buf, n);
  pclose(p);
  return s;
}

void Replace(std::string& s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  s.replace(at, from.size(), to);
}

TEST(ConfigTest, OfficialFlashLayout) {
  auto r = ParseModelConfig(ToJson(FlashKeys()), "flash/config.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ModelConfig& c = r.value();
  EXPECT_EQ(c.source_layout, "official");
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_layers, 43);
  EXPECT_EQ(c.num_heads, 64);
  EXPECT_EQ(c.head_dim, 512);
  EXPECT_EQ(c.rope_dim, 64);
  EXPECT_EQ(c.q_lora_rank, 1024);
  EXPECT_EQ(c.o_lora_rank, 1024);
  EXPECT_EQ(c.o_groups, 8);
  EXPECT_EQ(c.q_heads_per_group(), 8);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.compress_rope_theta, 160000.0);
  EXPECT_TRUE(c.yarn.enabled);
  EXPECT_EQ(c.yarn.factor, 16.0);
  EXPECT_EQ(c.yarn.original_max_position, 65536.0);
  EXPECT_EQ(c.yarn.beta_fast, 32.0);
  EXPECT_EQ(c.yarn.beta_slow, 1.0);
  EXPECT_EQ(c.max_position_embeddings, 1048576);
  EXPECT_EQ(c.csa_rate, 4);
  EXPECT_EQ(c.hca_rate, 128);
  EXPECT_EQ(c.index_n_heads, 64);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 512);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.moe_intermediate_size, 2048);
  EXPECT_EQ(c.scoring_func, ScoringFunc::kSqrtSoftplus);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.routed_scaling_factor, 1.5);
  EXPECT_EQ(c.swiglu_limit, 10.0);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.hc_sinkhorn_iters, 20);
  EXPECT_EQ(c.hc_eps, 1e-6);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.num_mtp_layers, 1);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_EQ(c.expert_dtype, "fp4");
  EXPECT_TRUE(c.fp8_dense);
  EXPECT_EQ(c.fp8_block_out, 128);
  EXPECT_EQ(c.fp8_block_in, 128);
  // §1.2: layers 0-1 sliding, then CSA on even and HCA on odd layers; hash routing on 0-2.
  ASSERT_EQ(c.attn_types.size(), 43u);
  ASSERT_EQ(c.compress_ratio.size(), 43u);
  ASSERT_EQ(c.hash_routed.size(), 43u);
  for (int l = 0; l < 43; ++l) {
    const AttnType want = l < 2 ? AttnType::kSliding : l % 2 == 0 ? AttnType::kCsa : AttnType::kHca;
    EXPECT_EQ(c.attn_types[l], want) << l;
    EXPECT_EQ(c.compress_ratio[l], l < 2 ? 0 : l % 2 == 0 ? 4 : 128) << l;
    EXPECT_EQ(c.hash_routed[l], l < 3) << l;
    EXPECT_EQ(c.has_compressor(l), l >= 2) << l;
  }
}

TEST(ConfigTest, OfficialVariants) {
  auto keys = FlashKeys();
  keys["quantization_config"] = R"({"quant_method": "fp8", "weight_block_size": [64, 32]})";
  keys["expert_dtype"] = R"("fp8")";
  keys["num_hash_layers"] = "0";
  keys["scoring_func"] = R"("sigmoid")";
  keys["norm_topk_prob"] = "false";
  keys.erase("rope_scaling");
  auto r = ParseModelConfig(ToJson(keys), "variant");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->fp8_block_out, 64);
  EXPECT_EQ(r->fp8_block_in, 32);
  EXPECT_EQ(r->expert_dtype, "fp8");
  EXPECT_EQ(r->scoring_func, ScoringFunc::kSigmoid);
  EXPECT_FALSE(r->norm_topk_prob);
  EXPECT_FALSE(r->yarn.enabled);
  for (bool h : r->hash_routed) EXPECT_FALSE(h);

  keys = FlashKeys();
  keys.erase("quantization_config");
  keys.erase("expert_dtype");
  r = ParseModelConfig(ToJson(keys), "bf16");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->fp8_dense);
  EXPECT_EQ(r->expert_dtype, "");

  // Optional keys may be absent (defaults) or, for eos_token_id, a list (keeps the default).
  keys = FlashKeys();
  keys.erase("eos_token_id");
  keys.erase("bos_token_id");
  r = ParseModelConfig(ToJson(keys), "no-eos");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->eos_token_id, 1);
  keys["eos_token_id"] = "[7, 8]";
  r = ParseModelConfig(ToJson(keys), "eos-list");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->eos_token_id, 1);
}

TEST(ConfigTest, TransformersLayout) {
  const std::string json = TinyTransformersConfig();
  ASSERT_NE(json.find("\"layer_types\""), std::string::npos) << "could not extract config.json";
  auto r = ParseModelConfig(json, "tiny/config.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ModelConfig& c = r.value();
  EXPECT_EQ(c.source_layout, "transformers");
  EXPECT_EQ(c.vocab_size, 128);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 6);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope_dim, 16);
  EXPECT_EQ(c.q_lora_rank, 96);
  EXPECT_EQ(c.o_lora_rank, 48);
  EXPECT_EQ(c.o_groups, 2);
  EXPECT_EQ(c.index_n_heads, 8);
  EXPECT_EQ(c.index_head_dim, 32);
  EXPECT_EQ(c.index_topk, 8);
  EXPECT_EQ(c.n_routed_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.moe_intermediate_size, 64);
  EXPECT_EQ(c.routed_scaling_factor, 1.5);
  EXPECT_EQ(c.swiglu_limit, 10.0);
  EXPECT_EQ(c.num_mtp_layers, 1);
  EXPECT_EQ(c.max_position_embeddings, 1048576);
  EXPECT_EQ(c.rope_theta, 10000.0);  // rope_parameters.main
  EXPECT_EQ(c.compress_rope_theta, 160000.0);
  EXPECT_TRUE(c.yarn.enabled);  // rope_parameters.compress, rope_type yarn
  EXPECT_EQ(c.yarn.factor, 16.0);
  EXPECT_EQ(c.yarn.original_max_position, 65536.0);
  EXPECT_EQ(c.yarn.beta_fast, 32.0);
  EXPECT_EQ(c.yarn.beta_slow, 1.0);
  EXPECT_EQ(c.csa_rate, 4);
  EXPECT_EQ(c.hca_rate, 128);
  EXPECT_FALSE(c.fp8_dense);
  using A = AttnType;
  EXPECT_EQ(c.attn_types,
            (std::vector<A>{A::kSliding, A::kSliding, A::kCsa, A::kHca, A::kCsa, A::kHca}));
  EXPECT_EQ(c.compress_ratio, (std::vector<int>{0, 0, 4, 128, 4, 128}));
  EXPECT_EQ(c.hash_routed, (std::vector<bool>{true, true, true, false, false, false}));

  // Without qk_rope_head_dim the rope width comes from partial_rotary_factor * head_dim.
  std::string j2 = json;
  Replace(j2, "\"qk_rope_head_dim\": 16,", "");
  Replace(j2, "\"partial_rotary_factor\": 0.25,\n  \"q_lora_rank\"",
          "\"partial_rotary_factor\": 0.5,\n  \"q_lora_rank\"");
  // Thetas come from rope_parameters, not the top-level keys.
  Replace(j2, "\"rope_theta\": 10000,\n      \"rope_type\": \"default\"",
          "\"rope_theta\": 20000,\n      \"rope_type\": \"default\"");
  Replace(j2, "\"rope_theta\": 160000,", "\"rope_theta\": 320000,");
  auto r2 = ParseModelConfig(j2, "tiny2");
  ASSERT_TRUE(r2.ok()) << r2.status().message();
  EXPECT_EQ(r2->rope_dim, 32);
  EXPECT_EQ(r2->rope_theta, 20000.0);
  EXPECT_EQ(r2->compress_rope_theta, 320000.0);
}

// Expects an InvalidArgument that names `origin` and contains every one of `words`.
void ExpectError(const std::map<std::string, std::string>& keys,
                 std::initializer_list<const char*> words) {
  auto r = ParseModelConfig(ToJson(keys), "bad/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("bad/config.json"), std::string::npos) << msg;
  for (const char* w : words) EXPECT_NE(msg.find(w), std::string::npos) << w << " in " << msg;
}

TEST(ConfigTest, Errors) {
  auto keys = FlashKeys();
  keys.erase("hidden_size");
  ExpectError(keys, {"missing", "hidden_size"});

  keys = FlashKeys();
  keys["hidden_size"] = R"("4096")";
  ExpectError(keys, {"hidden_size", "integer"});
  keys = FlashKeys();
  keys["norm_topk_prob"] = "1";
  ExpectError(keys, {"norm_topk_prob", "boolean"});

  keys = FlashKeys();
  std::string ratios = "[0, 0, 2";
  for (int l = 3; l < 44; ++l) ratios += ", 0";
  keys["compress_ratios"] = ratios + "]";
  ExpectError(keys, {"compress_ratios[2]", "2"});

  keys = FlashKeys();
  keys["compress_ratios"] = "[0, 4, 128]";  // fewer entries than layers
  ExpectError(keys, {"compress_ratios", "43"});

  keys = FlashKeys();
  keys["o_groups"] = "6";
  ExpectError(keys, {"o_groups"});

  keys = FlashKeys();
  keys["scoring_func"] = R"("relu")";
  ExpectError(keys, {"scoring_func", "relu"});

  auto bad = ParseModelConfig("[1, 2]", "arr.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer
