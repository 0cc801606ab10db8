#include "engine/model/tiny_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/common/thread_pool.h"
#include "engine/model/quant.h"
#include "engine/model/safetensors_writer.h"

namespace deepinfer {
namespace {

// splitmix64: its k-th draw is a function of the seed and k alone, so a tensor's values can be
// drawn by several threads at once and still be the sequence one thread would draw.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0x1234567ull) {}
  uint64_t Next() { return Mix(s_ += kGamma); }
  /// The draw `k` places after the next one (At(0) is what Next() would return), without
  /// advancing.
  uint64_t At(uint64_t k) const { return Mix(s_ + (k + 1) * kGamma); }
  void Skip(uint64_t n) { s_ += n * kGamma; }
  /// Uniform in [-a, a] from one draw, exactly representable and identical everywhere.
  static float Uniform(uint64_t draw, float a) {
    const int64_t k = static_cast<int64_t>(draw >> 40) - (1ll << 23);  // [-2^23, 2^23)
    return a * static_cast<float>(k) / static_cast<float>(1 << 23);
  }

 private:
  static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
  static uint64_t Mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t s_;
};

// Threads for drawing and quantising: a V4-shaped test model holds billions of weights (the
// GPU host's mid model took ~3 minutes on one thread).
int BuilderThreads(int asked) {
  if (asked > 0) return asked;
  const unsigned n = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(n, 1u, 32u));
}

enum class Kind { kF32, kHalf, kFp8, kFp4 };  // kHalf: BF16 storage

class Builder {
 public:
  Builder(const TinySpec& s) : s_(s), rng_(s.seed), pool_(BuilderThreads(s.threads)) {}

