#include "daemon/config_options.h"

#include <grp.h>
#include <sys/un.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <system_error>
#include <type_traits>

namespace deepinfer::daemon {
namespace {

// --- value parsers: each returns InvalidArgument with the reason; callers prefix the key ---

Result<uint64_t> ParseUint(std::string_view v, uint64_t lo, uint64_t hi, bool sizes = false) {
  uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec == std::errc::invalid_argument) {
    return InvalidArgument("expected a non-negative integer, got `" + std::string(v) + "`");
  }
  std::string_view suffix(ptr, v.data() + v.size() - ptr);
  uint64_t unit = 1;
  if (sizes && (suffix == "K" || suffix == "KiB")) unit = 1ull << 10;
  if (sizes && (suffix == "M" || suffix == "MiB")) unit = 1ull << 20;
  if (sizes && (suffix == "G" || suffix == "GiB")) unit = 1ull << 30;
  if (!suffix.empty() && unit == 1) {
    return InvalidArgument("expected an integer" + std::string(sizes ? " [K|M|G]" : "") +
                           ", got `" + std::string(v) + "`");
  }
  if (ec == std::errc::result_out_of_range || n > hi / unit || n * unit < lo) {
    return InvalidArgument("must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                           ", got `" + std::string(v) + "`");
  }
  return n * unit;
}

Result<bool> ParseBool(std::string_view v) {
  if (v == "on" || v == "true" || v == "yes" || v == "1") return true;
  if (v == "off" || v == "false" || v == "no" || v == "0") return false;
  return InvalidArgument("expected on|off, got `" + std::string(v) + "`");
}

Status CheckPath(std::string_view v) {
  if (v.empty()) return InvalidArgument("empty path");
  for (char ch : v) {
    if (static_cast<unsigned char>(ch) < 0x20) return InvalidArgument("control character in path");
  }
  return Status::Ok();
}

// --- setters and comparisons, generic over the DaemonConfig member ---

template <auto M>
bool Same(const DaemonConfig& a, const DaemonConfig& b) {
  return a.*M == b.*M;
}

template <auto M, uint64_t Lo, uint64_t Hi, bool Sizes = false>
Status SetUint(DaemonConfig& c, std::string_view v) {
  DI_ASSIGN_OR_RETURN(uint64_t n, ParseUint(v, Lo, Hi, Sizes));
  c.*M = static_cast<std::remove_reference_t<decltype(c.*M)>>(n);
  return Status::Ok();
}

template <auto M>
Status SetBool(DaemonConfig& c, std::string_view v) {
  DI_ASSIGN_OR_RETURN(c.*M, ParseBool(v));
  return Status::Ok();
}

template <auto M>
Status SetPath(DaemonConfig& c, std::string_view v) {
  DI_RETURN_IF_ERROR(CheckPath(v));
  c.*M = std::string(v);
  return Status::Ok();
}

constexpr std::string_view kNumerics[] = {"exact", "reference"};
constexpr std::string_view kDevices[] = {"cpu", "cuda"};
constexpr std::string_view kForwards[] = {"layers", "slots"};
constexpr std::string_view kDeviceSampling[] = {"auto", "on", "off"};
constexpr std::string_view kLogLevels[] = {"trace", "debug",    "info", "warn",
                                           "error", "critical", "off"};

template <auto M, const auto& Names>
Status SetOneOf(DaemonConfig& c, std::string_view v) {
  std::string names;
  for (std::string_view name : Names) {
    if (v == name) {
      c.*M = std::string(v);
      return Status::Ok();
    }
    names += (names.empty() ? "" : "|") + std::string(name);
  }
  return InvalidArgument("expected " + names + ", got `" + std::string(v) + "`");
}

Status SetTokenizer(DaemonConfig& c, std::string_view v) {
  if (v != "none") DI_RETURN_IF_ERROR(CheckPath(v));
  c.tokenizer_dir = v == "none" ? "" : std::string(v);
  return Status::Ok();
}

Status SetSocketPath(DaemonConfig& c, std::string_view v) {
  DI_RETURN_IF_ERROR(CheckPath(v));
  if (v.front() != '/') return InvalidArgument("must be an absolute path");
  if (v.size() >= sizeof(sockaddr_un::sun_path)) {
    return InvalidArgument("longer than " + std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                           " bytes (the AF_UNIX limit)");
  }
  c.socket_path = std::string(v);
  return Status::Ok();
}

Status SetSocketMode(DaemonConfig& c, std::string_view v) {
  bool octal = !v.empty() && v.size() <= 4 &&
               std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '7'; });
  uint32_t mode = 0;
  if (octal) std::from_chars(v.data(), v.data() + v.size(), mode, 8);
  if (!octal || mode > 0777) {
    return InvalidArgument("expected octal bits like 0660, got `" + std::string(v) + "`");
  }
  c.socket_mode = mode;
  return Status::Ok();
}

