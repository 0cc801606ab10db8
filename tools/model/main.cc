// deepinfer-model: make-tiny, inspect and logits for DeepSeek-V4 checkpoints.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/common/npy.h"
#include "engine/model/model.h"
#include "engine/model/tiny_checkpoint.h"
#include "kernels/cuda_available.h"
#include "tools/model/device_logits.h"
#include "tools/model/inspect.h"
#include "tools/model/perturbed_backend.h"
#include "tools/model/replay_error.h"

namespace deepinfer {
namespace {

constexpr const char* kUsage = R"(usage: deepinfer-model COMMAND [options]

commands:
  make-tiny --out DIR [--seed N] [--quantize none|bf16|fp8-fp4|fp8] [--vocab N] [--hidden N]
            [--ratios 0,0,4,128,4,128] [--hash-layers N] [--no-mtp] [--heads N] [--head-dim N]
            [--rope-dim N] [--q-lora N] [--o-groups N] [--o-lora N] [--window N]
            [--index-heads N] [--index-head-dim N] [--index-topk N] [--experts N] [--top-k N]
            [--moe-inter N] [--max-position N] [--residual-gain G] [--expert-gain G]
      Write a random small V4 checkpoint (config.json + model.safetensors, official names).
      --residual-gain (default 1): gain of the weights whose outputs join the residual streams
      (wo_b, the experts' w2); below 1 a tamer model. --expert-gain (default 4): gate and up.
  inspect --model DIR
      Print the config summary, tensor count, bytes by dtype and parameter count.
  logits --model DIR (--tokens 1,2,3 | --tokens-file FILE) --out FILE.npy
         [--numerics exact|reference] [--decode-from K] [--chunks A,B,...] [--threads N]
         [--device cpu|cuda] [--mtp-out FILE.npy] [--forward device]
         [--kernels production|cpu-order] [--perturb-seed N]
      Write float32 [n_tokens, vocab] next-token logits for every position. --forward device: the
      device forward (--device cuda, reference numerics); --perturb-seed: products moved 1 ulp.
  generate --model DIR --tokens 1,2,3 [--max-new N] [--numerics exact|reference] [--threads N]
      Greedy continuation: prefill the prompt, then decode N tokens one at a time; prints ids.
  replay-error --model DIR [--context N] [--decode K] [--tail T] [--seed S]
               [--numerics exact|reference] [--threads N]
      At every 128-token resume point of a random N-token context: resume by replaying the last
      T tokens without rings and partial states (the approximate resume) and decode K greedy
      tokens next to the exact state; prints the logits' error per resume point (JSON lines).
)";

using Args = std::map<std::string, std::string>;

Result<Args> ParseArgs(int argc, char** argv, int first,
                       const std::vector<std::string>& flags_with_value,
                       const std::vector<std::string>& bare_flags) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string k = argv[i];
    bool takes =
        std::find(flags_with_value.begin(), flags_with_value.end(), k) != flags_with_value.end();
    bool bare = std::find(bare_flags.begin(), bare_flags.end(), k) != bare_flags.end();
    if (takes) {
      if (i + 1 >= argc) return InvalidArgument(k + " needs a value");
      a[k] = argv[++i];
    } else if (bare) {
      a[k] = "1";
    } else {
      return InvalidArgument("unknown option '" + k + "'");
    }
  }
  return a;
}

Result<long long> ToInt(const std::string& flag, const std::string& s) {
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used != s.size()) throw std::invalid_argument(s);
    return v;
  } catch (...) {
    return InvalidArgument(flag + " expects an integer, got '" + s + "'");
  }
}

// A gain of make-tiny: a positive number up to 16.
Result<float> ToGain(const std::string& flag, const std::string& s) {
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used != s.size() || !(v > 0.0 && v <= 16.0)) throw std::invalid_argument(s);
    return static_cast<float>(v);
  } catch (...) {
    return InvalidArgument(flag + " expects a number above 0 and at most 16, got '" + s + "'");
  }
}

Result<std::vector<int32_t>> ParseIntList(const std::string& flag, const std::string& text) {
  std::vector<int32_t> out;
  std::string cur;
  auto flush = [&]() -> Status {
    if (cur.empty()) return Status::Ok();
    DI_ASSIGN_OR_RETURN(long long v, ToInt(flag, cur));
    if (v < 0 || v > INT32_MAX) return InvalidArgument(flag + ": value out of range: " + cur);
    out.push_back(static_cast<int32_t>(v));
    cur.clear();
    return Status::Ok();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      DI_RETURN_IF_ERROR(flush());
    } else {
      cur += c;
    }
  }
  DI_RETURN_IF_ERROR(flush());
  return out;
}

