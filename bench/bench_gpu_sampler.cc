// The GPU sampler (kernels/sampling.h) alone: µs a call of SampleRows (or the paths without its
// sort) for a step's
// draws, by rows and kind of draw, at V4's vocabulary by default. The device forward runs it after
// the LM head of every step that draws on the device (engine/backend/cuda/device_draws.cc), so this
// is what a draw adds to a decode step's latency.
//   bench_gpu_sampler [--rows 1,8,32,64] [--vocab 129280] [--calls 50]
//                     [--timing back_to_back|alone] [--kinds top_p,greedy,...] [--logit-sd 3]
// Prints one JSON object per rows, kind and path (the sort; the argmax for greedy kinds; the id
// walk, IdOrderRows, for kinds without a cut; the top-k select for kinds keeping at most
// kTopKMax candidates; the nucleus among the selected, NucleusRows, for top-p kinds without a
// top-k, with the rows it left for the sort as "undrawn"): µs a call after two warm-up calls,
// and the floor of reading the rows' logits once at the H200's HBM bandwidth. The logits are
// normal(0, --logit-sd): the wider, the fewer candidates a nucleus holds. --timing back_to_back
// (the default): CUDA events over
// --calls calls queued back to back, whose launches overlap; alone: each call between its own
// events, the stream drained before the next, as a decode step meets it (its launches included);
// graph: as alone, the call captured once as a CUDA graph and replayed, so the host's launches
// (CUB's dispatch among them) leave no gaps between its kernels: the GPU's own time, as the
// daemon's draws, queued while the forward still runs, meet it.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/sample_topk.h"
#include "kernels/sampling.h"

namespace {

constexpr double kHbmBytesPerS = 4.8e12;  // H200

struct Kind {
  const char* name;
  deepinfer::kernels::SampleParams params;
  bool mask;
};

std::vector<int> ParseList(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoi(item));
  return out;
}

void Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

