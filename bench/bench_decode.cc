// bench_decode: one decode step of V4-Flash-shaped layers (bench/decode_layer.h) on the GPU, at
// several batch sizes and contexts, against the hardware's ceilings.
//   bench_decode [--layers N] [--batches 1,8,64,256] [--contexts 4096,32768,131072] [--reps R]
//                [--kernels production|cpu-order] [--gemv-max-rows 2] [--prefill TOKENS]
//                [--experts auto|tensor-cores|cuda-core|folded] [--attention auto|tensor-cores]
//                [--reserve-gb 2]
//   bench_prefill [--prefill 8192] [--contexts 8192,32768,131072] ...  (the same, prefill mode)
// production: parallel reductions, MQA split attention, the batched indexer, experts as the
// device forward takes them (--experts auto: CUDA cores at batch 1, tensor cores above; or
// tensor-cores at every batch, or cuda-core up to 8 rows, to compare; folded: the folded-scale
// wgmma GEMM where the tensor cores take them), the attention as MqaDecodeFp8Rows takes it
// (--attention auto) or MqaMmaFp8Rows (the same kernel at 64 heads), and the
// tensor-core FP8 GEMM (cuBLASLt) above --gemv-max-rows rows; cpu-order: stage 1's kernels,
// bit-identical to the CPU. N layer copies (half CSA, half HCA; default: as many as
// fit next to the largest cache) with random weights made on the device, so every kernel reads cold
// HBM. Each kernel is timed over all copies of its layer kind inside one CUDA graph; the whole
// layer likewise. Prints one JSON object per layer kind, batch and context: time per layer, the
// bytes it must read (weights in their released formats, cache rows in the reference's 584-byte
// layout) against 4.3 TB/s, the FLOP rate against the FP8 tensor-core peak, and each kernel against
// its own floor.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/decode_layer.h"

namespace {

using deepinfer::bench::DecodeStepOps;
using deepinfer::bench::DeviceArena;
using deepinfer::bench::LayerWeights;
using deepinfer::bench::Op;

constexpr double kHbmBytesPerS = 4.3e12;     // the HBM figure for the H200
constexpr double kFp8TensorFlops = 1979e12;  // H200 SXM dense FP8 tensor-core peak

std::vector<long long> ParseList(const char* s) {
  std::vector<long long> v;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) v.push_back(std::atoll(item.c_str()));
  return v;
}

// Microseconds per repetition of `body` captured once in a CUDA graph; -1 on a fault.
double TimeGraph(const std::function<int(cudaStream_t)>& body, cudaStream_t s, int reps) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return -1;
  const int launch_error = body(s);
  if (cudaStreamEndCapture(s, &graph) != cudaSuccess || launch_error != 0) return -1;
  if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) return -1;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaGraphLaunch(exec, s);  // warm-up
  cudaEventRecord(a, s);
  for (int r = 0; r < reps; ++r) cudaGraphLaunch(exec, s);
  cudaEventRecord(b, s);
  float ms = -1;
  if (cudaEventSynchronize(b) == cudaSuccess) cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return ms < 0 ? -1 : ms * 1e3 / reps;
}