// Integer make-tiny flags and the TinySpec field each sets.
const std::vector<std::pair<std::string, int TinySpec::*>>& TinyIntFlags() {
  static const std::vector<std::pair<std::string, int TinySpec::*>> kFlags = {
      {"--vocab", &TinySpec::vocab},
      {"--hidden", &TinySpec::hidden},
      {"--heads", &TinySpec::heads},
      {"--head-dim", &TinySpec::head_dim},
      {"--rope-dim", &TinySpec::rope_dim},
      {"--q-lora", &TinySpec::q_lora},
      {"--o-groups", &TinySpec::o_groups},
      {"--o-lora", &TinySpec::o_lora},
      {"--window", &TinySpec::window},
      {"--index-heads", &TinySpec::index_heads},
      {"--index-head-dim", &TinySpec::index_head_dim},
      {"--index-topk", &TinySpec::index_topk},
      {"--experts", &TinySpec::experts},
      {"--top-k", &TinySpec::top_k},
      {"--moe-inter", &TinySpec::moe_inter},
      {"--hash-layers", &TinySpec::num_hash_layers},
  };
  return kFlags;
}

Status MakeTiny(const Args& a) {
  if (!a.count("--out")) return InvalidArgument("make-tiny needs --out DIR");
  TinySpec s;
  if (a.count("--seed")) {
    DI_ASSIGN_OR_RETURN(long long v, ToInt("--seed", a.at("--seed")));
    s.seed = v;
  }
  if (a.count("--quantize")) s.quantize = a.at("--quantize");
  for (const auto& [flag, field] : TinyIntFlags()) {
    if (!a.count(flag)) continue;
    DI_ASSIGN_OR_RETURN(long long v, ToInt(flag, a.at(flag)));
    if (v < 0 || v > (1 << 20)) return InvalidArgument(flag + " out of range");
    s.*field = static_cast<int>(v);
  }
  if (a.count("--max-position")) {
    DI_ASSIGN_OR_RETURN(s.max_position, ToInt("--max-position", a.at("--max-position")));
  }
  if (a.count("--ratios")) {
    DI_ASSIGN_OR_RETURN(auto r, ParseIntList("--ratios", a.at("--ratios")));
    if (r.empty()) return InvalidArgument("--ratios needs at least one layer");
    s.compress_ratios.assign(r.begin(), r.end());
  }
  if (a.count("--no-mtp")) s.mtp = false;
  if (a.count("--residual-gain")) {
    DI_ASSIGN_OR_RETURN(s.residual_gain, ToGain("--residual-gain", a.at("--residual-gain")));
  }
  if (a.count("--expert-gain")) {
    DI_ASSIGN_OR_RETURN(s.expert_gain, ToGain("--expert-gain", a.at("--expert-gain")));
  }
  DI_RETURN_IF_ERROR(MakeTinyCheckpoint(s, a.at("--out")));
  std::printf("wrote %s (seed %llu, %s)\n", a.at("--out").c_str(),
              static_cast<unsigned long long>(s.seed), s.quantize.c_str());
  return Status::Ok();
}

