// bench_device_forward: decode steps of the device forward (engine/backend/cuda/device_forward.h)
// on a checkpoint, with and without CUDA graphs, against the HBM floor of what a step must read;
// or, with --prefill, a prompt of --context tokens taken in chunks.
//   bench_device_forward --model DIR [--batches 1,8,32] [--context 2048] [--steps 64]
//                        [--max-context N] [--no-eager] [--no-overlap] [--no-dense-mma]
//                        [--no-branches] [--folded-experts] [--no-early-weights]
//                        [--prefill 128,512] [--draw greedy|top_p|top_k|temperature]
// Every slot is first filled to --context tokens (decode steps), then --steps steps are timed.
// --max-context: the slots' capacity (default: just enough); --no-eager: graphs only;
// --no-overlap: kernels launched in plain stream order (kernels/launch.cuh), to measure the
// overlap; --no-early-weights: weights loaded after each kernel's wait (kernels/launch.cuh,
// EarlyWeightLoads), to measure what loading them early is worth; --folded-experts:
// DeviceForwardOptions::folded_experts. Prints one JSON object per batch and mode: µs per step,
// tokens/s, the bytes a step reads (dense weights in their formats, the experts uniform routing
// touches, cache rows and indexer keys) and that against 4.3 TB/s.
// --prefill C,...: for each chunk size, one sequence's --context prompt tokens in chunks of C
// (the last row's logits each), timed whole. --draw: each timed step draws every row's token on
// the device (StepSample: greedy, top-p 0.95 at T 0.8, top-k 50 at T 0.7, or V4's card: T 1
// alone), as the daemon's steps do, instead of copying every row's logits back (the JSON's
// `draw` says which).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/cuda/device_forward.h"
#include "engine/model/weights.h"
#include "kernels/launch.cuh"

namespace {

using deepinfer::AttentionWeights;
using deepinfer::AttnType;
using deepinfer::Checkpoint;
using deepinfer::DeviceForward;
using deepinfer::DeviceForwardOptions;
using deepinfer::FfnWeights;
using deepinfer::LayerWeights;
using deepinfer::LinearWeight;
using deepinfer::ModelConfig;
using deepinfer::Status;

constexpr double kHbmBytesPerS = 4.3e12;

// Bytes one step of `batch` tokens at `context` must read.
double StepBytes(const Checkpoint& ck, int batch, int64_t context) {
  const ModelConfig& c = ck.config;
  double bytes = static_cast<double>(ck.weights.head.bytes());
  for (const LayerWeights& L : ck.weights.layers) {
    const AttentionWeights& a = L.attn;
    for (const LinearWeight* w : {&a.wq_a, &a.wq_b, &a.wkv, &a.wo_a, &a.wo_b, &L.ffn.gate})
      bytes += w->bytes();
    if (a.has_compressor) bytes += a.compressor.wkv.bytes() + a.compressor.wgate.bytes();
    if (a.has_indexer) {
      bytes += a.index_wq_b.bytes() + a.index_weights_proj.bytes() +
               a.index_compressor.wkv.bytes() + a.index_compressor.wgate.bytes();
      bytes +=
          batch * (context / static_cast<double>(L.ratio)) * c.index_head_dim * 2;  // bf16 keys
    }
    if (L.ffn.has_shared) {
      bytes += L.ffn.shared.w1.bytes() + L.ffn.shared.w2.bytes() + L.ffn.shared.w3.bytes();
    }
    const FfnWeights& e = L.ffn.experts[0];
    const double expert = e.w1.bytes() * 1.0625 + e.w2.bytes() * 1.0625 + e.w3.bytes() * 1.0625;
    const double E = c.n_routed_experts;
    bytes += expert * E * (1.0 - std::pow(1.0 - 1.0 / E, batch * c.num_experts_per_tok));
    const double rows =
        std::min<int64_t>(context, c.sliding_window) +
        (L.type == AttnType::kCsa   ? std::min<int64_t>(c.index_topk, context / L.ratio)
         : L.type == AttnType::kHca ? context / L.ratio
                                    : 0);
    bytes += batch * rows * 584.0;
  }
  return bytes;
}

std::vector<int> ParseList(const char* s) {
  std::vector<int> v;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) v.push_back(std::atoi(item.c_str()));
  return v;
}

