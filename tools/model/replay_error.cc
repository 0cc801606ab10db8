#include "tools/model/replay_error.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/cache/tail_replay.h"
#include "engine/model/model.h"

namespace deepinfer {

namespace {

Result<long long> IntArg(const std::map<std::string, std::string>& a, const std::string& key,
                         long long fallback, long long lo, long long hi) {
  if (!a.count(key)) return fallback;
  char* end = nullptr;
  const long long v = std::strtoll(a.at(key).c_str(), &end, 10);
  if (end == a.at(key).c_str() || *end != '\0' || v < lo || v > hi) {
    return InvalidArgument(key + " must be an integer in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
  }
  return v;
}

// Per-position error of `got` against `want` (max |difference| over max |want|) and whether
// both pick the same token.
struct Compare {
  double worst_rel = 0, sum_rel = 0;
  int agree = 0, rows = 0;
  void Add(const float* got, const float* want, int64_t vocab) {
    double diff = 0, scale = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      diff = std::max(diff, static_cast<double>(std::fabs(got[v] - want[v])));
      scale = std::max(scale, static_cast<double>(std::fabs(want[v])));
    }
    const double rel = scale > 0 ? diff / scale : diff;
    worst_rel = std::max(worst_rel, std::isnan(rel) ? INFINITY : rel);
    sum_rel += rel;
    agree +=
        std::max_element(got, got + vocab) == got + (std::max_element(want, want + vocab) - want);
    ++rows;
  }
};

}  // namespace

Status ReplayError(const std::map<std::string, std::string>& a) {
  if (!a.count("--model")) return InvalidArgument("replay-error needs --model");
  DI_ASSIGN_OR_RETURN(long long context, IntArg(a, "--context", 1024, 128, 1 << 20));
  DI_ASSIGN_OR_RETURN(long long decode, IntArg(a, "--decode", 32, 1, 4096));
  DI_ASSIGN_OR_RETURN(long long tail, IntArg(a, "--tail", 128, 1, 1 << 20));
  DI_ASSIGN_OR_RETURN(long long seed, IntArg(a, "--seed", 1, 0, 1LL << 40));
  DI_ASSIGN_OR_RETURN(long long threads, IntArg(a, "--threads", 1, 1, 256));
  Numerics numerics = Numerics::kExact;
  if (a.count("--numerics")) {
    DI_ASSIGN_OR_RETURN(numerics, ParseNumerics(a.at("--numerics")));
  }
  DI_ASSIGN_OR_RETURN(auto ck, LoadCheckpoint(a.at("--model")));
  auto backend = MakeCpuBackend(static_cast<int>(threads));
  Model model(*ck, *backend, numerics);
  const int64_t vocab = ck->config.vocab_size;

  // A random prompt, then the exact model's greedy continuation: both resumes decode the same
  // tokens (teacher forcing), so logits compare position by position.
  std::vector<int32_t> tokens;
  uint64_t state = static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull + 1;
  for (long long i = 0; i < context; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    tokens.push_back(static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(vocab)));
  }
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (int64_t resume = 128; resume <= context; resume += 128) {
    SequenceState exact = model.NewSequence();
    const std::span<const int32_t> prefix(tokens.data(), static_cast<size_t>(resume));
    BatchItem item{&exact, prefix, logits.data(), nullptr, true};
    DI_RETURN_IF_ERROR(model.ForwardBatch(std::span<BatchItem>(&item, 1)));
    DI_ASSIGN_OR_RETURN(SequenceState approx, ResumeByTailReplay(model, exact, prefix, tail));
    Compare cmp;
    std::vector<float> want(static_cast<size_t>(vocab));
    int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    for (long long k = 0; k < decode; ++k) {
      const std::span<const int32_t> one(&next, 1);
      DI_RETURN_IF_ERROR(model.Forward(exact, one, want.data(), nullptr));
      DI_RETURN_IF_ERROR(model.Forward(approx, one, logits.data(), nullptr));
      cmp.Add(logits.data(), want.data(), vocab);
      next = static_cast<int32_t>(std::max_element(want.begin(), want.end()) - want.begin());
    }
    std::printf(
        "{\"resume_at\": %lld, \"tail\": %lld, \"decoded\": %d, \"max_rel_err\": %.3e, "
        "\"mean_rel_err\": %.3e, \"argmax_agreement\": %.4f}\n",
        static_cast<long long>(resume), tail, cmp.rows, cmp.worst_rel, cmp.sum_rel / cmp.rows,
        static_cast<double>(cmp.agree) / cmp.rows);
    std::fflush(stdout);
  }
  return Status::Ok();
}

}  // namespace deepinfer