Status Logits(const Args& a) {
  for (const char* k : {"--model", "--out"}) {
    if (!a.count(k)) return InvalidArgument(std::string("logits needs ") + k);
  }
  const std::string device = a.count("--device") ? a.at("--device") : "cpu";
  if (device != "cpu" && device != "cuda") {
    return InvalidArgument("--device must be cpu or cuda, got '" + device + "'");
  }
  if (device == "cuda" && !CudaBuildEnabled()) {
    return Unimplemented("--device cuda: this build has no CUDA support (nvcc was not found)");
  }
  std::vector<int32_t> tokens;
  if (a.count("--tokens")) {
    DI_ASSIGN_OR_RETURN(tokens, ParseIntList("--tokens", a.at("--tokens")));
  } else if (a.count("--tokens-file")) {
    std::ifstream in(a.at("--tokens-file"));
    if (!in) return NotFound(a.at("--tokens-file") + ": cannot read");
    std::stringstream ss;
    ss << in.rdbuf();
    DI_ASSIGN_OR_RETURN(tokens, ParseIntList("--tokens-file", ss.str()));
  } else {
    return InvalidArgument("logits needs --tokens or --tokens-file");
  }
  if (tokens.empty()) return InvalidArgument("no tokens given");
  const int64_t n = static_cast<int64_t>(tokens.size());
  Numerics numerics = Numerics::kExact;
  if (a.count("--numerics")) {
    DI_ASSIGN_OR_RETURN(numerics, ParseNumerics(a.at("--numerics")));
  }
  int threads = 1;
  if (a.count("--threads")) {
    DI_ASSIGN_OR_RETURN(long long v, ToInt("--threads", a.at("--threads")));
    if (v < 1 || v > 256) return InvalidArgument("--threads must be in [1, 256]");
    threads = static_cast<int>(v);
  }
  // Chunk plan: one prefill, prefill K then single tokens, or explicit chunk sizes.
  std::vector<int64_t> chunks;
  if (a.count("--decode-from") && a.count("--chunks")) {
    return InvalidArgument("--decode-from and --chunks are exclusive");
  }
  if (a.count("--decode-from")) {
    DI_ASSIGN_OR_RETURN(long long k, ToInt("--decode-from", a.at("--decode-from")));
    if (k < 1 || k > n) return InvalidArgument("--decode-from must be in [1, n_tokens]");
    chunks.push_back(k);
    for (int64_t i = k; i < n; ++i) chunks.push_back(1);
  } else if (a.count("--chunks")) {
    DI_ASSIGN_OR_RETURN(auto sizes, ParseIntList("--chunks", a.at("--chunks")));
    int64_t total = 0;
    for (int32_t s : sizes) {
      if (s <= 0) return InvalidArgument("--chunks sizes must be positive");
      chunks.push_back(s);
      total += s;
    }
    if (total != n) return InvalidArgument("--chunks sizes must sum to the token count");
  } else {
    chunks.push_back(n);
  }
  DI_ASSIGN_OR_RETURN(auto ck, LoadCheckpoint(a.at("--model")));
  for (const auto& w : ck->warnings) spdlog::warn("{}", w);
  if (a.count("--forward") || a.count("--kernels")) {  // the device forward
    if (device != "cuda" || numerics != Numerics::kReference || a.count("--mtp-out") ||
        a.count("--perturb-seed")) {
      return InvalidArgument(
          "--forward/--kernels need --device cuda and --numerics reference, "
          "and take no --mtp-out or --perturb-seed");
    }
    DI_ASSIGN_OR_RETURN(auto out, DeviceForwardLogits(*ck, tokens, chunks, a));
    return WriteNpy(a.at("--out"), out.data(), {n, ck->config.vocab_size});
  }
  std::unique_ptr<Backend> backend;
  if (device == "cuda") {
    auto cuda = MakeCudaBackend(0);
    if (!cuda.ok())
      return Status(cuda.status().code(), "--device cuda: " + cuda.status().message());
    backend = std::move(*cuda);
  } else {
    backend = MakeCpuBackend(threads);
  }
  if (a.count("--perturb-seed")) {
    DI_ASSIGN_OR_RETURN(long long seed, ToInt("--perturb-seed", a.at("--perturb-seed")));
    backend = PerturbProducts(std::move(backend), static_cast<uint64_t>(seed));
  }
  Model model(*ck, *backend, numerics);
  const int64_t V = ck->config.vocab_size;
  const int64_t S = static_cast<int64_t>(ck->config.hc_mult) * ck->config.hidden_size;
  std::vector<float> logits(n * V), streams(n * S);
  SequenceState seq = model.NewSequence();
  const auto t0 = std::chrono::steady_clock::now();
  int64_t done = 0;
  for (int64_t c : chunks) {
    DI_RETURN_IF_ERROR(model.Forward(seq, std::span<const int32_t>(tokens.data() + done, c),
                                     &logits[done * V], &streams[done * S]));
    done += c;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  DI_RETURN_IF_ERROR(WriteNpy(a.at("--out"), logits.data(), {n, V}));
  spdlog::info("{} tokens in {} chunk(s), {:.3f} s, {} threads, cache {} bytes", n, chunks.size(),
               secs, threads, seq.bytes());
  if (a.count("--mtp-out")) {
    if (!model.has_mtp()) return InvalidArgument("--mtp-out: the checkpoint has no MTP block");
    if (n < 2) return InvalidArgument("--mtp-out needs at least two tokens");
    std::vector<float> mtp((n - 1) * V);
    DI_RETURN_IF_ERROR(model.MtpForward(
        seq, streams.data(), std::span<const int32_t>(tokens.data() + 1, n - 1), mtp.data()));
    DI_RETURN_IF_ERROR(WriteNpy(a.at("--mtp-out"), mtp.data(), {n - 1, V}));
  }
  return Status::Ok();
}

Status Generate(const Args& a) {
  for (const char* k : {"--model", "--tokens"}) {
    if (!a.count(k)) return InvalidArgument(std::string("generate needs ") + k);
  }
  DI_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, ParseIntList("--tokens", a.at("--tokens")));
  if (prompt.empty()) return InvalidArgument("--tokens is empty");
  long long max_new = 16;
  if (a.count("--max-new")) {
    DI_ASSIGN_OR_RETURN(max_new, ToInt("--max-new", a.at("--max-new")));
  }
  if (max_new < 1 || max_new > 1000000) return InvalidArgument("--max-new must be in [1, 1000000]");
  Numerics numerics = Numerics::kExact;
  if (a.count("--numerics")) {
    DI_ASSIGN_OR_RETURN(numerics, ParseNumerics(a.at("--numerics")));
  }
  int threads = 1;
  if (a.count("--threads")) {
    DI_ASSIGN_OR_RETURN(long long v, ToInt("--threads", a.at("--threads")));
    if (v < 1 || v > 256) return InvalidArgument("--threads must be in [1, 256]");
    threads = static_cast<int>(v);
  }
  DI_ASSIGN_OR_RETURN(auto ck, LoadCheckpoint(a.at("--model")));
  for (const auto& w : ck->warnings) spdlog::warn("{}", w);
  auto backend = MakeCpuBackend(threads);
  Model model(*ck, *backend, numerics);
  const int64_t V = ck->config.vocab_size;
  std::vector<float> logits(prompt.size() * V);
  SequenceState seq = model.NewSequence();
  const auto t0 = std::chrono::steady_clock::now();
  DI_RETURN_IF_ERROR(model.Forward(seq, prompt, logits.data(), nullptr));
  const float* last = &logits[(prompt.size() - 1) * V];
  std::vector<int32_t> out;
  for (long long i = 0; i < max_new; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(last, last + V) - last);
    out.push_back(next);
    std::printf("%s%d", i ? "," : "", next);
    std::fflush(stdout);
    if (next == ck->config.eos_token_id || i + 1 == max_new) break;
    DI_RETURN_IF_ERROR(
        model.Forward(seq, std::span<const int32_t>(&out.back(), 1), logits.data(), nullptr));
    last = logits.data();
  }
  std::printf("\n");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("prompt {} tokens, generated {} tokens in {:.3f} s", prompt.size(), out.size(),
               secs);
  return Status::Ok();
}

