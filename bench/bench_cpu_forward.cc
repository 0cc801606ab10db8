// CPU forward speed of the tiny V4 model: prefill and decode tokens/s at 1 and 2 threads.
// usage: bench_cpu_forward [--tokens N] [--quantize none|bf16|fp8-fp4] [--numerics exact|reference]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/model/tiny_checkpoint.h"

using namespace deepinfer;

int main(int argc, char** argv) {
  int n = 256;
  std::string quantize = "fp8-fp4", numerics = "exact";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens"))
      n = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--quantize"))
      quantize = argv[i + 1];
    else if (!std::strcmp(argv[i], "--numerics"))
      numerics = argv[i + 1];
  }
  const std::string dir =
      (std::filesystem::temp_directory_path() / "deepinfer_bench_tiny").string();
  TinySpec spec;
  spec.quantize = quantize;
  if (Status st = MakeTinyCheckpoint(spec, dir); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  auto ck = LoadCheckpoint(dir);
  auto mode = ParseNumerics(numerics);
  if (!ck.ok() || !mode.ok()) {
    std::fprintf(stderr, "load failed: %s\n",
                 (ck.ok() ? mode.status() : ck.status()).ToString().c_str());
    return 1;
  }
  std::vector<int32_t> tokens(n);
  for (int i = 0; i < n; ++i) tokens[i] = (i * 7919 + 13) % spec.vocab;
  const int64_t V = spec.vocab;
  std::printf("tiny V4 (hidden %d, 6 layers + MTP, %s weights, %s numerics), %d tokens\n",
              spec.hidden, quantize.c_str(), numerics.c_str(), n);
  std::printf("%-8s %14s %14s\n", "threads", "prefill tok/s", "decode tok/s");
  for (int threads : {1, 2}) {
    auto backend = MakeCpuBackend(threads);
    Model model(**ck, *backend, *mode);
    std::vector<float> logits(static_cast<size_t>(n) * V);
    auto seq = model.NewSequence();
    auto t0 = std::chrono::steady_clock::now();
    if (!model.Forward(seq, tokens, logits.data(), nullptr).ok()) return 1;
    const double prefill =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto seq2 = model.NewSequence();
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      if (!model.Forward(seq2, std::span<const int32_t>(&tokens[i], 1), logits.data(), nullptr)
               .ok())
        return 1;
    }
    const double decode =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-8d %14.1f %14.1f\n", threads, n / prefill, n / decode);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