// Prints the configuration's JSON line; false (and a message) when a launch or the device failed.
bool Report(const char* mode, const char* kind, int batch, long long context,
            const std::vector<Op>& ops, const std::vector<const LayerWeights*>& layers,
            const std::vector<int>& index, cudaStream_t s, int reps) {
  const double n = static_cast<double>(layers.size());
  std::vector<double> us(ops.size());
  double floor_bytes = 0, flops = 0, sum_us = 0;
  for (size_t k = 0; k < ops.size(); ++k) {
    us[k] = TimeGraph(
                [&](cudaStream_t st) {
                  for (size_t l = 0; l < layers.size(); ++l) {
                    if (const int e = ops[k].launch(*layers[l], index[l], st)) return e;
                  }
                  return 0;
                },
                s, reps) /
            n;
    if (us[k] < 0) {
      std::fprintf(stderr, "bench_decode: %s failed: %s\n", ops[k].name.c_str(),
                   cudaGetErrorString(cudaGetLastError()));
      return false;
    }
    floor_bytes += ops[k].floor_bytes;
    flops += ops[k].flops;
    sum_us += us[k];
  }
  const double layer_us = TimeGraph(
                              [&](cudaStream_t st) {
                                for (size_t l = 0; l < layers.size(); ++l) {
                                  for (const Op& op : ops) {
                                    if (const int e = op.launch(*layers[l], index[l], st)) return e;
                                  }
                                }
                                return 0;
                              },
                              s, reps) /
                          n;
  if (layer_us < 0) {
    std::fprintf(stderr, "bench_decode: the layer failed: %s\n",
                 cudaGetErrorString(cudaGetLastError()));
    return false;
  }
  const double floor_us = floor_bytes / kHbmBytesPerS * 1e6;
  std::printf(
      "{\"mode\": \"%s\", \"layer\": \"%s\", \"batch\": %d, \"context\": %lld, "
      "\"layer_us\": %.1f, "
      "\"sum_of_kernels_us\": %.1f, \"must_read_mb\": %.1f, \"hbm_floor_us\": %.1f, "
      "\"of_hbm_floor\": %.3f, \"tflop_s\": %.2f, \"of_fp8_tensor_peak\": %.4f, \"kernels\": [",
      mode, kind, batch, context, layer_us, sum_us, floor_bytes / 1e6, floor_us,
      floor_us / layer_us, flops / (layer_us * 1e-6) / 1e12,
      flops / (layer_us * 1e-6) / kFp8TensorFlops);
  std::vector<size_t> order(ops.size());
  for (size_t k = 0; k < ops.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return us[x] > us[y]; });
  for (size_t i = 0; i < order.size(); ++i) {
    const Op& op = ops[order[i]];
    const double f = op.floor_bytes / kHbmBytesPerS * 1e6;
    std::printf(
        "%s{\"name\": \"%s\", \"us\": %.1f, \"floor_us\": %.1f, \"of_floor\": %.3f, "
        "\"tflop_s\": %.1f}",
        i ? ", " : "", op.name.c_str(), us[order[i]], f, us[order[i]] > 0 ? f / us[order[i]] : 0.0,
        us[order[i]] > 0 ? op.flops / (us[order[i]] * 1e-6) / 1e12 : 0.0);
  }
  std::printf("]}\n");
  std::fflush(stdout);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int layers = 0, reps = 5, reserve_gb = 2;
  deepinfer::bench::StepKernels step_kernels;
#ifdef DEEPINFER_BENCH_PREFILL
  // bench_prefill: the same layers, one sequence's chunk of tokens instead of a decode batch.
  bool prefill = true;
  std::vector<long long> batches = {8192}, contexts = {8192, 32768, 131072};
#else
  bool prefill = false;
  std::vector<long long> batches = {1, 8, 64, 256}, contexts = {4096, 32768, 131072};
