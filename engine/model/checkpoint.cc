// Checkpoint loading: every tensor found under one of its names (engine/model/tensor_names.h) and
// its dtype and shape validated before the model runs.
#include <algorithm>
#include <cmath>

#include "engine/model/quant.h"
#include "engine/model/tensor_names.h"
#include "engine/model/weights.h"

namespace deepinfer {
namespace {

class Loader {
 public:
  Loader(const ModelConfig& c, const TensorStore& store) : c_(c), store_(store) {}

  // Finds a tensor under its official name or one of the transformers spellings.
  const TensorView* Find(const std::string& official) {
    for (const std::string& cand : TensorNameCandidates(official)) {
      if (const TensorView* t = store_.Find(cand)) {
        if (cand != official && naming_ == "official") naming_ = "transformers";
        return t;
      }
    }
    return nullptr;
  }

  bool Exists(const std::string& official) { return Find(official) != nullptr; }

  void Error(const std::string& msg) {
    if (errors_.size() < 20) errors_.push_back(msg);
    ++error_count_;
  }

  std::vector<float> Vector(const std::string& name, int64_t n) { return Tensor(name, {n}); }

  std::vector<float> Tensor(const std::string& name, std::vector<int64_t> shape) {
    const TensorView* t = Find(name);
    if (t == nullptr) return Missing(name), std::vector<float>{};
    // A one-element parameter may be stored as a scalar (shape []).
    const bool scalar_ok = shape == std::vector<int64_t>{1} && t->shape.empty();
    if (t->shape != shape && !scalar_ok) {
      Error("tensor '" + name + "' in " + *t->file + " has shape " + t->ShapeString() +
            ", expected " + ShapeStr(shape));
      return {};
    }
    std::vector<float> v(t->numel());
    switch (t->dtype) {
      case DType::kF32:
        std::memcpy(v.data(), t->data, v.size() * 4);
        break;
      case DType::kBF16:
        for (size_t i = 0; i < v.size(); ++i) {
          uint16_t b;
          std::memcpy(&b, t->data + 2 * i, 2);
          v[i] = Bf16ToF32(b);
        }
        break;
      case DType::kF16:
        for (size_t i = 0; i < v.size(); ++i) {
          uint16_t b;
          std::memcpy(&b, t->data + 2 * i, 2);
          v[i] = F16ToF32(b);
        }
        break;
      default:
        Error("tensor '" + name + "' in " + *t->file + " has dtype " +
              std::string(DTypeName(t->dtype)) + ", expected F32, BF16 or F16");
        return {};
    }
    return v;
  }

  LinearWeight Linear(const std::string& name, int64_t out, int64_t in) {
    LinearWeight w;
    w.name = name;
    w.out = out;
    w.in = in;
    const TensorView* t = Find(name + ".weight");
    if (t == nullptr) return Missing(name + ".weight"), w;
    const std::string where = "tensor '" + t->name + "' in " + *t->file;
    w.data = t->data;
    switch (t->dtype) {
      case DType::kF32:
        w.format = WeightFormat::kF32;
        break;
      case DType::kBF16:
        w.format = WeightFormat::kBF16;
        break;
      case DType::kF16:
        w.format = WeightFormat::kF16;
        break;
      case DType::kF8E4M3:
        w.format = WeightFormat::kFp8Block;
        break;
      case DType::kI8:
      case DType::kU8:
        w.format = WeightFormat::kFp4Block;
        break;
      default:
        Error(where + " has unsupported dtype " + std::string(DTypeName(t->dtype)));
        return w;
    }
    const std::vector<int64_t> stored = w.format == WeightFormat::kFp4Block
                                            ? std::vector<int64_t>{out, in / 2}
                                            : std::vector<int64_t>{out, in};
    if (w.format == WeightFormat::kFp4Block && in % 32 != 0) {
      Error(where + ": FP4 weights need an input width divisible by 32, got " + std::to_string(in));
      return w;
    }
    if (t->shape != stored) {
      Error(where + " has shape " + t->ShapeString() + ", expected " + ShapeStr(stored) +
            (w.format == WeightFormat::kFp4Block ? " (FP4 packs two values per byte)" : ""));
      return w;
    }
    if (!w.quantized()) return w;
    std::vector<int64_t> scale_shape;
    if (w.format == WeightFormat::kFp8Block) {
      w.block_out = c_.fp8_block_out;
      w.block_in = c_.fp8_block_in;
      scale_shape = {(out + w.block_out - 1) / w.block_out, (in + w.block_in - 1) / w.block_in};
    } else {
      w.block_out = 1;
      w.block_in = 32;
      scale_shape = {out, in / 32};
    }
    const TensorView* s = Find(name + ".scale");
    if (s == nullptr) s = Find(name + ".weight_scale_inv");
    if (s == nullptr) s = Find(name + ".weight_scale");
    if (s == nullptr) {
      Error(where + " is " + std::string(DTypeName(t->dtype)) + " but its block scales '" + name +
            ".scale' are missing");
      return w;
    }
    if (s->shape != scale_shape) {
      Error("scale tensor '" + s->name + "' in " + *s->file + " has shape " + s->ShapeString() +
            ", expected " + ShapeStr(scale_shape));
      return w;
    }
    if (s->dtype != DType::kF8E8M0 && s->dtype != DType::kF32 && s->dtype != DType::kU8) {
      Error("scale tensor '" + s->name + "' in " + *s->file + " has dtype " +
            std::string(DTypeName(s->dtype)) + ", expected F8_E8M0 or F32");
      return w;
    }
    w.scale = s->data;
    w.scale_dtype = s->dtype == DType::kU8 ? DType::kF8E8M0 : s->dtype;
    return w;
  }