int Main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  Status st;
  if (cmd == "make-tiny") {
    std::vector<std::string> flags = {"--out",          "--seed",   "--quantize",
                                      "--max-position", "--ratios", "--residual-gain",
                                      "--expert-gain"};
    for (const auto& f : TinyIntFlags()) flags.push_back(f.first);
    auto a = ParseArgs(argc, argv, 2, flags, {"--no-mtp"});
    st = a.ok() ? MakeTiny(*a) : a.status();
  } else if (cmd == "inspect") {
    auto a = ParseArgs(argc, argv, 2, {"--model"}, {});
    st = a.ok() ? Inspect(*a) : a.status();
  } else if (cmd == "logits") {
    auto a = ParseArgs(
        argc, argv, 2,
        {"--model", "--tokens", "--tokens-file", "--out", "--numerics", "--decode-from", "--chunks",
         "--threads", "--device", "--mtp-out", "--forward", "--kernels", "--perturb-seed"},
        {});
    st = a.ok() ? Logits(*a) : a.status();
  } else if (cmd == "generate") {
    auto a = ParseArgs(argc, argv, 2,
                       {"--model", "--tokens", "--max-new", "--numerics", "--threads"}, {});
    st = a.ok() ? Generate(*a) : a.status();
  } else if (cmd == "replay-error") {
    auto a = ParseArgs(
        argc, argv, 2,
        {"--model", "--context", "--decode", "--tail", "--seed", "--numerics", "--threads"}, {});
    st = a.ok() ? ReplayError(*a) : a.status();
  } else {
    std::fprintf(stderr, "deepinfer-model: unknown command '%s'\n%s", cmd.c_str(), kUsage);
    return 2;
  }
  if (!st.ok()) {
    std::fprintf(stderr, "deepinfer-model %s: %s\n", cmd.c_str(), st.ToString().c_str());
    return st.code() == ErrorCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}

}  // namespace
}  // namespace deepinfer

int main(int argc, char** argv) { return deepinfer::Main(argc, argv); }