  // Stores values as F32, BF16, FP8 with 128x128 e8m0 block scales, or FP4 with per-32 scales.
  void Put(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v,
           Kind kind) {
    switch (kind) {
      case Kind::kF32:
        w_.AddF32(name, shape, v);
        return;
      case Kind::kHalf: {
        std::vector<uint8_t> b(v.size() * 2);
        pool_.ParallelFor(static_cast<int64_t>(v.size()), [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            const uint16_t h = F32ToBf16(v[i]);
            std::memcpy(&b[2 * i], &h, 2);
          }
        });
        w_.Add(name, DType::kBF16, shape, std::move(b));
        return;
      }
      case Kind::kFp8:
        return PutFp8(name, shape[0], shape[1], v);
      case Kind::kFp4:
        return PutFp4(name, shape[0], shape[1], v);
    }
  }

  std::vector<float> Random(int64_t n, float a) {
    std::vector<float> v(n);
    pool_.ParallelFor(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) v[i] = Rng::Uniform(rng_.At(i), a);
    });
    rng_.Skip(n);
    return v;
  }
  std::vector<float> Around(int64_t n, float center, float a) {
    std::vector<float> v = Random(n, a);
    for (auto& x : v) x += center;
    return v;
  }

  // A [out, in] linear with unit output variance for unit-variance input.
  void Linear(const std::string& name, int64_t out, int64_t in, Kind kind, float gain = 1.0f) {
    Put(name + ".weight", {out, in}, Random(out * in, gain * std::sqrt(3.0f / in)), kind);
  }
  void Norm(const std::string& name, int64_t n) {
    Put(name + ".weight", {n}, Around(n, 1.0f, 0.2f), half_);
  }

  void Compressor(const std::string& p, int width, int ratio, bool overlap) {
    const int proj = overlap ? 2 * width : width;
    Linear(p + ".wkv", proj, s_.hidden, half_);
    Linear(p + ".wgate", proj, s_.hidden, half_);
    Put(p + ".ape", {ratio, proj}, Random(static_cast<int64_t>(ratio) * proj, 0.5f), Kind::kF32);
    Norm(p + ".norm", width);
  }

  void Layer(const std::string& p, int ratio, bool hash) {
    const int64_t d = s_.hidden, n = 4, mix = (2 + n) * n;
    for (const char* u : {"attn", "ffn"}) {
      Put(p + ".hc_" + u + "_fn", {mix, n * d}, Random(mix * n * d, std::sqrt(3.0f / (n * d))),
          Kind::kF32);
      Put(p + ".hc_" + u + "_base", {mix}, Random(mix, 0.5f), Kind::kF32);
      Put(p + ".hc_" + u + "_scale", {3}, Around(3, 1.0f, 0.5f), Kind::kF32);
    }
    Norm(p + ".attn_norm", d);
    Norm(p + ".ffn_norm", d);
    const std::string a = p + ".attn";
    const int64_t hd = static_cast<int64_t>(s_.heads) * s_.head_dim;
    Linear(a + ".wq_a", s_.q_lora, d, dense_);
    Norm(a + ".q_norm", s_.q_lora);
    Linear(a + ".wq_b", hd, s_.q_lora, dense_);
    Linear(a + ".wkv", s_.head_dim, d, dense_);
    Norm(a + ".kv_norm", s_.head_dim);
    Linear(a + ".wo_a", static_cast<int64_t>(s_.o_groups) * s_.o_lora, hd / s_.o_groups, dense_);
    Linear(a + ".wo_b", d, static_cast<int64_t>(s_.o_groups) * s_.o_lora, dense_, s_.residual_gain);
    Put(a + ".attn_sink", {s_.heads}, Random(s_.heads, 1.0f), Kind::kF32);
    if (ratio != 0) Compressor(a + ".compressor", s_.head_dim, ratio, ratio == 4);
    if (ratio == 4) {
      Linear(a + ".indexer.wq_b", static_cast<int64_t>(s_.index_heads) * s_.index_head_dim,
             s_.q_lora, dense_);
      Linear(a + ".indexer.weights_proj", s_.index_heads, d, half_);
      Compressor(a + ".indexer.compressor", s_.index_head_dim, ratio, true);
    }
    const std::string f = p + ".ffn";
    Linear(f + ".gate", s_.experts, d, half_);
    if (hash) {
      std::vector<uint8_t> b(static_cast<size_t>(s_.vocab) * s_.top_k * 8);
      for (int t = 0; t < s_.vocab; ++t) {
        std::vector<int64_t> pick;
        while (static_cast<int>(pick.size()) < s_.top_k) {
          const int64_t e = static_cast<int64_t>(rng_.Next() % s_.experts);
          if (std::find(pick.begin(), pick.end(), e) == pick.end()) pick.push_back(e);
        }
        std::memcpy(&b[static_cast<size_t>(t) * s_.top_k * 8], pick.data(), s_.top_k * 8);
      }
      w_.Add(f + ".gate.tid2eid", DType::kI64, {s_.vocab, s_.top_k}, std::move(b));
    } else {
      Put(f + ".gate.bias", {s_.experts}, Random(s_.experts, 0.1f), Kind::kF32);
    }
    // Gains above 1 push some gate/up pre-activations past the +-10 SwiGLU clamp.
    for (int e = 0; e < s_.experts; ++e) {
      const std::string x = f + ".experts." + std::to_string(e);
      Linear(x + ".w1", s_.moe_inter, d, expert_, s_.expert_gain);
      Linear(x + ".w3", s_.moe_inter, d, expert_, s_.expert_gain);
      Linear(x + ".w2", d, s_.moe_inter, expert_, 0.5f * s_.residual_gain);
    }
    Linear(f + ".shared_experts.w1", s_.moe_inter, d, dense_, s_.expert_gain);
    Linear(f + ".shared_experts.w3", s_.moe_inter, d, dense_, s_.expert_gain);
    Linear(f + ".shared_experts.w2", d, s_.moe_inter, dense_, 0.5f * s_.residual_gain);
  }

  Status Build(const std::string& dir) {
    if (s_.quantize == "none") {
      half_ = dense_ = expert_ = Kind::kF32;
    } else if (s_.quantize == "bf16") {
      half_ = dense_ = expert_ = Kind::kHalf;
    } else if (s_.quantize == "fp8-fp4") {
      half_ = Kind::kHalf;
      dense_ = Kind::kFp8;
      expert_ = Kind::kFp4;
    } else if (s_.quantize == "fp8") {  // like V4-Flash-Base: FP8 experts, float32 block scales
      half_ = Kind::kHalf;
      dense_ = expert_ = Kind::kFp8;
      f32_scales_ = true;
    } else {
      return InvalidArgument("--quantize must be none, bf16, fp8-fp4 or fp8, got '" + s_.quantize +
                             "'");
    }
    const int64_t d = s_.hidden, n = 4;
    Put("embed.weight", {s_.vocab, d}, Random(int64_t{s_.vocab} * d, std::sqrt(3.0f)), half_);
    Linear("head", s_.vocab, d, half_);
    Norm("norm", d);
    Put("hc_head_fn", {n, n * d}, Random(n * n * d, std::sqrt(3.0f / (n * d))), Kind::kF32);
    Put("hc_head_base", {n}, Random(n, 0.5f), Kind::kF32);
    Put("hc_head_scale", {1}, Around(1, 1.0f, 0.5f), Kind::kF32);
    for (size_t l = 0; l < s_.compress_ratios.size(); ++l) {
      Layer("layers." + std::to_string(l), s_.compress_ratios[l],
            static_cast<int>(l) < s_.num_hash_layers);
    }
    if (s_.mtp) {
      Linear("mtp.0.e_proj", d, d, dense_);
      Linear("mtp.0.h_proj", d, d, dense_);
      Norm("mtp.0.enorm", d);
      Norm("mtp.0.hnorm", d);
      Norm("mtp.0.norm", d);
      Put("mtp.0.hc_head_fn", {n, n * d}, Random(n * n * d, std::sqrt(3.0f / (n * d))), Kind::kF32);
      Put("mtp.0.hc_head_base", {n}, Random(n, 0.5f), Kind::kF32);
      Put("mtp.0.hc_head_scale", {1}, Around(1, 1.0f, 0.5f), Kind::kF32);
      Layer("mtp.0", 0, false);
    }
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return IoError(dir + ": cannot create: " + ec.message());
    DI_RETURN_IF_ERROR(w_.Write(dir + "/model.safetensors"));
    return WriteConfig(dir + "/config.json");
  }

 private:
  void PutFp8(const std::string& name, int64_t out, int64_t in, const std::vector<float>& v) {
    const int64_t so = (out + 127) / 128, si = (in + 127) / 128;
    std::vector<uint8_t> q(out * in), scale(so * si), fscale(so * si * 4);
    pool_.ParallelFor(so, [&](int64_t bo_begin, int64_t bo_end) {
      for (int64_t bo = bo_begin; bo < bo_end; ++bo)
        PutFp8RowBlock(out, in, v, bo, q, scale, fscale);
    });
    w_.Add(name, DType::kF8E4M3, {out, in}, std::move(q));
    const std::string scale_name = name.substr(0, name.size() - 7) + ".scale";
    if (f32_scales_)
      w_.Add(scale_name, DType::kF32, {so, si}, std::move(fscale));
    else
      w_.Add(scale_name, DType::kF8E8M0, {so, si}, std::move(scale));
  }

  // Row block bo (128 rows) of PutFp8: each 128 x 128 block's scale, then its e4m3 values.
  void PutFp8RowBlock(int64_t out, int64_t in, const std::vector<float>& v, int64_t bo,
                      std::vector<uint8_t>& q, std::vector<uint8_t>& scale,
                      std::vector<uint8_t>& fscale) const {
    const int64_t si = (in + 127) / 128;
    for (int64_t bi = 0; bi < si; ++bi) {
      float amax = 0;
      for (int64_t o = bo * 128; o < std::min(out, bo * 128 + 128); ++o)
        for (int64_t i = bi * 128; i < std::min(in, bi * 128 + 128); ++i)
          amax = std::max(amax, std::fabs(v[o * in + i]));
      const int e = Pow2ScaleExponent(amax, 448.0f, 1e-30f);
      // float32 scales need not be powers of two: amax maps exactly onto 448.
      const float f = amax > 0 ? amax / 448.0f : 1.0f;
      if (f32_scales_)
        std::memcpy(&fscale[(bo * si + bi) * 4], &f, 4);
      else
        scale[bo * si + bi] = static_cast<uint8_t>(e + 127);
      for (int64_t o = bo * 128; o < std::min(out, bo * 128 + 128); ++o)
        for (int64_t i = bi * 128; i < std::min(in, bi * 128 + 128); ++i)
          q[o * in + i] =
              F32ToE4M3(f32_scales_ ? v[o * in + i] / f : std::ldexp(v[o * in + i], -e));
    }
  }

  void PutFp4(const std::string& name, int64_t out, int64_t in, const std::vector<float>& v) {
    std::vector<uint8_t> q(out * in / 2), scale(out * in / 32);
    pool_.ParallelFor(out, [&](int64_t o_begin, int64_t o_end) {
      for (int64_t o = o_begin; o < o_end; ++o) PutFp4Row(in, v, o, q, scale);
    });
    w_.Add(name, DType::kI8, {out, in / 2}, std::move(q));
    w_.Add(name.substr(0, name.size() - 7) + ".scale", DType::kF8E8M0, {out, in / 32},
           std::move(scale));
  }

  // Row o of PutFp4: each 32-value block's e8m0 scale, then its e2m1 pairs.
  static void PutFp4Row(int64_t in, const std::vector<float>& v, int64_t o, std::vector<uint8_t>& q,
                        std::vector<uint8_t>& scale) {
    for (int64_t b = 0; b < in / 32; ++b) {
      float amax = 0;
      for (int64_t i = b * 32; i < b * 32 + 32; ++i)
        amax = std::max(amax, std::fabs(v[o * in + i]));
      const int e = Pow2ScaleExponent(amax, 6.0f, 1e-30f);
      scale[o * (in / 32) + b] = static_cast<uint8_t>(e + 127);
      for (int64_t i = b * 32; i < b * 32 + 32; i += 2) {
        const uint8_t lo = F32ToE2M1(std::ldexp(v[o * in + i], -e));
        const uint8_t hi = F32ToE2M1(std::ldexp(v[o * in + i + 1], -e));
        q[(o * in + i) / 2] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }

  Status WriteConfig(const std::string& path) const {
    std::string ratios;
    for (int r : s_.compress_ratios) ratios += (ratios.empty() ? "" : ", ") + std::to_string(r);
    if (s_.mtp) ratios += ", 0";
    std::string j = "{\n";
    auto kv = [&](const std::string& k, const std::string& v) {
      j += "  \"" + k + "\": " + v + ",\n";
    };
    kv("architectures", "[\"DeepseekV4ForCausalLM\"]");
    kv("model_type", "\"deepseek_v4\"");
    kv("vocab_size", std::to_string(s_.vocab));
    kv("hidden_size", std::to_string(s_.hidden));
    kv("num_hidden_layers", std::to_string(s_.compress_ratios.size()));
    kv("num_attention_heads", std::to_string(s_.heads));
    kv("num_key_value_heads", "1");
    kv("head_dim", std::to_string(s_.head_dim));
    kv("qk_rope_head_dim", std::to_string(s_.rope_dim));
    kv("q_lora_rank", std::to_string(s_.q_lora));
    kv("o_lora_rank", std::to_string(s_.o_lora));
    kv("o_groups", std::to_string(s_.o_groups));
    kv("sliding_window", std::to_string(s_.window));
    kv("rope_theta", "10000");
    kv("compress_rope_theta", "160000");
    kv("rope_scaling",
       "{\"type\": \"yarn\", \"factor\": 16, \"original_max_position_embeddings\": "
       "65536, \"beta_fast\": 32, \"beta_slow\": 1}");
    kv("max_position_embeddings", std::to_string(s_.max_position));
    kv("compress_ratios", "[" + ratios + "]");
    kv("index_n_heads", std::to_string(s_.index_heads));
    kv("index_head_dim", std::to_string(s_.index_head_dim));
    kv("index_topk", std::to_string(s_.index_topk));
    kv("n_routed_experts", std::to_string(s_.experts));
    kv("num_experts_per_tok", std::to_string(s_.top_k));
    kv("n_shared_experts", "1");
    kv("moe_intermediate_size", std::to_string(s_.moe_inter));
    kv("scoring_func", "\"sqrtsoftplus\"");
    kv("topk_method", "\"noaux_tc\"");
    kv("norm_topk_prob", "true");
    kv("routed_scaling_factor", "1.5");
    kv("num_hash_layers", std::to_string(s_.num_hash_layers));
    kv("swiglu_limit", "10.0");
    kv("hc_mult", "4");
    kv("hc_sinkhorn_iters", "20");
    kv("hc_eps", "1e-06");
    kv("rms_norm_eps", "1e-06");
    kv("num_nextn_predict_layers", s_.mtp ? "1" : "0");
    kv("hidden_act", "\"silu\"");
    kv("tie_word_embeddings", "false");
    kv("bos_token_id", "0");
    kv("eos_token_id", "1");
    kv("torch_dtype", "\"bfloat16\"");
    if (s_.quantize == "fp8") {
      kv("expert_dtype", "\"fp8\"");
      kv("quantization_config",
         "{\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", \"activation_scheme\": \"dynamic\", "
         "\"weight_block_size\": [128, 128]}");
    }
    if (s_.quantize == "fp8-fp4") {
      kv("expert_dtype", "\"fp4\"");
      kv("quantization_config",
         "{\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", \"scale_fmt\": "
         "\"ue8m0\", \"activation_scheme\": \"dynamic\", "
         "\"weight_block_size\": [128, 128]}");
    }
    j += "  \"initializer_range\": 0.02\n}\n";
    std::ofstream out(path);
    if (!(out << j)) return IoError(path + ": write failed");
    return Status::Ok();
  }

  const TinySpec& s_;
  Rng rng_;
  ThreadPool pool_;
  SafetensorsWriter w_;
  Kind half_ = Kind::kF32, dense_ = Kind::kF32, expert_ = Kind::kF32;
  bool f32_scales_ = false;
};

}  // namespace

