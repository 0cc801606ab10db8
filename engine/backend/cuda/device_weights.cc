#include "engine/backend/cuda/device_weights.h"

#include <cuda_runtime_api.h>

#include <string>

#include "engine/model/rope.h"
#include "kernels/fp4_e4m3.h"
#include "kernels/gemm_fp8.h"
#include "kernels/kv_row.h"

namespace deepinfer {

DeviceMemory::~DeviceMemory() {
  for (void* p : blocks_) cudaFree(p);
}

Result<void*> DeviceMemory::Alloc(size_t bytes) {
  DI_ASSIGN_OR_RETURN(void* p, AllocRaw(bytes));
  if (const cudaError_t e = cudaMemset(p, 0, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
      e != cudaSuccess) {
    return Internal(std::string("cudaMemset: ") + cudaGetErrorString(e));
  }
  return p;
}

Result<void*> DeviceMemory::AllocRaw(size_t bytes) {
  void* p = nullptr;
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  if (const cudaError_t e = cudaMalloc(&p, rounded); e != cudaSuccess) {
    return Internal("device allocation of " + std::to_string(bytes) +
                    " bytes failed: " + cudaGetErrorString(e));
  }
  blocks_.push_back(p);
  bytes_ += rounded;
  return p;
}

Result<void*> DeviceMemory::Upload(const void* host, size_t bytes) {
  DI_ASSIGN_OR_RETURN(void* p, AllocRaw(bytes));
  if (const cudaError_t e = cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice); e != cudaSuccess) {
    return Internal(std::string("weight upload: ") + cudaGetErrorString(e));
  }
  return p;
}

namespace {

class Uploader {
 public:
  Uploader(bool gemm_scales, DeviceMemory& mem) : gemm_scales_(gemm_scales), mem_(mem) {}

  // A dense product's weight: FP8 with e8m0 128x128 scales (the GEMV's input) or bf16.
  Result<DeviceLinear> Dense(const LinearWeight& w) {
    if (w.format == WeightFormat::kFp8Block) {
      if (w.scale_dtype != DType::kF8E8M0 || w.block_out != 128 || w.block_in != 128 ||
          w.in % 128 != 0 || w.out % 4 != 0) {
        return Unsupported(w, "FP8 with e8m0 128x128 scales, in % 128 == 0 and out % 4 == 0");
      }
    } else if (w.format != WeightFormat::kBF16 || w.in % 8 != 0) {
      return Unsupported(w, "FP8 block-scaled or bf16 with in % 8 == 0");
    }
    return Copy(w);
  }
  Result<DeviceLinear> Expert(const LinearWeight& w) {
    if (w.format != WeightFormat::kFp4Block || w.scale_dtype != DType::kF8E8M0 || w.in % 128 != 0) {
      return Unsupported(w, "MXFP4 (e2m1 with e8m0 scales per 32), in % 128 == 0");
    }
    return Copy(w);
  }
  Result<const float*> Floats(const std::vector<float>& v) {
    DI_ASSIGN_OR_RETURN(void* p, mem_.Upload(v.data(), v.size() * sizeof(float)));
    return static_cast<const float*>(p);
  }
  Result<kernels::HyperWeights> Hyper(const std::vector<float>& fn, const std::vector<float>& base,
                                      const std::vector<float>& scale) {
    kernels::HyperWeights h{};
    DI_ASSIGN_OR_RETURN(h.fn, Floats(fn));
    DI_ASSIGN_OR_RETURN(h.base, Floats(base));
    DI_ASSIGN_OR_RETURN(h.scale, Floats(scale));
    return h;
  }
  Result<DeviceCompressor> Compressor(const CompressorWeights& w) {
    DeviceCompressor c;
    c.shape = {w.ratio, w.width, w.overlap};
    DI_ASSIGN_OR_RETURN(c.wkv, Dense(w.wkv));
    DI_ASSIGN_OR_RETURN(c.wgate, Dense(w.wgate));
    DI_ASSIGN_OR_RETURN(c.ape, Floats(w.ape));
    DI_ASSIGN_OR_RETURN(c.norm, Floats(w.norm));
    return c;
  }
  Status Experts(const MoeWeights& m, DeviceLayer& L) {
    const size_t E = m.experts.size();
    std::vector<const uint8_t*> ptr[6];
    for (size_t e = 0; e < E; ++e) {
      const LinearWeight* ws[3] = {&m.experts[e].w1, &m.experts[e].w3, &m.experts[e].w2};
      for (int k = 0; k < 3; ++k) {
        DI_ASSIGN_OR_RETURN(DeviceLinear d, Expert(*ws[k]));
        ptr[2 * k].push_back(d.data);
        ptr[2 * k + 1].push_back(d.scale);
      }
    }
    const uint8_t*** dst[6] = {&L.w1, &L.s1, &L.w3, &L.s3, &L.w2, &L.s2};
    for (int k = 0; k < 6; ++k) {
      DI_ASSIGN_OR_RETURN(void* p, mem_.Upload(ptr[k].data(), E * sizeof(const uint8_t*)));
      *dst[k] = static_cast<const uint8_t**>(p);
    }
    return Status::Ok();
  }