template <typename T>
T* Upload(const std::vector<T>& host) {
  T* dev = nullptr;
  Check(cudaMalloc(reinterpret_cast<void**>(&dev), host.size() * sizeof(T)), "cudaMalloc");
  Check(cudaMemcpy(dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  return dev;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> rows_list = {1, 8, 32, 64};
  int32_t vocab = 129280;
  int calls = 50;
  std::string timing = "back_to_back";
  std::string only_kinds;  // comma-separated kind names; empty: all
  float logit_sd = 3.0f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rows") {
      rows_list = ParseList(value);
    } else if (flag == "--vocab") {
      vocab = std::stoi(value);
    } else if (flag == "--calls") {
      calls = std::stoi(value);
    } else if (flag == "--timing" &&
               (value == "back_to_back" || value == "alone" || value == "graph")) {
      timing = value;
    } else if (flag == "--kinds") {
      only_kinds = "," + value + ",";
    } else if (flag == "--logit-sd" && std::stof(value) > 0) {
      logit_sd = std::stof(value);
    } else {
      std::fprintf(stderr,
                   "usage: bench_gpu_sampler [--rows 1,8,32,64] [--vocab N] [--calls N] "
                   "[--timing back_to_back|alone|graph] [--kinds top_p,greedy,...] "
                   "[--logit-sd S]\n");
      return 2;
    }
  }
  if (vocab < 1 || calls < 1 || rows_list.empty()) return 2;
  // Greedy, greedy under a grammar mask, nucleus sampling, top-k, nucleus with the picked
  // token's log-probability, and V4's card (temperature 1, top_p 1, alone, with a min-p floor
  // and with the log-probability): the kinds of draw a serving step mixes.
  const Kind kinds[] = {{"greedy", {0.0f, 1.0f, 0.0f, -1, 1, 0, 0, 0}, false},
                        {"temperature", {1.0f, 1.0f, 0.0f, -1, 1, 0, 0, 0}, false},
                        {"temperature_min_p", {1.0f, 1.0f, 0.05f, -1, 1, 0, 0, 0}, false},
                        {"temperature_logprob", {1.0f, 1.0f, 0.0f, -1, 1, 0, 0, 1}, false},
                        {"greedy_masked", {0.0f, 1.0f, 0.0f, -1, 1, 0, 0, 0}, true},
                        {"greedy_logprob", {0.0f, 1.0f, 0.0f, -1, 1, 0, 0, 1}, false},
                        {"top_p", {0.8f, 0.95f, 0.0f, -1, 1, 0, 0, 0}, false},
                        {"top_k50", {0.7f, 1.0f, 0.0f, 50, 1, 0, 0, 0}, false},
                        {"top_k50_top_p_logprob", {0.7f, 0.9f, 0.0f, 50, 1, 0, 0, 1}, false},
                        {"top_p_logprob", {0.8f, 0.95f, 0.0f, -1, 1, 0, 0, 1}, false}};
  // Every name --kinds gives must be a kind: a misspelt one would otherwise measure nothing.
  std::stringstream named(only_kinds);
  for (std::string name; std::getline(named, name, ',');) {
    if (name.empty()) continue;
    bool known = false;
    for (const Kind& kind : kinds) known = known || name == kind.name;
    if (!known) {
      std::fprintf(stderr, "bench_gpu_sampler: --kinds: no kind named %s\n", name.c_str());
      return 2;
    }
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, logit_sd);
  for (int rows : rows_list) {
    std::vector<float> logits(static_cast<size_t>(rows) * vocab);
    for (float& v : logits) v = normal(rng);
    const int64_t words = (vocab + 31) / 32;
    std::vector<uint32_t> mask(rows * words);
    for (uint32_t& w : mask) w = static_cast<uint32_t>(rng());
    float* d_logits = Upload(logits);
    uint32_t* d_mask = Upload(mask);
    int32_t* d_out = nullptr;
    float* d_logprobs = nullptr;
    Check(cudaMalloc(reinterpret_cast<void**>(&d_out), rows * sizeof(int32_t)), "cudaMalloc");
    Check(cudaMalloc(reinterpret_cast<void**>(&d_logprobs), rows * sizeof(float)), "cudaMalloc");
    deepinfer::kernels::SamplerWorkspace ws;
    Check(static_cast<cudaError_t>(ws.Reserve(rows, vocab)), "sampler workspace");
    cudaStream_t stream;
    Check(cudaStreamCreate(&stream), "stream");
    cudaEvent_t t0, t1;
    Check(cudaEventCreate(&t0), "event");
    Check(cudaEventCreate(&t1), "event");
    for (const Kind& kind : kinds) {
      if (!only_kinds.empty() &&
          only_kinds.find("," + std::string(kind.name) + ",") == std::string::npos) {
        continue;
      }
      std::vector<deepinfer::kernels::SampleParams> params(rows, kind.params);
      for (int r = 0; r < rows; ++r) params[r].stream = r;
      deepinfer::kernels::SampleParams* d_params = Upload(params);
      // The sort every kind can take; greedy kinds also the argmax alone (GreedyRows), kinds
      // without a cut the id walk (IdOrderRows), top-k kinds the select (TopKRows): what the
      // device forward's draws take for such steps.
      const deepinfer::kernels::SampleParams& kp = kind.params;
      const bool greedy = deepinfer::IsGreedy(kp.temperature, kp.top_k);
      for (const char* path : {"sort", "argmax", "id_order", "select", "nucleus"}) {
        const std::string p = path;
        if (p == "argmax" && !greedy) continue;
        if (p == "id_order" &&
            !deepinfer::WalksIdOrder(kp.temperature, kp.top_k, kp.top_p, vocab)) {
          continue;
        }
        if (p == "select" &&
            !(kind.params.top_k >= 1 && kind.params.top_k <= deepinfer::kernels::kTopKMax)) {
          continue;
        }
        if (p == "nucleus" &&
            !deepinfer::TriesNucleusAmongSelected(kp.temperature, kp.top_k, kp.top_p, vocab)) {
          continue;
        }
        // The sort and the nucleus as the device forward's draws take them: without the walk's
        // launches where no draw walks.
        const bool walks =
            !greedy && deepinfer::WalksIdOrder(kp.temperature, kp.top_k, kp.top_p, vocab);
        const auto sample = p == "argmax"             ? deepinfer::kernels::GreedyRows
                            : p == "id_order"         ? deepinfer::kernels::IdOrderRows
                            : p == "select"           ? deepinfer::kernels::TopKRows
                            : p == "nucleus" && walks ? deepinfer::kernels::NucleusRows
                            : p == "nucleus"          ? deepinfer::kernels::NucleusRowsWithoutWalks
                            : walks                   ? deepinfer::kernels::SampleRows
                                                      : deepinfer::kernels::SortedRows;
        auto call = [&] {
          Check(static_cast<cudaError_t>(sample(ws, d_logits, rows, vocab,
                                                kind.mask ? d_mask : nullptr, d_params, nullptr,
                                                d_out, d_logprobs, stream)),
                "sampling");
        };
        call();
        call();
        const bool alone = timing != "back_to_back";
        cudaGraphExec_t graph = nullptr;
        if (timing == "graph") {
          cudaGraph_t captured;
          Check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
          call();
          Check(cudaStreamEndCapture(stream, &captured), "capture");
          Check(cudaGraphInstantiate(&graph, captured, 0), "instantiate");
          Check(cudaGraphDestroy(captured), "graph");
          Check(cudaGraphLaunch(graph, stream), "graph launch");  // warm-up
        }
        double ms = 0;
        for (int c = 0; c < (alone ? calls : 1); ++c) {
          Check(cudaStreamSynchronize(stream), "sync");
          Check(cudaEventRecord(t0, stream), "record");
          if (graph != nullptr) {
            Check(cudaGraphLaunch(graph, stream), "graph launch");
          } else {
            for (int k = 0; k < (alone ? 1 : calls); ++k) call();
          }
          Check(cudaEventRecord(t1, stream), "record");
          Check(cudaEventSynchronize(t1), "sync");
          float part = 0;
          Check(cudaEventElapsedTime(&part, t0, t1), "elapsed");
          ms += part;
        }
        const double us = 1e3 * ms / calls;
        const double floor_us = rows * static_cast<double>(vocab) * 4 / kHbmBytesPerS * 1e6;
        std::vector<int32_t> ids(rows);
        Check(cudaMemcpy(ids.data(), d_out, rows * sizeof(int32_t), cudaMemcpyDeviceToHost), "ids");
        int undrawn = 0;
        for (int32_t id : ids) undrawn += id < 0;
        std::printf(
            "{\"rows\": %d, \"vocab\": %d, \"kind\": \"%s\", \"path\": \"%s\", "
            "\"timing\": \"%s\", \"logit_sd\": %g, \"us_per_call\": %.1f, "
            "\"logits_floor_us\": %.2f, \"undrawn\": %d}\n",
            rows, vocab, kind.name, path, timing.c_str(), logit_sd, us, floor_us, undrawn);
        std::fflush(stdout);
        if (graph != nullptr) Check(cudaGraphExecDestroy(graph), "graph");
      }
      cudaFree(d_params);
    }
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    cudaStreamDestroy(stream);
    cudaFree(d_logits);
    cudaFree(d_mask);
    cudaFree(d_out);
    cudaFree(d_logprobs);
  }
  return 0;
}