Status MakeTinyCheckpoint(const TinySpec& spec, const std::string& dir) {
  for (int v : {spec.vocab, spec.hidden, spec.heads, spec.head_dim, spec.rope_dim, spec.q_lora,
                spec.o_groups, spec.o_lora, spec.window, spec.index_heads, spec.index_head_dim,
                spec.index_topk, spec.experts, spec.top_k, spec.moe_inter}) {
    if (v <= 0) return InvalidArgument("every tiny-model size must be positive");
  }
  if (spec.hidden % 32 != 0 || spec.moe_inter % 32 != 0) {
    return InvalidArgument("hidden and moe_inter must be multiples of 32 (FP4 scale groups)");
  }
  if (spec.vocab < 2 || spec.top_k > spec.experts || spec.heads % spec.o_groups != 0) {
    return InvalidArgument("inconsistent tiny spec (vocab, top_k, heads/o_groups)");
  }
  if (spec.rope_dim % 2 != 0 || spec.rope_dim > spec.head_dim ||
      spec.rope_dim > spec.index_head_dim) {
    return InvalidArgument("rope_dim must be even and fit in head_dim and index_head_dim");
  }
  if ((spec.index_head_dim & (spec.index_head_dim - 1)) != 0) {
    return InvalidArgument("index_head_dim must be a power of two (Hadamard transform)");
  }
  if (spec.compress_ratios.empty() || spec.num_hash_layers < 0) {
    return InvalidArgument("need at least one layer and a non-negative hash-layer count");
  }
  for (int r : spec.compress_ratios) {
    if (r != 0 && r != 4 && r != 128) return InvalidArgument("compress ratios must be 0, 4 or 128");
  }
  Builder b(spec);
  return b.Build(dir);
}

}  // namespace deepinfer
