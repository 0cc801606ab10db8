#include "engine/model/config.h"

#include <simdjson.h>

#include <cmath>
#include <fstream>
#include <sstream>

namespace deepinfer {

const char* AttnTypeName(AttnType t) {
  switch (t) {
    case AttnType::kSliding:
      return "sliding";
    case AttnType::kCsa:
      return "csa";
    case AttnType::kHca:
      return "hca";
  }
  return "?";
}

namespace {

using simdjson::dom::element;
using simdjson::dom::object;

// Reads typed keys from a JSON object and records the first error, naming the key.
class Reader {
 public:
  Reader(object obj, std::string origin) : obj_(obj), origin_(std::move(origin)) {}

  bool Has(const char* key) const {
    element e;
    return obj_[key].get(e) == simdjson::SUCCESS && !e.is_null();
  }
  element Get(const char* key) const {
    element e;
    if (obj_[key].get(e) != simdjson::SUCCESS) return element();
    return e;
  }

  void Int(const char* key, int* out, bool required) {
    if (!Has(key)) return Missing(key, required);
    int64_t v;
    double d;
    if (Get(key).get(v) == simdjson::SUCCESS) {
      *out = static_cast<int>(v);
    } else if (Get(key).get(d) == simdjson::SUCCESS && d == std::floor(d)) {
      *out = static_cast<int>(d);
    } else {
      Fail(std::string(key) + " must be an integer");
    }
  }
  void Double(const char* key, double* out, bool required) {
    if (!Has(key)) return Missing(key, required);
    double d;
    int64_t i;
    if (Get(key).get(d) == simdjson::SUCCESS)
      *out = d;
    else if (Get(key).get(i) == simdjson::SUCCESS)
      *out = static_cast<double>(i);
    else
      Fail(std::string(key) + " must be a number");
  }
  void Bool(const char* key, bool* out) {
    if (!Has(key)) return;
    if (Get(key).get(*out) != simdjson::SUCCESS) Fail(std::string(key) + " must be a boolean");
  }
  void String(const char* key, std::string* out) {
    if (!Has(key)) return;
    std::string_view s;
    if (Get(key).get(s) != simdjson::SUCCESS) return Fail(std::string(key) + " must be a string");
    *out = std::string(s);
  }
  void Fail(const std::string& why) {
    if (status_.ok()) status_ = InvalidArgument(origin_ + ": " + why);
  }
  Status status() const { return status_; }