  // Expert e of an MoE layer: per-expert tensors (official) or transformers' stacked tensors.
  FfnWeights Expert(const std::string& prefix, int e, int64_t hidden, int64_t inter) {
    const std::string p = prefix + ".experts." + std::to_string(e);
    if (Exists(p + ".w1.weight") || !Stacked(prefix)) {
      return {Linear(p + ".w1", inter, hidden), Linear(p + ".w2", hidden, inter),
              Linear(p + ".w3", inter, hidden)};
    }
    return StackedExpert(prefix, e, hidden, inter);
  }

  void Missing(const std::string& name) {
    Error("tensor '" + name + "' is missing from the checkpoint");
  }

  Status Finish() const {
    if (error_count_ == 0) return Status::Ok();
    std::string msg = std::to_string(error_count_) + " checkpoint problem(s):";
    for (const auto& e : errors_) msg += "\n  " + e;
    if (error_count_ > errors_.size()) msg += "\n  ...";
    return InvalidArgument(msg);
  }
  const std::string& naming() const { return naming_; }

 private:
  static std::string ShapeStr(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
  }

  bool Stacked(const std::string& prefix) {
    return Find(prefix + ".experts.gate_up_proj") != nullptr;
  }

  FfnWeights StackedExpert(const std::string& prefix, int e, int64_t hidden, int64_t inter) {
    FfnWeights f;
    const TensorView* gu = Find(prefix + ".experts.gate_up_proj");
    const TensorView* dn = Find(prefix + ".experts.down_proj");
    const int64_t n_exp = c_.n_routed_experts;
    if (dn == nullptr) return Missing(prefix + ".experts.down_proj"), f;
    if (gu->shape != std::vector<int64_t>{n_exp, 2 * inter, hidden} ||
        dn->shape != std::vector<int64_t>{n_exp, hidden, inter} ||
        (gu->dtype != DType::kF32 && gu->dtype != DType::kBF16) || gu->dtype != dn->dtype) {
      Error("stacked expert tensors of " + prefix + " in " + *gu->file +
            " must be F32/BF16 [experts, 2*inter, hidden] and [experts, hidden, inter]");
      return f;
    }
    const WeightFormat fmt = gu->dtype == DType::kF32 ? WeightFormat::kF32 : WeightFormat::kBF16;
    const size_t es = DTypeSize(gu->dtype);
    auto view = [&](const uint8_t* base, int64_t out, int64_t in, const std::string& name) {
      LinearWeight w;
      w.format = fmt;
      w.out = out;
      w.in = in;
      w.data = base;
      w.name = name;
      return w;
    };
    const uint8_t* g = gu->data + static_cast<size_t>(e) * 2 * inter * hidden * es;
    const std::string p = prefix + ".experts." + std::to_string(e);
    f.w1 = view(g, inter, hidden, p + ".w1");
    f.w3 = view(g + inter * hidden * es, inter, hidden, p + ".w3");
    f.w2 = view(dn->data + static_cast<size_t>(e) * hidden * inter * es, hidden, inter, p + ".w2");
    return f;
  }