 private:
  Result<DeviceLinear> Copy(const LinearWeight& w) {
    DeviceLinear d{w.format, w.out, w.in, nullptr, nullptr, nullptr};
    DI_ASSIGN_OR_RETURN(void* data, mem_.Upload(w.data, w.bytes()));
    d.data = static_cast<const uint8_t*>(data);
    if (w.quantized()) {
      const size_t scales = w.format == WeightFormat::kFp8Block
                                ? static_cast<size_t>(((w.out + 127) / 128) * ((w.in + 127) / 128))
                                : static_cast<size_t>(w.out * (w.in / 32));
      DI_ASSIGN_OR_RETURN(void* s, mem_.Upload(w.scale, scales));
      d.scale = static_cast<const uint8_t*>(s);
    }
    if (w.format == WeightFormat::kFp8Block && gemm_scales_) {  // kernels/gemm_fp8.h's layout
      DI_ASSIGN_OR_RETURN(float* f, mem_.Take<float>(kernels::Fp8WeightScaleCount(w.out, w.in)));
      if (kernels::Fp8WeightScalesToF32(d.scale, w.out, w.in, f, nullptr) != 0) {
        return Internal("device forward: converting " + w.name + "'s scales failed");
      }
      d.scale_f32 = f;
    }
    return d;
  }
  static Status Unsupported(const LinearWeight& w, const std::string& need) {
    return Unimplemented("device forward: " + w.name + " is " + WeightFormatName(w.format) + " [" +
                         std::to_string(w.out) + ", " + std::to_string(w.in) + "]; it takes " +
                         need);
  }

