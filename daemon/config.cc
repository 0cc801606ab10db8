#include "daemon/config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "daemon/config_options.h"

namespace deepinfer::daemon {
namespace {

std::string_view Trim(std::string_view s) {
  size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

std::filesystem::file_type Kind(const std::string& path) {
  std::error_code ec;
  return std::filesystem::status(path, ec).type();
}
bool IsDirectory(const std::string& p) { return Kind(p) == std::filesystem::file_type::directory; }
bool IsFile(const std::string& p) { return Kind(p) == std::filesystem::file_type::regular; }

// Marks "no tokenizer option seen yet" while parsing (no setter accepts control characters).
constexpr char kTokenizerUnset[] = "\x01";

// Fills the defaults that depend on other options and checks what only a whole config can.
Status Finish(DaemonConfig& c) {
  if (c.model_dir.empty()) {
    return InvalidArgument("model: required (--model DIR, or `model = DIR` in the config file)");
  }
  if (!IsDirectory(c.model_dir)) return NotFound("model: " + c.model_dir + ": not a directory");
  const auto set = [&](std::string_view key) {
    return std::find(c.explicit_keys.begin(), c.explicit_keys.end(), key) != c.explicit_keys.end();
  };
  // On cuda the fast path is the default: the device forward, in the numerics it implements,
  // with parked slots instead of host snapshots. `--forward layers` keeps stage 1 (exact
  // numerics and snapshots on the GPU backend's ops).
  if (c.device == "cuda" && !set("forward")) c.forward = "slots";
  if (c.forward == "slots") {  // the slot path holds its caches in slots: no snapshots to copy
    if (!set("prefix_cache_bytes")) c.prefix_cache_bytes = 0;
    if (c.device == "cuda" && !set("numerics")) c.numerics = "reference";
    if (c.prefix_cache_bytes != 0) {
      return InvalidArgument(
          "forward slots: keeps no prefix snapshots (it parks slots instead); set "
          "prefix_cache_bytes 0");
    }
    if (c.slot_context % 128 != 0) return InvalidArgument("slot_context: a multiple of 128");
    if (c.cache_memory_bytes != 0) {
      return InvalidArgument(
          "forward slots: batch_requests slots bound the caches; set "
          "cache_memory_bytes 0");
    }
    if (c.device == "cuda" && c.numerics != "reference") {
      return InvalidArgument(
          "forward slots on cuda (the device forward): numerics reference; for exact numerics "
          "on the GPU, forward layers");
    }
  }
  if (c.folded_experts && (c.device != "cuda" || c.forward != "slots")) {
    return InvalidArgument(
        "folded_experts: a kernel of the device forward (device cuda, forward "
        "slots)");
  }
  if (c.tokenizer_dir == kTokenizerUnset) {
    c.tokenizer_dir = IsFile(c.model_dir + "/tokenizer.json") ? c.model_dir : "";
  } else if (!c.tokenizer_dir.empty() && !IsFile(c.tokenizer_dir + "/tokenizer.json")) {
    return NotFound("tokenizer: " + c.tokenizer_dir + ": no tokenizer.json there");
  }
  return Status::Ok();
}

Result<std::string> ReadTextFile(const std::string& path) {
  if (IsDirectory(path)) return InvalidArgument("config: " + path + ": is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("config: " + path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

const std::vector<DaemonOptionInfo>& DaemonOptions() {
  static const std::vector<DaemonOptionInfo> kInfos = [] {
    std::vector<DaemonOptionInfo> infos;
    for (const OptionSpec& spec : OptionTable()) infos.push_back(spec.info);
    return infos;
  }();
  return kInfos;
}

std::string FlagForKey(std::string_view key) {
  std::string flag = "--" + std::string(key);
  std::replace(flag.begin() + 2, flag.end(), '_', '-');
  return flag;
}

Status SetOption(DaemonConfig& config, std::string_view key, std::string_view value) {
  const OptionSpec* spec = FindOption(key);
  if (spec == nullptr) return InvalidArgument(std::string(key) + ": unknown key");
  Status st = spec->set(config, value);
  if (st.ok()) return st;
  return Status(st.code(), std::string(key) + ": " + st.message());
}

Status ApplyConfigText(std::string_view text, std::string_view origin, DaemonConfig& config) {
  std::vector<std::string> seen;
  for (size_t line_no = 1; !text.empty(); ++line_no) {
    size_t eol = text.find('\n');
    std::string_view line = Trim(text.substr(0, eol));
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (line.empty() || line.front() == '#') continue;
    std::string where = std::string(origin) + ":" + std::to_string(line_no) + ": ";
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument(where + "expected `key = value`, got `" + std::string(line) + "`");
    }
    std::string key(Trim(line.substr(0, eq)));
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return InvalidArgument(where + key + ": duplicate key");
    }
    seen.push_back(key);
    Status st = SetOption(config, key, Trim(line.substr(eq + 1)));
    if (!st.ok()) return Status(st.code(), where + st.message());
    config.explicit_keys.push_back(key);
  }
  return Status::Ok();
}

Result<DaemonConfig> ParseDaemonArgs(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> flags;  // key, value in argv order
  std::string config_file;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      DaemonConfig help;
      help.help = true;
      return help;
    }
    if (arg.size() < 3 || arg.substr(0, 2) != "--") {
      return InvalidArgument(std::string(arg) + ": unexpected argument (options are --name VALUE)");
    }
    if (arg == "--no-overlap") {  // the one bare flag: the plain, sequential engine loop
      flags.emplace_back("overlap", "off");
      continue;
    }
    std::string_view name = arg.substr(2);
    std::optional<std::string_view> value;
    if (size_t eq = name.find('='); eq != std::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    std::string flag = "--" + std::string(name);
    std::string key(name);
    std::replace(key.begin(), key.end(), '-', '_');
    if (name.find('_') != std::string_view::npos || (key != "config" && !FindOption(key))) {
      return InvalidArgument(flag + ": unknown flag (see --help)");
    }
    if (!value) {
      if (i + 1 >= argc) return InvalidArgument(flag + ": missing value");
      value = argv[++i];
    }
    if (key == "config") {
      if (value->empty()) return InvalidArgument("--config: empty path");
      config_file = std::string(*value);
    } else {
      flags.emplace_back(std::move(key), std::string(*value));
    }
  }

  DaemonConfig config;
  config.tokenizer_dir = kTokenizerUnset;
  config.config_file = config_file;
  if (!config_file.empty()) {
    DI_ASSIGN_OR_RETURN(std::string text, ReadTextFile(config_file));
    DI_RETURN_IF_ERROR(ApplyConfigText(text, config_file, config));
  }
  for (const auto& [key, value] : flags) {
    Status st = SetOption(config, key, value);
    if (!st.ok()) return Status(st.code(), FlagForKey(key) + ": " + st.message());
    config.explicit_keys.push_back(key);
  }
  DI_RETURN_IF_ERROR(Finish(config));
  return config;
}

std::vector<std::string> ChangedKeys(const DaemonConfig& a, const DaemonConfig& b) {
  std::vector<std::string> keys;
  for (const OptionSpec& spec : OptionTable()) {
    if (!spec.same(a, b)) keys.emplace_back(spec.info.key);
  }
  return keys;
}

Status ReloadableConfig(const DaemonConfig& current, const DaemonConfig& next) {
  std::string fixed;
  for (const OptionSpec& spec : OptionTable()) {
    if (spec.info.reloadable || spec.same(current, next)) continue;
    fixed += (fixed.empty() ? "" : ", ") + std::string(spec.info.key);
  }
  if (fixed.empty()) return Status::Ok();
  return InvalidArgument(fixed + ": changed, but only a restart applies it (SIGHUP reloads " +
                         "log_level and the limits)");
}

std::string ConfigUsage() {
  std::string out =
      "usage: deepinferd --model DIR [--config FILE] [--OPTION VALUE ...]\n\n"
      "Each option is a flag (--max-clients 32 or --max-clients=32) and a config-file key\n"
      "(max_clients = 32); flags override the file. * = SIGHUP reloads it.\n"
      "  --config FILE                   `key = value` lines; lines starting with # are comments\n"
      "  --help                          print this text\n";
  for (const DaemonOptionInfo& o : DaemonOptions()) {
    std::string flag = FlagForKey(o.key) + " " + std::string(o.value_name);
    out += "  " + flag + std::string(flag.size() < 30 ? 30 - flag.size() : 1, ' ');
    out += (o.reloadable ? "* " : "  ") + std::string(o.meaning) + "\n";
    out += std::string(34, ' ') + "key " + std::string(o.key) + ", default ";
    out += (o.default_text.empty() ? "none" : std::string(o.default_text)) + "\n";
  }
  return out;
}

}  // namespace deepinfer::daemon