// One sequence's `context` prompt tokens in chunks of each size, the LM head on each chunk's
// last row only (as the engine asks), timed from the first chunk to the last one's logits.
int Prefill(const Checkpoint& ck, const std::vector<int>& chunks, int64_t context,
            bool folded_experts) {
  const int64_t V = ck.config.vocab_size;
  for (int chunk : chunks) {
    if (chunk < 1) {
      std::fprintf(stderr, "--prefill chunk sizes must be positive\n");
      return 2;
    }
    DeviceForwardOptions opt;
    opt.max_batch = chunk;
    opt.max_chunk = chunk;
    opt.slots = 1;
    opt.max_context = (context + 127) / 128 * 128;
    opt.folded_experts = folded_experts;
    auto dev = DeviceForward::Create(ck, opt);
    if (!dev.ok()) {
      std::fprintf(stderr, "%s\n", dev.status().ToString().c_str());
      return 1;
    }
    const std::vector<int32_t> slots(chunk, 0);
    std::vector<int32_t> tokens(context);
    for (int64_t t = 0; t < context; ++t) tokens[t] = static_cast<int32_t>((37 * t + 11) % V);
    std::vector<float> logits(V);
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t done = 0; done < context; done += chunk) {
      const int n = static_cast<int>(std::min<int64_t>(chunk, context - done));
      const int32_t last = n - 1;
      const Status st =
          (*dev)->Step({slots.data(), static_cast<size_t>(n)},
                       {&tokens[done], static_cast<size_t>(n)}, {&last, 1}, logits.data());
      if (!st.ok()) {
        std::fprintf(stderr, "%s\n", st.ToString().c_str());
        return 1;
      }
    }
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "{\"mode\": \"prefill\", \"chunk\": %d, \"context\": %lld, \"us_total\": %.0f, "
        "\"us_per_chunk\": %.1f, \"tokens_per_s\": %.0f, \"device_mib\": %zu, "
        "\"folded_experts\": %s}\n",
        chunk, static_cast<long long>(context), us, us * chunk / context, context * 1e6 / us,
        (*dev)->device_bytes() >> 20, folded_experts ? "true" : "false");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  std::vector<int> batches = {1, 8, 32};
  int64_t context = 2048;
  int steps = 64;
  int64_t max_context = 0;
  bool eager = true;
  bool dense_mma = true;
  bool branches = true;
  bool folded_experts = false;
  bool bad = false;
  std::vector<int> prefill;
  std::string draw = "logits";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--no-eager") {
      eager = false;
      continue;
    }
    if (flag == "--no-dense-mma") {
      dense_mma = false;
      continue;
    }
    if (flag == "--no-branches") {
      branches = false;
      continue;
    }
    if (flag == "--folded-experts") {
      folded_experts = true;
      continue;
    }
    if (flag == "--no-overlap") {
      deepinfer::kernels::SetOverlappedLaunches(false);
      continue;
    }
    if (flag == "--no-early-weights") {
      deepinfer::kernels::SetEarlyWeightLoads(false);
      continue;
    }
    if (i + 1 >= argc) {
      bad = true;
      break;
    }
    const char* value = argv[++i];
    if (flag == "--max-context") {
      max_context = std::atoll(value);
    } else if (flag == "--model") {
      model = value;
    } else if (flag == "--batches") {
      batches = ParseList(value);
    } else if (flag == "--context") {
      context = std::atoll(value);
    } else if (flag == "--steps") {
      steps = std::atoi(value);
    } else if (flag == "--prefill") {
      prefill = ParseList(value);
    } else if (flag == "--draw") {
      draw = value;
      bad = draw != "greedy" && draw != "top_p" && draw != "top_k" && draw != "temperature";
    } else {
      bad = true;
    }
  }
  if (max_context != 0 && max_context < context + steps) {
    std::fprintf(stderr, "--max-context must hold --context + --steps tokens\n");
    return 2;
  }
  if (bad || model.empty() || context < 1 || steps < 1) {
    std::fprintf(stderr,
                 "usage: bench_device_forward --model DIR [--batches 1,8,32] [--context 2048] "
                 "[--steps 64] [--max-context N] [--no-eager] [--no-overlap] [--no-dense-mma] "
                 "[--no-branches] [--folded-experts] [--no-early-weights] "
                 "[--prefill 128,512] [--draw greedy|top_p|top_k|temperature]\n");
    return 2;
  }
  auto ck = deepinfer::LoadCheckpoint(model);
  if (!ck.ok()) {
    std::fprintf(stderr, "%s\n", ck.status().ToString().c_str());
    return 1;
  }
  const int64_t V = (*ck)->config.vocab_size;
  if (!prefill.empty()) return Prefill(**ck, prefill, context, folded_experts);
  for (int batch : batches) {
    for (bool graphs : {true, false}) {
      if (!graphs && !eager) continue;
      DeviceForwardOptions opt;
      opt.max_batch = batch;
      opt.slots = batch;
      opt.max_context = (std::max(max_context, context + steps) + 127) / 128 * 128;
      opt.graphs = graphs;
      opt.dense_mma = dense_mma;
      opt.branches = branches;
      opt.folded_experts = folded_experts;
      auto dev = DeviceForward::Create(**ck, opt);
      if (!dev.ok()) {
        std::fprintf(stderr, "%s\n", dev.status().ToString().c_str());
        return 1;
      }
      std::vector<int32_t> slots(batch), tokens(batch), next(batch);
      std::vector<float> logits(batch * V);
      std::vector<deepinfer::SampleParams> params(batch);
      for (int b = 0; b < batch; ++b) {
        slots[b] = b;
        params[b] = draw == "greedy"        ? deepinfer::SampleParams{0.0f, 1.0f, 0.0f, -1}
                    : draw == "top_p"       ? deepinfer::SampleParams{0.8f, 0.95f, 0.0f, -1}
                    : draw == "temperature" ? deepinfer::SampleParams{1.0f, 1.0f, 0.0f, -1}
                                            : deepinfer::SampleParams{0.7f, 1.0f, 0.0f, 50};
        params[b].seed = 1;
        params[b].stream = static_cast<uint64_t>(b);
      }
      auto step = [&](int64_t t) {
        for (int b = 0; b < batch; ++b) {
          tokens[b] = static_cast<int32_t>((37 * t + 11 * b) % V);
          params[b].position = static_cast<uint64_t>(t);
        }
        const Status st = draw == "logits"
                              ? (*dev)->Step(slots, tokens, logits.data())
                              : (*dev)->StepSample(slots, tokens, params, nullptr, next.data());
        if (!st.ok()) {
          std::fprintf(stderr, "%s\n", st.ToString().c_str());
          std::exit(1);
        }
      };
      for (int64_t t = 0; t < context; ++t) step(t);
      const auto t0 = std::chrono::steady_clock::now();
      for (int t = 0; t < steps; ++t) step(context + t);
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          steps;
      const double bytes = StepBytes(**ck, batch, context + steps / 2);
      std::printf(
          "{\"batch\": %d, \"context\": %lld, \"graphs\": %s, \"us_per_step\": %.1f, "
          "\"tokens_per_s\": %.0f, \"step_bytes\": %.4g, \"hbm_floor_us\": %.1f, "
          "\"of_floor\": %.3f, \"device_mib\": %zu, \"max_context\": %lld, \"overlap\": %s, "
          "\"dense_mma\": %s, \"branches\": %s, \"folded_experts\": %s, \"draw\": \"%s\"}\n",
          batch, static_cast<long long>(context), graphs ? "true" : "false", us, batch * 1e6 / us,
          bytes, bytes / kHbmBytesPerS * 1e6, bytes / kHbmBytesPerS * 1e6 / us,
          (*dev)->device_bytes() >> 20, static_cast<long long>(opt.max_context),
          deepinfer::kernels::OverlappedLaunches() ? "true" : "false", dense_mma ? "true" : "false",
          branches ? "true" : "false", folded_experts ? "true" : "false", draw.c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