Status SetSocketGroup(DaemonConfig& c, std::string_view v) {
  if (v.empty()) {
    c.socket_group.clear();
    c.socket_gid.reset();
    return Status::Ok();
  }
  gid_t gid = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), gid);
  if (ec != std::errc() || ptr != v.data() + v.size()) {
    std::string name(v);
    group grp{};
    group* found = nullptr;
    std::vector<char> buf(16384);
    if (getgrnam_r(name.c_str(), &grp, buf.data(), buf.size(), &found) != 0 || !found) {
      return InvalidArgument("no group named `" + name + "`");
    }
    gid = found->gr_gid;
  }
  c.socket_group = std::string(v);
  c.socket_gid = gid;
  return Status::Ok();
}

Status SetRingSlots(DaemonConfig& c, std::string_view v) {
  DI_ASSIGN_OR_RETURN(uint64_t n, ParseUint(v, 16, 1u << 20));
  if ((n & (n - 1)) != 0) return InvalidArgument("must be a power of two, got " + std::string(v));
  c.event_ring_slots = static_cast<uint32_t>(n);
  return Status::Ok();
}

using C = DaemonConfig;
constexpr uint32_t kMaxU32 = 0xffffffffu;

}  // namespace

// The option table: usage order; key, value name, default, meaning, reloadable; setter, compare.
// clang-format off
const std::vector<OptionSpec>& OptionTable() {
  static const std::vector<OptionSpec> kTable = {
    {{"model", "DIR", "", "checkpoint directory (config.json + *.safetensors); required", false},
     SetPath<&C::model_dir>, Same<&C::model_dir>},
    {{"tokenizer", "DIR|none", "the model dir if it has tokenizer.json, else none",
      "directory holding tokenizer.json; none = token-id requests only", false},
     SetTokenizer, Same<&C::tokenizer_dir>},
    {{"numerics", "exact|reference", "exact",
      "fp32 math, or the official FP8/FP4 rounding (unset with forward slots on cuda: reference)",
      false},
     SetOneOf<&C::numerics, kNumerics>, Same<&C::numerics>},
    {{"device", "cpu|cuda", "cpu",
      "the backend: the exact CPU one, or the CUDA one (GPU 0; an error without CUDA)", false},
     SetOneOf<&C::device, kDevices>, Same<&C::device>},
    {{"forward", "layers|slots", "layers",
      "layers: the model's forward over the backend; slots: sequences in slots, on cuda the device "
      "forward (device caches, CUDA graphs; numerics reference), on cpu its CPU reference; needs "
      "prefix_cache_bytes 0 (its default there) and cache_memory_bytes 0; unset on cuda: slots",
      false},
     SetOneOf<&C::forward, kForwards>, Same<&C::forward>},
    {{"slot_context", "N", "4096", "positions per sequence with forward slots (multiple of 128)",
      false},
     SetUint<&C::slot_context, 128, 1u << 24>, Same<&C::slot_context>},
    {{"park_slots", "on|off", "on",
      "with forward slots, an ended request's slot stays parked under its tokens until a new "
      "sequence needs it; a request whose prompt extends them continues there and prefills only "
      "the rest (a conversation's next turn, when it repeats the earlier one as the same tokens)",
      false},
     SetBool<&C::park_slots>, Same<&C::park_slots>},
    {{"share_prefixes", "on|off", "on",
      "with forward slots and park_slots, a prompt that shares a 128-token-aligned prefix with an "
      "earlier one leaves a copy of its slot there (a donor, kept like a parked slot), and later "
      "requests with that prefix start from a copy of it: exact; needs a stepper that copies "
      "slots (the CPU reference and the device forward do)",
      false},
     SetBool<&C::share_prefixes>, Same<&C::share_prefixes>},
    {{"device_sampling", "auto|on|off", "auto",
      "with forward slots, sampled requests without logit processors draw their tokens on the "
      "stepper (with their grammar's mask, made before the step): one id (and log-probability) "
      "comes back instead of a vocabulary-wide row of logits and a host draw; the same tokens "
      "either way. auto: on with device cuda, off on the CPU reference (whose draws run one "
      "after another)",
      false},
     SetOneOf<&C::device_sampling, kDeviceSampling>, Same<&C::device_sampling>},
    {{"folded_experts", "on|off", "off",
      "with forward slots on cuda, steps whose experts average 64 tokens (prompt chunks) take "
      "the folded-scale wgmma GEMM: ~2.8x faster experts, sums within ~1e-3 of their magnitudes "
      "instead of fp32 rounding; every expert's scales must fold",
      false},
     SetBool<&C::folded_experts>, Same<&C::folded_experts>},
    {{"threads", "N", "0", "CPU backend threads; 0 = one per online CPU", false},
     SetUint<&C::threads, 0, 1024>, Same<&C::threads>},
    {{"warmup", "on|off", "on", "run one warm-up step before reporting ready", false},
     SetBool<&C::warmup>, Same<&C::warmup>},
    {{"socket", "PATH", "/run/deepinfer/deepinfer.sock",
      "control socket (ignored under socket activation)", false},
     SetSocketPath, Same<&C::socket_path>},
    {{"socket_mode", "OCTAL", "0660", "permission bits of the control socket", false},
     SetSocketMode, Same<&C::socket_mode>},
    {{"socket_group", "GROUP", "", "group (name or number) that owns the control socket", false},
     SetSocketGroup, Same<&C::socket_group>},
    {{"max_frame_bytes", "BYTES", "4MiB", "largest control frame (suffix K, M or G)", true},
     SetUint<&C::max_frame_bytes, 4096, 1ull << 30, true>, Same<&C::max_frame_bytes>},
    {{"max_prompt_tokens", "N", "0", "longest prompt; 0 = the model's context length", true},
     SetUint<&C::max_prompt_tokens, 0, kMaxU32>, Same<&C::max_prompt_tokens>},
    {{"max_tokens_cap", "N", "32768", "largest max_tokens a request may ask for", true},
     SetUint<&C::max_tokens_cap, 1, kMaxU32>, Same<&C::max_tokens_cap>},
    {{"max_clients", "N", "64", "connected clients; more are refused", true},
     SetUint<&C::max_clients, 1, 65536>, Same<&C::max_clients>},
    {{"max_requests_per_client", "N", "16", "in-flight requests per connection", true},
     SetUint<&C::max_requests_per_client, 1, 65536>, Same<&C::max_requests_per_client>},
    {{"max_requests_per_user", "N", "0", "in-flight requests per peer uid; 0 = no limit", true},
     SetUint<&C::max_requests_per_user, 0, kMaxU32>, Same<&C::max_requests_per_user>},
    {{"max_backlog_events", "N", "1024",
      "events a request may queue behind a full ring before client_too_slow", true},
     SetUint<&C::max_backlog_events, 0, 1u << 24>, Same<&C::max_backlog_events>},
    {{"drain_timeout_seconds", "N", "10",
      "on SIGTERM, how long running requests may finish (keep below TimeoutStopSec)", true},
     SetUint<&C::drain_timeout_seconds, 0, 3600>, Same<&C::drain_timeout_seconds>},
    {{"cache_memory_bytes", "BYTES", "0",
      "memory for sequences' cache state (suffix K, M or G); past it the newest running request is "
      "preempted and recomputed later; 0 = unlimited", false},
     SetUint<&C::cache_memory_bytes, 0, 1ull << 40, true>, Same<&C::cache_memory_bytes>},
    {{"prefix_cache_bytes", "BYTES", "256M",
      "memory for prefix snapshots at 128-token boundaries (suffix K, M or G); 0 = off (and unset "
      "with forward slots)",
      false},
     SetUint<&C::prefix_cache_bytes, 0, 1ull << 40, true>, Same<&C::prefix_cache_bytes>},
    {{"batch_requests", "N", "64", "requests advanced together in one engine step", false},
     SetUint<&C::batch_requests, 1, 4096>, Same<&C::batch_requests>},
    {{"step_token_budget", "N", "512",
      "tokens per engine step (prefill chunks share what decode leaves)", false},
     SetUint<&C::step_token_budget, 1, 1u << 20>, Same<&C::step_token_budget>},
    {{"overlap", "on|off", "on",
      "prepare the next engine step (grammar masks, new requests) while the model runs; "
      "--no-overlap is --overlap off", false},
     SetBool<&C::overlap>, Same<&C::overlap>},
    {{"event_ring_slots", "N", "4096", "slots of each client's event ring (power of two)", false},
     SetRingSlots, Same<&C::event_ring_slots>},
    {{"watchdog", "on|off", "on", "feed the systemd watchdog when WatchdogSec= is set", false},
     SetBool<&C::watchdog>, Same<&C::watchdog>},
    {{"log_level", "LEVEL", "info", "trace|debug|info|warn|error|critical|off", true},
     SetOneOf<&C::log_level, kLogLevels>, Same<&C::log_level>},
  };
  return kTable;
}
// clang-format on

const OptionSpec* FindOption(std::string_view key) {
  for (const OptionSpec& spec : OptionTable()) {
    if (spec.info.key == key) return &spec;
  }
  return nullptr;
}

}  // namespace deepinfer::daemon