  bool gemm_scales_;
  DeviceMemory& mem_;
};

Status CheckShapes(const ModelConfig& c) {
  auto need = [](bool ok, const std::string& what) {
    return ok ? Status::Ok() : Unimplemented("device forward: the production kernels need " + what);
  };
  DI_RETURN_IF_ERROR(
      need(c.head_dim == kernels::kKvRowValues && c.rope_dim == kernels::kKvRopeValues,
           "head_dim 512 with 64 RoPE dims (the 584-byte cache row)"));
  DI_RETURN_IF_ERROR(need(c.num_heads % 16 == 0, "a multiple of 16 heads"));
  DI_RETURN_IF_ERROR(need(c.hc_mult <= 6, "hc_mult <= 6"));
  DI_RETURN_IF_ERROR(need(c.o_lora_rank % 128 == 0, "o_lora_rank % 128 == 0"));
  bool csa = false;
  for (AttnType t : c.attn_types) csa = csa || t == AttnType::kCsa;
  if (csa) {
    DI_RETURN_IF_ERROR(
        need(c.index_n_heads == 64 && c.index_head_dim == 128, "64 indexer heads of 128"));
    DI_RETURN_IF_ERROR(need(c.index_topk >= 1 && c.index_topk <= 2048, "index_topk <= 2048"));
  }
  return need(c.n_routed_experts <= 1024 && c.num_experts_per_tok <= 16,
              "at most 1024 experts, top-k <= 16");
}

}  // namespace

Status UploadModel(const Checkpoint& ck, bool gemm_scales, DeviceMemory& mem, DeviceModel* out) {
  const ModelConfig& c = ck.config;
  const ModelWeights& w = ck.weights;
  DI_RETURN_IF_ERROR(CheckShapes(c));
  if (static_cast<int>(w.layers.size()) != c.num_layers) {
    return InvalidArgument("device forward: the checkpoint has " + std::to_string(w.layers.size()) +
                           " layers, its config " + std::to_string(c.num_layers));
  }
  if (w.embed.format != WeightFormat::kBF16) {
    return Unimplemented("device forward: the embedding must be bf16");
  }
  Uploader up(gemm_scales, mem);
  DeviceModel m;
  m.embed = {w.embed.format, w.embed.out, w.embed.in, nullptr, nullptr, nullptr};
  DI_ASSIGN_OR_RETURN(void* embed, mem.Upload(w.embed.data, w.embed.bytes()));
  m.embed.data = static_cast<const uint8_t*>(embed);
  DI_ASSIGN_OR_RETURN(m.head, up.Dense(w.head));
  DI_ASSIGN_OR_RETURN(m.norm, up.Floats(w.norm));
  DI_ASSIGN_OR_RETURN(m.hc_head, up.Hyper(w.hc_head.fn, w.hc_head.base, w.hc_head.scale));
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    const AttentionWeights& a = lw.attn;
    DeviceLayer L;
    L.type = lw.type;
    L.ratio = lw.ratio;
    DI_ASSIGN_OR_RETURN(L.hc_attn, up.Hyper(lw.hc_attn.fn, lw.hc_attn.base, lw.hc_attn.scale));
    DI_ASSIGN_OR_RETURN(L.hc_ffn, up.Hyper(lw.hc_ffn.fn, lw.hc_ffn.base, lw.hc_ffn.scale));
    DI_ASSIGN_OR_RETURN(L.attn_norm, up.Floats(lw.attn_norm));
    DI_ASSIGN_OR_RETURN(L.ffn_norm, up.Floats(lw.ffn_norm));
    DI_ASSIGN_OR_RETURN(L.wq_a, up.Dense(a.wq_a));
    DI_ASSIGN_OR_RETURN(L.wq_b, up.Dense(a.wq_b));
    DI_ASSIGN_OR_RETURN(L.wkv, up.Dense(a.wkv));
    DI_ASSIGN_OR_RETURN(L.wo_a, up.Dense(a.wo_a));
    DI_ASSIGN_OR_RETURN(L.wo_b, up.Dense(a.wo_b));
    if (L.wo_a.format != WeightFormat::kFp8Block) {
      return Unimplemented("device forward: wo_a must be FP8 (the grouped GEMV)");
    }
    DI_ASSIGN_OR_RETURN(L.q_norm, up.Floats(a.q_norm));
    DI_ASSIGN_OR_RETURN(L.kv_norm, up.Floats(a.kv_norm));
    DI_ASSIGN_OR_RETURN(L.sinks, up.Floats(a.attn_sink));
    DI_ASSIGN_OR_RETURN(L.inv_freq, up.Floats(MakeLayerRope(c, lw.type).inv_freq));
    L.has_compressor = a.has_compressor;
    L.has_indexer = a.has_indexer;
    // The step's buffers and caches are laid out for these widths (device_step.h).
    if (a.has_compressor != (lw.type != AttnType::kSliding) ||
        a.has_indexer != (lw.type == AttnType::kCsa) ||
        (a.has_compressor &&
         (a.compressor.width != c.head_dim || a.compressor.ratio != lw.ratio)) ||
        (a.has_indexer && a.index_compressor.width != c.index_head_dim) ||
        static_cast<int>(lw.ffn.experts.size()) != c.n_routed_experts) {
      return Unimplemented("device forward: layer " + std::to_string(l) +
                           "'s compressors, indexer or experts do not match its config");
    }
    if (a.has_compressor) {
      DI_ASSIGN_OR_RETURN(L.comp, up.Compressor(a.compressor));
    }
    if (a.has_indexer) {
      DI_ASSIGN_OR_RETURN(L.index_comp, up.Compressor(a.index_compressor));
      DI_ASSIGN_OR_RETURN(L.index_wq_b, up.Dense(a.index_wq_b));
      DI_ASSIGN_OR_RETURN(L.index_weights_proj, up.Dense(a.index_weights_proj));
      if (a.index_compressor.ratio != lw.ratio) {
        return Unimplemented("device forward: the indexer's ratio must be the layer's");
      }
    }
    const MoeWeights& f = lw.ffn;
    DI_ASSIGN_OR_RETURN(L.gate, up.Dense(f.gate));
    if (!f.gate_bias.empty()) {
      DI_ASSIGN_OR_RETURN(L.gate_bias, up.Floats(f.gate_bias));
    }
    if (lw.hash_routed) {
      DI_ASSIGN_OR_RETURN(void* t, mem.Upload(f.tid2eid.data(), f.tid2eid.size() * 4));
      L.tid2eid = static_cast<const int32_t*>(t);
    }
    DI_RETURN_IF_ERROR(up.Experts(f, L));
    L.has_shared = f.has_shared;
    if (f.has_shared) {
      DI_ASSIGN_OR_RETURN(L.shared_w1, up.Dense(f.shared.w1));
      DI_ASSIGN_OR_RETURN(L.shared_w2, up.Dense(f.shared.w2));
      DI_ASSIGN_OR_RETURN(L.shared_w3, up.Dense(f.shared.w3));
    }
    m.layers.push_back(L);
  }
  if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    return Internal(std::string("device forward: weight upload: ") + cudaGetErrorString(e));
  }
  *out = std::move(m);
  return Status::Ok();
}

Status CheckExpertScalesFold(const Checkpoint& ck) {
  for (size_t l = 0; l < ck.weights.layers.size(); ++l) {
    const MoeWeights& f = ck.weights.layers[l].ffn;
    for (size_t e = 0; e < f.experts.size(); ++e) {
      for (const LinearWeight* w : {&f.experts[e].w1, &f.experts[e].w3, &f.experts[e].w2}) {
        if (w->format != WeightFormat::kFp4Block || w->in % 128 != 0 ||
            !kernels::ScalesFold(w->scale, w->out, w->in)) {
          return InvalidArgument("folded experts: " + w->name + " (layer " + std::to_string(l) +
                                 ", expert " + std::to_string(e) +
                                 ") has a 128-column block whose four scales span more than 12 "
                                 "binades or start above 248 (or is not MXFP4 with in % 128 == "
                                 "0)");
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace deepinfer