#endif
  if (argc % 2 == 0) {
    std::fprintf(stderr, "%s: every flag takes a value (see the header of bench/bench_decode.cc)\n",
                 argv[0]);
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--layers") {
      layers = std::atoi(value.c_str());
    } else if (flag == "--batches") {
      batches = ParseList(value.c_str());
    } else if (flag == "--contexts") {
      contexts = ParseList(value.c_str());
    } else if (flag == "--reps") {
      reps = std::atoi(value.c_str());
    } else if (flag == "--reserve-gb") {  // device memory left outside the arena (a profiler's)
      char* end = nullptr;
      const long gb = std::strtol(value.c_str(), &end, 10);
      reserve_gb = *end == '\0' && gb >= 1 && gb <= 4096 ? static_cast<int>(gb) : 0;
    } else if (flag == "--prefill") {  // a chunk of N tokens of one sequence
      prefill = true;
      batches = {std::atoll(value.c_str())};
    } else if (flag == "--gemv-max-rows") {
      step_kernels.gemv_max_rows = std::atoi(value.c_str());
    } else if (flag == "--experts" && value == "auto") {
      step_kernels.experts = deepinfer::bench::ExpertKernels::kAuto;
    } else if (flag == "--experts" && value == "tensor-cores") {
      step_kernels.experts = deepinfer::bench::ExpertKernels::kTensorCores;
    } else if (flag == "--experts" && value == "folded") {
      step_kernels.experts = deepinfer::bench::ExpertKernels::kFolded;
    } else if (flag == "--experts" && value == "cuda-core") {
      step_kernels.experts = deepinfer::bench::ExpertKernels::kCudaCore;
    } else if (flag == "--attention" && (value == "auto" || value == "tensor-cores")) {
      step_kernels.mma_attention = value == "tensor-cores";
    } else if (flag == "--kernels" && (value == "production" || value == "cpu-order")) {
      step_kernels.cpu_order = value == "cpu-order";
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (prefill && step_kernels.cpu_order) {
    std::fprintf(stderr, "the cpu-order kernels read gathered rows: decode only\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "bench_decode: no CUDA device\n");
    return 1;
  }
  size_t free_bytes = 0, total = 0;
  cudaMemGetInfo(&free_bytes, &total);
  if (reserve_gb < 1 || (size_t{1} << 30) * reserve_gb >= free_bytes) {
    std::fprintf(stderr, "bench_decode: --reserve-gb takes 1 .. %zu (GB of device memory)\n",
                 free_bytes >> 30);
    return 2;
  }
  const size_t arena_bytes = free_bytes - (size_t{1} << 30) * reserve_gb;
  DeviceArena arena(arena_bytes);
  // One layer is ~3.6 GB (256 MXFP4 experts); keep ~half of the arena for caches.
  if (layers <= 0) layers = std::max(2, static_cast<int>(arena_bytes / 2 / 3.7e9) / 2 * 2);
  std::vector<LayerWeights> weights(layers);
  for (int l = 0; l < layers; ++l) {
    if (!deepinfer::bench::MakeLayer(arena, l % 2 == 0, 1000u * l, &weights[l])) {
      std::fprintf(stderr, "bench_decode: %d layers do not fit\n", layers);
      return 1;
    }
  }
  cudaDeviceSynchronize();
  std::printf(
      "{\"device_layers\": %d, \"weights_gb\": %.1f, \"kernels\": \"%s\", \"experts\": \"%s\"}\n",
      layers, arena.used() / 1e9, step_kernels.cpu_order ? "cpu-order" : "production",
      step_kernels.experts == deepinfer::bench::ExpertKernels::kAuto          ? "auto"
      : step_kernels.experts == deepinfer::bench::ExpertKernels::kTensorCores ? "tensor-cores"
      : step_kernels.experts == deepinfer::bench::ExpertKernels::kFolded      ? "folded"
                                                                              : "cuda-core");
  const size_t mark = arena.used();
  cudaStream_t s;
  cudaStreamCreate(&s);
  deepinfer::kernels::Fp8GemmContext gemm;
  if (gemm.Create() != 0) {
    std::fprintf(stderr, "bench_decode: cuBLASLt unavailable\n");
    return 1;
  }
  step_kernels.gemm = &gemm;
  deepinfer::kernels::Bf16GemmContext bf16;
  if (bf16.Create() != 0) {
    std::fprintf(stderr, "bench_decode: cuBLAS unavailable\n");
    return 1;
  }
  step_kernels.bf16 = &bf16;
  for (long long batch : batches) {
    for (long long context : contexts) {
      for (bool csa : {true, false}) {
        arena.Rewind(mark);
        std::vector<const LayerWeights*> kind;
        std::vector<int> index;
        for (int l = 0; l < layers; ++l) {
          if (weights[l].csa == csa) {
            index.push_back(static_cast<int>(kind.size()));
            kind.push_back(&weights[l]);
          }
        }
        const auto ops = DecodeStepOps(arena, csa, static_cast<int>(batch), context,
                                       static_cast<int>(kind.size()), 7, step_kernels, prefill);
        if (ops.empty()) {
          std::printf(
              "{\"layer\": \"%s\", \"batch\": %lld, \"context\": %lld, \"skipped\": "
              "\"the cache does not fit next to the weights\"}\n",
              csa ? "csa" : "hca", batch, context);
          continue;
        }
        cudaDeviceSynchronize();
        if (!Report(prefill ? "prefill" : "decode", csa ? "csa" : "hca", static_cast<int>(batch),
                    context, ops, kind, index, s, reps)) {
          return 1;
        }
      }
    }
  }
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench_decode: %s\n", cudaGetErrorString(e));
    return 1;
  }
  return 0;
}
