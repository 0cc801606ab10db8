#include "tools/model/inspect.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "engine/model/weights.h"
#include "kernels/fp4_e4m3.h"

namespace deepinfer {

Status Inspect(const std::map<std::string, std::string>& a) {
  if (!a.count("--model")) return InvalidArgument("inspect needs --model DIR");
  DI_ASSIGN_OR_RETURN(auto ck, LoadCheckpoint(a.at("--model")));
  for (const auto& w : ck->warnings) spdlog::warn("{}", w);
  const ModelConfig& c = ck->config;
  std::printf("config (%s layout, %s tensor names)\n", c.source_layout.c_str(), ck->naming.c_str());
  std::printf("  vocab %d  hidden %d  layers %d  heads %d x %d (rope %d)  q_lora %d  o %d x %d\n",
              c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.head_dim, c.rope_dim,
              c.q_lora_rank, c.o_groups, c.o_lora_rank);
  std::string sched;
  for (int l = 0; l < c.num_layers; ++l) {
    sched += std::string(l ? " " : "") + AttnTypeName(c.attn_types[l]) +
             (c.hash_routed[l] ? "/hash" : "");
  }
  std::printf("  layers: %s\n", sched.c_str());
  std::printf("  experts %d top-%d width %d shared %d  indexer %d x %d top-%d  window %d  mtp %s\n",
              c.n_routed_experts, c.num_experts_per_tok, c.moe_intermediate_size,
              c.n_shared_experts, c.index_n_heads, c.index_head_dim, c.index_topk, c.sliding_window,
              ck->weights.has_mtp ? "yes" : "no");
  std::map<std::string, std::pair<size_t, size_t>> by_dtype;  // dtype -> (tensors, bytes)
  long long params = 0;
  for (const auto& [name, t] : ck->store->all()) {
    auto& e = by_dtype[std::string(DTypeName(t->dtype))];
    e.first++;
    e.second += t->nbytes;
    const bool is_scale = name.size() > 6 && name.compare(name.size() - 6, 6, ".scale") == 0;
    if (!is_scale) params += t->numel() * (t->dtype == DType::kI8 ? 2 : 1);
  }
  std::printf("tensors: %zu in %zu file(s)\n", ck->store->all().size(), ck->store->file_count());
  for (const auto& [dt, e] : by_dtype) {
    std::printf("  %-8s %6zu tensors %14zu bytes\n", dt.c_str(), e.first, e.second);
  }
  std::printf("parameters: %lld (FP4 values counted singly, scales excluded)\n", params);
  // Whether the MXFP4 experts' scales fold into one per 128 columns (kernels/fp4_e4m3.h): what
  // a folded expert kernel would need.
  size_t fp4 = 0, folding = 0;
  for (const LayerWeights& layer : ck->weights.layers) {
    for (const FfnWeights& e : layer.ffn.experts) {
      for (const LinearWeight* w : {&e.w1, &e.w2, &e.w3}) {
        if (w->format != WeightFormat::kFp4Block || w->in % 128 != 0) continue;
        ++fp4;
        folding += kernels::ScalesFold(w->scale, w->out, w->in);
      }
    }
  }
  if (fp4 > 0) {
    std::printf("MXFP4 expert matrices whose scales fold per 128 columns: %zu of %zu\n", folding,
                fp4);
  }
  return Status::Ok();
}

}  // namespace deepinfer