 private:
  void Missing(const char* key, bool required) {
    if (required) Fail(std::string("missing required key '") + key + "'");
  }
  object obj_;
  std::string origin_;
  Status status_;
};

void ReadYarn(Reader& r, object rs, YarnParams* y) {
  Reader s(rs, "rope");
  std::string type;
  s.String("type", &type);
  if (type.empty()) s.String("rope_type", &type);
  if (type == "yarn") {
    y->enabled = true;
    s.Double("factor", &y->factor, true);
    s.Double("original_max_position_embeddings", &y->original_max_position, true);
    s.Double("beta_fast", &y->beta_fast, false);
    s.Double("beta_slow", &y->beta_slow, false);
  } else if (!type.empty() && type != "default") {
    r.Fail("unsupported rope type '" + type + "' (expected yarn or default)");
  }
  if (!s.status().ok()) r.Fail(s.status().message());
}

void ReadLayerSchedule(Reader& r, ModelConfig* c) {
  element e;
  simdjson::dom::array arr;
  if (r.Has("compress_ratios")) {  // official layout: one ratio per layer, then the MTP layers
    c->source_layout = "official";
    if (r.Get("compress_ratios").get(arr)) return r.Fail("compress_ratios must be an array");
    std::vector<int> ratios;
    for (auto v : arr) {
      int64_t x;
      if (v.get(x)) return r.Fail("compress_ratios entries must be integers");
      ratios.push_back(static_cast<int>(x));
    }
    if (static_cast<int>(ratios.size()) < c->num_layers) {
      return r.Fail("compress_ratios has " + std::to_string(ratios.size()) +
                    " entries for num_hidden_layers " + std::to_string(c->num_layers));
    }
    for (int l = 0; l < c->num_layers; ++l) {
      int m = ratios[l];
      if (m == 0)
        c->attn_types.push_back(AttnType::kSliding);
      else if (m == c->csa_rate)
        c->attn_types.push_back(AttnType::kCsa);
      else if (m == c->hca_rate)
        c->attn_types.push_back(AttnType::kHca);
      else
        return r.Fail("compress_ratios[" + std::to_string(l) + "] = " + std::to_string(m) +
                      " is not supported (0, 4 or 128)");
      c->compress_ratio.push_back(m);
    }
    for (size_t l = c->num_layers; l < ratios.size(); ++l) {
      if (ratios[l] != 0) r.Fail("MTP layers must have compress ratio 0");
    }
    int n_hash = 0;
    r.Int("num_hash_layers", &n_hash, false);
    for (int l = 0; l < c->num_layers; ++l) c->hash_routed.push_back(l < n_hash);
    return;
  }
  if (!r.Has("layer_types")) return r.Fail("needs compress_ratios or layer_types");
  c->source_layout = "transformers";
  object rates;
  if (r.Has("compress_rates") && r.Get("compress_rates").get(rates) == simdjson::SUCCESS) {
    Reader rr(rates, "compress_rates");
    rr.Int("compressed_sparse_attention", &c->csa_rate, false);
    rr.Int("heavily_compressed_attention", &c->hca_rate, false);
  }
  if (r.Get("layer_types").get(arr)) return r.Fail("layer_types must be an array");
  for (auto v : arr) {
    std::string_view s;
    if (v.get(s)) return r.Fail("layer_types entries must be strings");
    if (s == "sliding_attention")
      c->attn_types.push_back(AttnType::kSliding);
    else if (s == "compressed_sparse_attention")
      c->attn_types.push_back(AttnType::kCsa);
    else if (s == "heavily_compressed_attention")
      c->attn_types.push_back(AttnType::kHca);
    else
      return r.Fail("unknown layer type '" + std::string(s) + "'");
  }
  for (AttnType t : c->attn_types) {
    c->compress_ratio.push_back(t == AttnType::kSliding ? 0
                                : t == AttnType::kCsa   ? c->csa_rate
                                                        : c->hca_rate);
  }
  if (r.Has("mlp_layer_types")) {
    if (r.Get("mlp_layer_types").get(arr)) return r.Fail("mlp_layer_types must be an array");
    for (auto v : arr) {
      std::string_view s;
      if (v.get(s) || (s != "hash_moe" && s != "moe")) {
        return r.Fail("mlp_layer_types entries must be 'hash_moe' or 'moe'");
      }
      c->hash_routed.push_back(s == "hash_moe");
    }
  } else {
    int n_hash = 3;
    r.Int("num_hash_layers", &n_hash, false);
    for (int l = 0; l < c->num_layers; ++l) c->hash_routed.push_back(l < n_hash);
  }
  if (static_cast<int>(c->attn_types.size()) != c->num_layers ||
      static_cast<int>(c->hash_routed.size()) != c->num_layers) {
    r.Fail("layer_types and mlp_layer_types must have num_hidden_layers entries");
  }
}

void ReadRope(Reader& r, ModelConfig* c) {
  r.Double("rope_theta", &c->rope_theta, false);
  r.Double("compress_rope_theta", &c->compress_rope_theta, false);
  object rp;
  if (r.Has("rope_parameters") && r.Get("rope_parameters").get(rp) == simdjson::SUCCESS) {
    object main, compress;
    if (rp["main"].get(main) == simdjson::SUCCESS) {
      Reader m(main, "rope_parameters.main");
      m.Double("rope_theta", &c->rope_theta, false);
    }
    if (rp["compress"].get(compress) == simdjson::SUCCESS) {
      Reader m(compress, "rope_parameters.compress");
      m.Double("rope_theta", &c->compress_rope_theta, false);
      ReadYarn(r, compress, &c->yarn);
      return;
    }
    ReadYarn(r, rp, &c->yarn);
    return;
  }
  object rs;
  if (r.Has("rope_scaling") && r.Get("rope_scaling").get(rs) == simdjson::SUCCESS) {
    ReadYarn(r, rs, &c->yarn);
  }
}

Status Validate(const ModelConfig& c, const std::string& origin) {
  auto bad = [&](const std::string& why) { return InvalidArgument(origin + ": " + why); };
  auto positive = [&](const char* name, long long v) -> Status {
    if (v <= 0) return bad(std::string(name) + " must be positive, got " + std::to_string(v));
    return Status::Ok();
  };
  DI_RETURN_IF_ERROR(positive("vocab_size", c.vocab_size));
  DI_RETURN_IF_ERROR(positive("hidden_size", c.hidden_size));
  DI_RETURN_IF_ERROR(positive("num_hidden_layers", c.num_layers));
  DI_RETURN_IF_ERROR(positive("num_attention_heads", c.num_heads));
  DI_RETURN_IF_ERROR(positive("head_dim", c.head_dim));
  DI_RETURN_IF_ERROR(positive("q_lora_rank", c.q_lora_rank));
  DI_RETURN_IF_ERROR(positive("o_lora_rank", c.o_lora_rank));
  DI_RETURN_IF_ERROR(positive("o_groups", c.o_groups));
  DI_RETURN_IF_ERROR(positive("sliding_window", c.sliding_window));
  DI_RETURN_IF_ERROR(positive("n_routed_experts", c.n_routed_experts));
  DI_RETURN_IF_ERROR(positive("num_experts_per_tok", c.num_experts_per_tok));
  DI_RETURN_IF_ERROR(positive("moe_intermediate_size", c.moe_intermediate_size));
  DI_RETURN_IF_ERROR(positive("hc_mult", c.hc_mult));
  DI_RETURN_IF_ERROR(positive("hc_sinkhorn_iters", c.hc_sinkhorn_iters));
  if (c.num_heads % c.o_groups != 0) return bad("num_attention_heads must divide by o_groups");
  if (c.rope_dim <= 0 || c.rope_dim % 2 != 0 || c.rope_dim > c.head_dim) {
    return bad("qk_rope_head_dim must be even and in (0, head_dim]");
  }
  if (c.num_experts_per_tok > c.n_routed_experts) return bad("num_experts_per_tok > experts");
  bool any_csa = false;
  for (AttnType t : c.attn_types) any_csa = any_csa || t == AttnType::kCsa;
  if (any_csa) {
    DI_RETURN_IF_ERROR(positive("index_n_heads", c.index_n_heads));
    DI_RETURN_IF_ERROR(positive("index_head_dim", c.index_head_dim));
    DI_RETURN_IF_ERROR(positive("index_topk", c.index_topk));
    if (c.rope_dim > c.index_head_dim) return bad("qk_rope_head_dim exceeds index_head_dim");
  }
  if (c.csa_rate <= 0 || c.hca_rate <= 0) return bad("compress rates must be positive");
  if (c.yarn.enabled && (c.yarn.factor <= 0 || c.yarn.original_max_position <= 0)) {
    return bad("rope yarn factor and original_max_position_embeddings must be positive");
  }
  if (c.num_mtp_layers < 0 || c.num_mtp_layers > 1) {
    return bad("num_nextn_predict_layers must be 0 or 1 (multi-stage drafters are not supported)");
  }
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> ParseModelConfig(const std::string& json_text, const std::string& origin) {
  simdjson::dom::parser parser;
  element root;
  object obj;
  if (parser.parse(json_text).get(root) || root.get(obj)) {
    return InvalidArgument(origin + ": not a JSON object");
  }
  ModelConfig c;
  Reader r(obj, origin);
  r.Int("vocab_size", &c.vocab_size, true);
  r.Int("hidden_size", &c.hidden_size, true);
  r.Int("num_hidden_layers", &c.num_layers, true);
  r.Int("num_attention_heads", &c.num_heads, true);
  r.Int("head_dim", &c.head_dim, true);
  c.rope_dim = 64;
  if (r.Has("qk_rope_head_dim")) {
    r.Int("qk_rope_head_dim", &c.rope_dim, true);
  } else if (r.Has("partial_rotary_factor")) {
    double f = 0;
    r.Double("partial_rotary_factor", &f, true);
    c.rope_dim = static_cast<int>(c.head_dim * f);
  }
  r.Int("q_lora_rank", &c.q_lora_rank, true);
  r.Int("o_lora_rank", &c.o_lora_rank, true);
  r.Int("o_groups", &c.o_groups, true);
  r.Int("sliding_window", &c.sliding_window, false);
  double mpe = 0;
  r.Double("max_position_embeddings", &mpe, false);
  c.max_position_embeddings = static_cast<long long>(mpe);
  r.Int("index_n_heads", &c.index_n_heads, false);
  r.Int("index_head_dim", &c.index_head_dim, false);
  r.Int("index_topk", &c.index_topk, false);
  r.Int("n_routed_experts", &c.n_routed_experts, true);
  r.Int("num_experts_per_tok", &c.num_experts_per_tok, true);
  r.Int("n_shared_experts", &c.n_shared_experts, false);
  r.Int("moe_intermediate_size", &c.moe_intermediate_size, true);
  std::string scoring = "sqrtsoftplus";
  r.String("scoring_func", &scoring);
  if (scoring == "sqrtsoftplus")
    c.scoring_func = ScoringFunc::kSqrtSoftplus;
  else if (scoring == "sigmoid")
    c.scoring_func = ScoringFunc::kSigmoid;
  else if (scoring == "softmax")
    c.scoring_func = ScoringFunc::kSoftmax;
  else
    r.Fail("unsupported scoring_func '" + scoring + "'");
  r.Bool("norm_topk_prob", &c.norm_topk_prob);
  r.Double("routed_scaling_factor", &c.routed_scaling_factor, false);
  r.Double("swiglu_limit", &c.swiglu_limit, false);
  r.Int("hc_mult", &c.hc_mult, false);
  r.Int("hc_sinkhorn_iters", &c.hc_sinkhorn_iters, false);
  r.Double("hc_eps", &c.hc_eps, false);
  r.Double("rms_norm_eps", &c.rms_norm_eps, false);
  r.Int("num_nextn_predict_layers", &c.num_mtp_layers, false);
  r.Bool("tie_word_embeddings", &c.tie_word_embeddings);
  r.Int("bos_token_id", &c.bos_token_id, false);
  // A list of eos ids keeps the default; Has() first, Get() of a missing key is unusable.
  if (r.Has("eos_token_id") && r.Get("eos_token_id").is_int64()) {
    r.Int("eos_token_id", &c.eos_token_id, false);
  }
  r.String("expert_dtype", &c.expert_dtype);
  object q;
  if (r.Has("quantization_config") && r.Get("quantization_config").get(q) == simdjson::SUCCESS) {
    Reader qr(q, origin + ": quantization_config");
    std::string method, fmt;
    qr.String("quant_method", &method);
    qr.String("fmt", &fmt);
    if (method != "fp8") r.Fail("quantization_config.quant_method '" + method + "' unsupported");
    if (!fmt.empty() && fmt != "e4m3") r.Fail("quantization_config.fmt must be e4m3");
    c.fp8_dense = true;
    simdjson::dom::array bs;
    if (q["weight_block_size"].get(bs) == simdjson::SUCCESS) {
      std::vector<int64_t> v;
      for (auto x : bs) {
        int64_t i;
        if (!x.get(i)) v.push_back(i);
      }
      if (v.size() != 2 || v[0] <= 0 || v[1] <= 0) {
        r.Fail("quantization_config.weight_block_size must be two positive integers");
      } else {
        c.fp8_block_out = static_cast<int>(v[0]);
        c.fp8_block_in = static_cast<int>(v[1]);
      }
    }
  }
  if (!r.status().ok()) return r.status();
  ReadRope(r, &c);
  ReadLayerSchedule(r, &c);
  if (!r.status().ok()) return r.status();
  DI_RETURN_IF_ERROR(Validate(c, origin));
  return c;
}

Result<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseModelConfig(ss.str(), path);
}

}  // namespace deepinfer