  const ModelConfig& c_;
  const TensorStore& store_;
  std::vector<std::string> errors_;
  size_t error_count_ = 0;
  std::string naming_ = "official";
};

CompressorWeights LoadCompressor(Loader& L, const std::string& p, int width, int ratio,
                                 bool overlap, int hidden) {
  CompressorWeights c;
  c.width = width;
  c.ratio = ratio;
  c.overlap = overlap;
  const int proj = overlap ? 2 * width : width;
  c.wkv = L.Linear(p + ".wkv", proj, hidden);
  c.wgate = L.Linear(p + ".wgate", proj, hidden);
  c.ape = L.Tensor(p + ".ape", {ratio, proj});
  c.norm = L.Vector(p + ".norm.weight", width);
  return c;
}

LayerWeights LoadLayer(Loader& L, const ModelConfig& c, const std::string& p, AttnType type,
                       bool hash, int ratio) {
  LayerWeights w;
  w.type = type;
  w.ratio = ratio;
  w.hash_routed = hash;
  const int64_t d = c.hidden_size, n = c.hc_mult, mix = (2 + n) * n;
  for (auto [unit, hc] : {std::pair{"attn", &w.hc_attn}, std::pair{"ffn", &w.hc_ffn}}) {
    hc->fn = L.Tensor(p + ".hc_" + unit + "_fn", {mix, n * d});
    hc->base = L.Vector(p + ".hc_" + unit + "_base", mix);
    hc->scale = L.Vector(p + ".hc_" + unit + "_scale", 3);
  }
  w.attn_norm = L.Vector(p + ".attn_norm.weight", d);
  w.ffn_norm = L.Vector(p + ".ffn_norm.weight", d);

  AttentionWeights& a = w.attn;
  const std::string ap = p + ".attn";
  const int64_t hd = c.num_heads * static_cast<int64_t>(c.head_dim);
  a.wq_a = L.Linear(ap + ".wq_a", c.q_lora_rank, d);
  a.q_norm = L.Vector(ap + ".q_norm.weight", c.q_lora_rank);
  a.wq_b = L.Linear(ap + ".wq_b", hd, c.q_lora_rank);
  a.wkv = L.Linear(ap + ".wkv", c.head_dim, d);
  a.kv_norm = L.Vector(ap + ".kv_norm.weight", c.head_dim);
  a.wo_a =
      L.Linear(ap + ".wo_a", static_cast<int64_t>(c.o_groups) * c.o_lora_rank, hd / c.o_groups);
  a.wo_b = L.Linear(ap + ".wo_b", d, static_cast<int64_t>(c.o_groups) * c.o_lora_rank);
  a.attn_sink = L.Vector(ap + ".attn_sink", c.num_heads);
  if (type != AttnType::kSliding) {
    a.has_compressor = true;
    a.compressor = LoadCompressor(L, ap + ".compressor", c.head_dim, ratio, type == AttnType::kCsa,
                                  static_cast<int>(d));
  }
  if (type == AttnType::kCsa) {
    a.has_indexer = true;
    const std::string ip = ap + ".indexer";
    a.index_wq_b = L.Linear(ip + ".wq_b", static_cast<int64_t>(c.index_n_heads) * c.index_head_dim,
                            c.q_lora_rank);
    a.index_weights_proj = L.Linear(ip + ".weights_proj", c.index_n_heads, d);
    a.index_compressor =
        LoadCompressor(L, ip + ".compressor", c.index_head_dim, ratio, true, static_cast<int>(d));
  }

  MoeWeights& m = w.ffn;
  const std::string fp = p + ".ffn";
  m.gate = L.Linear(fp + ".gate", c.n_routed_experts, d);
  if (hash) {
    const std::string tn = fp + ".gate.tid2eid";
    const TensorView* t = L.Find(tn);
    const std::vector<int64_t> want = {c.vocab_size, c.num_experts_per_tok};
    if (t == nullptr) {
      L.Missing(tn);
    } else if (t->shape != want || (t->dtype != DType::kI64 && t->dtype != DType::kI32)) {
      L.Error("tensor '" + tn + "' in " + *t->file + " must be I64/I32 [vocab, experts_per_tok]");
    } else {
      m.tid2eid.resize(t->numel());
      for (int64_t i = 0; i < t->numel(); ++i) {
        int64_t v = 0;
        if (t->dtype == DType::kI64)
          std::memcpy(&v, t->data + 8 * i, 8);
        else {
          int32_t x;
          std::memcpy(&x, t->data + 4 * i, 4);
          v = x;
        }
        if (v < 0 || v >= c.n_routed_experts) {
          L.Error("tensor '" + tn + "' in " + *t->file + " holds expert id " + std::to_string(v) +
                  " outside [0, " + std::to_string(c.n_routed_experts) + ")");
          break;
        }
        m.tid2eid[i] = static_cast<int32_t>(v);
      }
    }
  } else {
    m.gate_bias = L.Vector(fp + ".gate.bias", c.n_routed_experts);
  }
  for (int e = 0; e < c.n_routed_experts; ++e) {
    m.experts.push_back(L.Expert(fp, e, d, c.moe_intermediate_size));
  }
  if (c.n_shared_experts > 0) {
    m.has_shared = true;
    const int64_t si = static_cast<int64_t>(c.moe_intermediate_size) * c.n_shared_experts;
    m.shared = {L.Linear(fp + ".shared_experts.w1", si, d),
                L.Linear(fp + ".shared_experts.w2", d, si),
                L.Linear(fp + ".shared_experts.w3", si, d)};
  }
  return w;
}

}  // namespace

Result<std::unique_ptr<Checkpoint>> LoadCheckpoint(const std::string& model_dir) {
  auto ck = std::make_unique<Checkpoint>();
  DI_ASSIGN_OR_RETURN(ck->config, LoadModelConfig(model_dir));
  DI_ASSIGN_OR_RETURN(TensorStore store, TensorStore::OpenDir(model_dir));
  ck->store = std::make_shared<TensorStore>(std::move(store));
  const ModelConfig& c = ck->config;
  Loader L(c, *ck->store);
  ModelWeights& w = ck->weights;
  const int64_t d = c.hidden_size, n = c.hc_mult;
  w.embed = L.Linear("embed", c.vocab_size, d);
  if (c.tie_word_embeddings && !L.Exists("head.weight")) {
    w.head = w.embed;
  } else {
    w.head = L.Linear("head", c.vocab_size, d);
  }
  w.norm = L.Vector("norm.weight", d);
  w.hc_head.fn = L.Tensor("hc_head_fn", {n, n * d});
  w.hc_head.base = L.Vector("hc_head_base", n);
  w.hc_head.scale = L.Vector("hc_head_scale", 1);
  for (int l = 0; l < c.num_layers; ++l) {
    w.layers.push_back(LoadLayer(L, c, "layers." + std::to_string(l), c.attn_types[l],
                                 c.hash_routed[l], c.compress_ratio[l]));
  }
  if (c.num_mtp_layers > 0) {
    if (!L.Exists("mtp.0.e_proj.weight")) {
      ck->warnings.push_back(
          "config declares num_nextn_predict_layers=" + std::to_string(c.num_mtp_layers) +
          " but the checkpoint has no mtp.* tensors; MTP drafting is disabled");
    } else {
      w.has_mtp = true;
      MtpWeights& m = w.mtp;
      m.e_proj = L.Linear("mtp.0.e_proj", d, d);
      m.h_proj = L.Linear("mtp.0.h_proj", d, d);
      m.enorm = L.Vector("mtp.0.enorm.weight", d);
      m.hnorm = L.Vector("mtp.0.hnorm.weight", d);
      m.norm = L.Vector("mtp.0.norm.weight", d);
      m.hc_head.fn = L.Tensor("mtp.0.hc_head_fn", {n, n * d});
      m.hc_head.base = L.Vector("mtp.0.hc_head_base", n);
      m.hc_head.scale = L.Vector("mtp.0.hc_head_scale", 1);
      m.layer = LoadLayer(L, c, "mtp.0", AttnType::kSliding, false, 0);
    }
  }
  DI_RETURN_IF_ERROR(L.Finish());
  ck->naming = L.naming();
  return ck;
}

}  // namespace deepinfer
