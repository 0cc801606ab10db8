// deepinferd configuration: command-line flags and a `key = value` config file.
//
// Every option has one snake_case key (`max_clients`) used in the config file and one flag
// (`--max-clients`) on the command line; flags override the file. The option table in
// config_options.cc is the single source of truth for parsing, usage text and the reload rules.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/status.h"

namespace deepinfer::daemon {

/// All deepinferd options with their defaults. Zero in a limit means "no limit beyond the
/// model's" where the comment says so.
struct DaemonConfig {
  // Set by --help: the caller prints ConfigUsage() and exits 0; no other field is meaningful.
  bool help = false;
  // The config file the options came from ("" = flags only); SIGHUP re-reads it.
  std::string config_file;
  // Keys the config file or the flags set: defaults that follow other options (forward,
  // numerics, prefix_cache_bytes on cuda and on the slot path) apply only to keys not set.
  std::vector<std::string> explicit_keys;

  // --- model and tokenizer (not reloadable) ---
  std::string model_dir;           // required: checkpoint directory (config.json + safetensors)
  std::string tokenizer_dir;       // "" = none: token-id requests only. Default: model_dir when it
                                   // holds tokenizer.json; `none` switches it off explicitly.
  std::string numerics = "exact";  // exact | reference (engine's ParseNumerics)
  std::string device = "cpu";      // cpu | cuda (the CUDA backend, stage 1)
  std::string forward = "layers";  // layers | slots (the slot path: the device forward on cuda)
  uint32_t slot_context = 4096;    // positions per sequence on the slot path (multiple of 128)
  bool park_slots = true;          // slot path: ended sequences' slots stay for their next turn
  bool share_prefixes = true;      // slot path: copies of slots at prefixes prompts share
  std::string device_sampling = "auto";  // auto | on | off: slot-path draws on the stepper
  bool folded_experts = false;           // slot path on cuda: DeviceForwardOptions::folded_experts
  uint32_t threads = 0;                  // CPU backend threads; 0 = one per online CPU
  bool warmup = true;                    // run one warm-up step before READY=1

  // --- control socket (not reloadable; ignored under socket activation, where the .socket
  // unit's ListenStream=, SocketMode= and SocketGroup= apply) ---
  std::string socket_path = "/run/deepinfer/deepinfer.sock";
  uint32_t socket_mode = 0660;
  std::string socket_group;         // as given ("" = leave the daemon's group)
  std::optional<gid_t> socket_gid;  // socket_group resolved (getgrnam or numeric)

  // --- limits (reloadable with SIGHUP) ---
  uint64_t max_frame_bytes = 4u << 20;    // largest control frame body
  uint32_t max_prompt_tokens = 0;         // 0 = the model's context length
  uint32_t max_tokens_cap = 32768;        // upper bound on a request's max_tokens
  uint32_t max_clients = 64;              // connected clients
  uint32_t max_requests_per_client = 16;  // in-flight requests per connection
  uint32_t max_requests_per_user = 0;     // in-flight requests per peer uid; 0 = no limit
  uint32_t max_backlog_events = 1024;     // per-request backlog before client_too_slow
  uint32_t drain_timeout_seconds = 10;    // SIGTERM: how long running requests may finish

  // --- engine (not reloadable) ---
  uint64_t cache_memory_bytes = 0;             // per-sequence state budget; 0 = unlimited
  uint64_t prefix_cache_bytes = 256ull << 20;  // prefix snapshots; 0 = off
  uint32_t batch_requests = 64;                // requests advanced together in one step
  uint32_t step_token_budget = 512;  // tokens per step (prefill chunks share what decode leaves)

  // --- shared memory (not reloadable) ---
  uint32_t event_ring_slots = 4096;  // slots of each client's event ring (power of two)

  // --- process ---
  bool overlap = true;             // prepare step N+1 while step N runs (--no-overlap: off)
  bool watchdog = true;            // feed the systemd watchdog when WATCHDOG_USEC is set
  std::string log_level = "info";  // trace|debug|info|warn|error|critical|off (spdlog names)
};

/// One row of the option table (for usage text, docs and tests).
struct DaemonOptionInfo {
  std::string_view key;           // config-file key, snake_case
  std::string_view value_name;    // placeholder in usage: DIR, N, PATH, ...
  std::string_view default_text;  // the default as a user would write it ("" = none)
  std::string_view meaning;
  bool reloadable;  // SIGHUP may change it
};

/// Every option, in usage order. The flag is "--" + key with '_' replaced by '-'.
const std::vector<DaemonOptionInfo>& DaemonOptions();

/// "--max-clients" for "max_clients".
std::string FlagForKey(std::string_view key);

/// Parses argv (argv[0] is the program name) and the file named by --config.
/// Flags: `--kebab-case VALUE` or `--kebab-case=VALUE`; `--config FILE`; `--help`/`-h`.
/// Config file: `key = value` lines, blank lines and lines starting with '#' ignored; a key
/// may appear once. Flags override the file; a repeated flag keeps the last value.
/// Errors: InvalidArgument naming the key (or flag) for unknown keys, missing or bad values,
/// and a missing model; NotFound for a missing model/tokenizer directory or config file.
Result<DaemonConfig> ParseDaemonArgs(int argc, char** argv);

/// Parses config-file text (exposed for tests); `origin` prefixes error messages.
/// Keys are applied on top of `config`.
Status ApplyConfigText(std::string_view text, std::string_view origin, DaemonConfig& config);

/// Sets one option from its textual value (key in snake_case). InvalidArgument names the key.
Status SetOption(DaemonConfig& config, std::string_view key, std::string_view value);

/// The keys whose values differ between `a` and `b`, in table order.
std::vector<std::string> ChangedKeys(const DaemonConfig& a, const DaemonConfig& b);

/// SIGHUP check: Ok when every key that differs between `current` and `next` is reloadable
/// (log level, limits); otherwise InvalidArgument naming the keys that need a restart. The
/// caller keeps `current` on error and adopts `next` on success. Build `next` by calling
/// ParseDaemonArgs(argc, argv) again with main()'s arguments: flags then still override the
/// file, and a key deleted from the file returns to its default (applying the file on top of
/// `current` with ApplyConfigText would get both wrong).
Status ReloadableConfig(const DaemonConfig& current, const DaemonConfig& next);

/// Usage text: synopsis and one line per option with its default and whether SIGHUP reloads it.
std::string ConfigUsage();

}  // namespace deepinfer::daemon
