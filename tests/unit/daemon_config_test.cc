// deepinferd configuration: flags, config file, precedence and errors (the option table's
// reload rules, usage text and docs: config_options_test.cc).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/config.h"

namespace deepinfer::daemon {
namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "deepinfer-config-XXXXXX";
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
    EXPECT_FALSE(path_.empty());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

Result<DaemonConfig> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "deepinferd");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return ParseDaemonArgs(static_cast<int>(args.size()), argv.data());
}

// The error message of a failed parse ("" when it succeeded).
template <typename T>
std::string Error(const Result<T>& r) {
  return r.ok() ? "" : r.status().message();
}

class DaemonConfigTest : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directory(model_); }
  TempDir dir_;
  std::string model_ = dir_ / "model";
};

TEST_F(DaemonConfigTest, DefaultsWithOnlyModel) {
  auto c = Parse({"--model", model_});
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_FALSE(c->help);
  EXPECT_EQ(c->model_dir, model_);
  EXPECT_EQ(c->tokenizer_dir, "");  // no tokenizer.json: token-id requests only
  EXPECT_EQ(c->socket_path, "/run/deepinfer/deepinfer.sock");
  EXPECT_EQ(c->socket_mode, 0660u);
  EXPECT_EQ(c->socket_group, "");
  EXPECT_FALSE(c->socket_gid.has_value());
  EXPECT_EQ(c->threads, 0u);
  EXPECT_EQ(c->numerics, "exact");
  EXPECT_EQ(c->forward, "layers");
  EXPECT_EQ(c->slot_context, 4096u);
  EXPECT_EQ(c->max_frame_bytes, 4u << 20);
  EXPECT_EQ(c->max_prompt_tokens, 0u);
  EXPECT_EQ(c->max_tokens_cap, 32768u);
  EXPECT_EQ(c->max_clients, 64u);
  EXPECT_EQ(c->max_requests_per_client, 16u);
  EXPECT_EQ(c->max_requests_per_user, 0u);
  EXPECT_EQ(c->event_ring_slots, 4096u);
  EXPECT_EQ(c->max_backlog_events, 1024u);
  EXPECT_EQ(c->drain_timeout_seconds, 10u);
  EXPECT_TRUE(c->watchdog);
  EXPECT_EQ(c->log_level, "info");
  EXPECT_TRUE(c->warmup);
  EXPECT_EQ(c->config_file, "");
}

TEST_F(DaemonConfigTest, TokenizerDefaultsToModelDirWithTokenizerJson) {
  WriteFile(model_ + "/tokenizer.json", "{}");
  auto c = Parse({"--model", model_});
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_EQ(c->tokenizer_dir, model_);
  c = Parse({"--model", model_, "--tokenizer", "none"});
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_EQ(c->tokenizer_dir, "");
  std::string tok = dir_ / "tok";
  std::filesystem::create_directory(tok);
  c = Parse({"--model", model_, "--tokenizer", tok});
  EXPECT_EQ(c.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(Error(c).find("tokenizer"), std::string::npos);
  WriteFile(tok + "/tokenizer.json", "{}");
  c = Parse({"--model", model_, "--tokenizer", tok});
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_EQ(c->tokenizer_dir, tok);
}

TEST_F(DaemonConfigTest, EveryFlag) {
  auto c = Parse({"--model",
                  model_,
                  "--socket",
                  "/tmp/x.sock",
                  "--socket-mode",
                  "0600",
                  "--socket-group",
                  "0",
                  "--threads",
                  "8",
                  "--numerics",
                  "reference",
                  "--max-frame-bytes",
                  "1MiB",
                  "--max-prompt-tokens",
                  "1000",
                  "--max-tokens-cap",
                  "500",
                  "--max-clients",
                  "3",
                  "--max-requests-per-client",
                  "2",
                  "--max-requests-per-user=5",
                  "--event-ring-slots",
                  "256",
                  "--max-backlog-events",
                  "7",
                  "--drain-timeout-seconds",
                  "0",
                  "--watchdog",
                  "off",
                  "--log-level",
                  "debug",
                  "--warmup",
                  "no",
                  "--batch-requests",
                  "8",
                  "--prefix-cache-bytes",
                  "0",
                  "--step-token-budget",
                  "100",
                  "--no-overlap",
                  "--device",
                  "cuda",
                  "--forward",
                  "slots",
                  "--slot-context",
                  "8192",
                  "--park-slots",
                  "off",
                  "--share-prefixes",
                  "off",
                  "--device-sampling",
                  "off",
                  "--folded-experts",
                  "on"});
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_EQ(c->socket_path, "/tmp/x.sock");
  EXPECT_EQ(c->socket_mode, 0600u);
  EXPECT_EQ(c->socket_group, "0");
  EXPECT_EQ(c->socket_gid, gid_t{0});
  EXPECT_EQ(c->threads, 8u);
  EXPECT_EQ(c->numerics, "reference");
  EXPECT_EQ(c->max_frame_bytes, 1u << 20);
  EXPECT_EQ(c->max_prompt_tokens, 1000u);
  EXPECT_EQ(c->max_tokens_cap, 500u);
  EXPECT_EQ(c->max_clients, 3u);
  EXPECT_EQ(c->max_requests_per_client, 2u);
  EXPECT_EQ(c->max_requests_per_user, 5u);
  EXPECT_EQ(c->event_ring_slots, 256u);
  EXPECT_EQ(c->max_backlog_events, 7u);
  EXPECT_EQ(c->drain_timeout_seconds, 0u);
  EXPECT_FALSE(c->watchdog);
  EXPECT_EQ(c->log_level, "debug");
  EXPECT_FALSE(c->warmup);
  EXPECT_EQ(c->batch_requests, 8u);
  EXPECT_EQ(c->prefix_cache_bytes, 0u);
  EXPECT_EQ(c->step_token_budget, 100u);
  EXPECT_FALSE(c->overlap);
  EXPECT_EQ(c->device, "cuda");
  EXPECT_EQ(c->forward, "slots");
  EXPECT_EQ(c->slot_context, 8192u);
  EXPECT_FALSE(c->park_slots);
  EXPECT_FALSE(c->share_prefixes);
  EXPECT_EQ(c->device_sampling, "off");
  EXPECT_TRUE(c->folded_experts);
  // Every option but two differs from its default, so the test covers the whole table: the
  // tokenizer, and cache_memory_bytes, which the slot path refuses (parsed just below).
  EXPECT_EQ(ChangedKeys(*c, DaemonConfig()).size() + 2, DaemonOptions().size());
  c = Parse({"--model", model_, "--cache-memory-bytes", "64M"});
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_EQ(c->cache_memory_bytes, 64ull << 20);
}

TEST_F(DaemonConfigTest, SocketGroupByName) {
  auto c = Parse({"--model", model_, "--socket-group", "root"});
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_EQ(c->socket_gid, gid_t{0});
  c = Parse({"--model", model_, "--socket-group", "no-such-group-deepinfer"});
  EXPECT_EQ(c.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(Error(c).find("socket-group"), std::string::npos);
}

TEST_F(DaemonConfigTest, ConfigFileAndPrecedence) {
  std::string conf = dir_ / "d.conf";
  WriteFile(conf, "# comment\n\n  model = " + model_ +
                      "  \nmax_clients=5\n   # indented comment\nlog_level = warn\r\n"
                      "tokenizer = none\n");
  auto c = Parse({"--config", conf});
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_EQ(c->model_dir, model_);
  EXPECT_EQ(c->max_clients, 5u);
  EXPECT_EQ(c->log_level, "warn");
  EXPECT_EQ(c->config_file, conf);
  // Flags win over the file, wherever --config appears; a repeated flag keeps the last value.
  c = Parse(
      {"--max-clients", "9", "--config", conf, "--log-level", "error", "--log-level", "trace"});
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_EQ(c->max_clients, 9u);
  EXPECT_EQ(c->log_level, "trace");
  EXPECT_EQ(c->tokenizer_dir, "");
}

TEST_F(DaemonConfigTest, ConfigFileErrorsNameKeyAndLine) {
  struct Case {
    std::string text, expect;
  };
  std::vector<Case> cases = {
      {"bogus_key = 1\n", "bogus_key: unknown key"},
      {"max_clients = 1\nmax_clients = 2\n", ":2: max_clients: duplicate key"},
      {"\nmodel\n", ":2: expected `key = value`"},
      {"config = other.conf\n", "config: unknown key"},
      {"help = 1\n", "help: unknown key"},
      {"max-clients = 3\n", "max-clients: unknown key"},
      {"max_clients = lots\n", ":1: max_clients: expected a non-negative integer"},
      {"socket_mode = 0999\n", "socket_mode: expected octal"},
  };
  std::string conf = dir_ / "bad.conf";
  for (const Case& tc : cases) {
    WriteFile(conf, tc.text);
    auto c = Parse({"--config", conf, "--model", model_});
    EXPECT_EQ(c.status().code(), ErrorCode::kInvalidArgument) << tc.text;
    EXPECT_NE(Error(c).find(tc.expect), std::string::npos) << tc.text << " -> " << Error(c);
    EXPECT_NE(Error(c).find(conf), std::string::npos) << Error(c);
  }
  auto c = Parse({"--config", dir_ / "missing.conf"});
  EXPECT_EQ(c.status().code(), ErrorCode::kNotFound);
  c = Parse({"--config", dir_.path()});
  EXPECT_EQ(c.status().code(), ErrorCode::kInvalidArgument);
}

// On cuda the device forward is the default, with the numerics it implements and parked slots
// instead of snapshots; whatever the file or the flags set stays as set.
TEST_F(DaemonConfigTest, CudaDefaultsToTheDeviceForward) {
  auto c = Parse({"--model", model_, "--device", "cuda"});
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_EQ(c->forward, "slots");
  EXPECT_EQ(c->numerics, "reference");
  EXPECT_EQ(c->prefix_cache_bytes, 0u);
  c = Parse({"--model", model_, "--device", "cuda", "--forward", "layers"});  // stage 1
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_EQ(c->numerics, "exact");
  EXPECT_EQ(c->prefix_cache_bytes, 256ull << 20);
  c = Parse({"--model", model_, "--forward", "slots"});  // the CPU reference of the slot path
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_EQ(c->device, "cpu");
  EXPECT_EQ(c->numerics, "exact");
  EXPECT_EQ(c->prefix_cache_bytes, 0u);
  const std::string file = dir_ / "cuda.conf";
  std::ofstream(file) << "device = cuda\nforward = layers\n";
  c = Parse({"--model", model_, "--config", file});  // keys from the file count as set
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_EQ(c->forward, "layers");
  EXPECT_EQ(c->prefix_cache_bytes, 256ull << 20);
  // folded_experts is a kernel of the device forward: refused anywhere else.
  c = Parse({"--model", model_, "--device", "cuda", "--folded-experts", "on"});
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_TRUE(c->folded_experts);
  for (const auto& other : {std::vector<std::string>{"--device", "cuda", "--forward", "layers"},
                            std::vector<std::string>{"--forward", "slots"}}) {
    std::vector<std::string> args = {"--model", model_, "--folded-experts", "on"};
    args.insert(args.end(), other.begin(), other.end());
    c = Parse(args);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(Error(c).find("folded_experts"), std::string::npos) << Error(c);
  }
}

TEST_F(DaemonConfigTest, FlagErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  std::vector<Case> cases = {
      {{"--bogus", "1"}, "--bogus: unknown flag"},
      {{"--max_clients", "1"}, "--max_clients: unknown flag"},
      {{"--max-clients"}, "--max-clients: missing value"},
      {{"stray"}, "stray: unexpected argument"},
      {{"-x"}, "-x: unexpected argument"},
      {{"--config", ""}, "--config: empty path"},
      // The slot path keeps no prefix snapshots, holds whole 128-position blocks, and on cuda
      // (the device forward) runs the reference numerics.
      {{"--forward", "slots", "--prefix-cache-bytes", "64M"}, "set prefix_cache_bytes 0"},
      {{"--forward", "slots", "--slot-context", "200"}, "slot_context: a multiple of 128"},
      {{"--device", "cuda", "--numerics", "exact"},
       "for exact numerics on the GPU, forward layers"},
      {{"--forward", "slots", "--prefix-cache-bytes", "0", "--cache-memory-bytes", "1M"},
       "set cache_memory_bytes 0"},
      {{"--forward", "device"}, "forward"},
  };
  for (const Case& tc : cases) {
    std::vector<std::string> args = {"--model", model_};
    args.insert(args.end(), tc.args.begin(), tc.args.end());
    auto c = Parse(args);
    EXPECT_EQ(c.status().code(), ErrorCode::kInvalidArgument) << tc.expect;
    EXPECT_NE(Error(c).find(tc.expect), std::string::npos) << tc.expect << " -> " << Error(c);
  }
  auto c = Parse({});
  EXPECT_EQ(c.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(Error(c).find("model: required"), std::string::npos) << Error(c);
  c = Parse({"--model", dir_ / "absent"});
  EXPECT_EQ(c.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(Error(c).find("model"), std::string::npos);
}

TEST_F(DaemonConfigTest, BadValuesNameTheKey) {
  std::vector<std::pair<std::string, std::string>> bad = {
      {"model", ""},
      {"tokenizer", ""},
      {"socket", "relative.sock"},
      {"socket", "/" + std::string(120, 'a')},
      {"socket_mode", "rw"},
      {"socket_mode", "01777"},
      {"socket_mode", "1000"},
      {"socket_group", "no-such-group-deepinfer"},
      {"threads", "-1"},
      {"threads", "100000"},
      {"numerics", "fast"},
      {"max_frame_bytes", "1K"},
      {"max_frame_bytes", "4X"},
      {"max_frame_bytes", "99999999999999999999999"},
      {"max_tokens_cap", "0"},
      {"max_clients", "0"},
      {"max_clients", "1.5"},
      {"max_requests_per_client", ""},
      {"event_ring_slots", "1000"},
      {"event_ring_slots", "8"},
      {"drain_timeout_seconds", "1h"},
      {"watchdog", "maybe"},
      {"warmup", "2"},
      {"log_level", "verbose"},
  };
  for (const auto& [key, value] : bad) {
    DaemonConfig config;
    Status st = SetOption(config, key, value);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << key << " = " << value;
    EXPECT_EQ(st.message().rfind(key + ": ", 0), 0u) << st.message();
    auto c = Parse({"--model", model_, FlagForKey(key), value});
    EXPECT_EQ(c.status().code(), ErrorCode::kInvalidArgument) << key << " = " << value;
    EXPECT_NE(Error(c).find(FlagForKey(key) + ": " + key + ": "), std::string::npos) << Error(c);
  }
}

TEST_F(DaemonConfigTest, SizeSuffixes) {
  DaemonConfig c;
  ASSERT_TRUE(SetOption(c, "max_frame_bytes", "64K").ok());
  EXPECT_EQ(c.max_frame_bytes, 64u << 10);
  ASSERT_TRUE(SetOption(c, "max_frame_bytes", "1GiB").ok());
  EXPECT_EQ(c.max_frame_bytes, 1u << 30);
  ASSERT_TRUE(SetOption(c, "max_frame_bytes", "5000").ok());
  EXPECT_EQ(c.max_frame_bytes, 5000u);
  EXPECT_FALSE(SetOption(c, "max_frame_bytes", "2G").ok());
  EXPECT_FALSE(SetOption(c, "max_clients", "2K").ok());  // suffixes only for byte sizes
}

TEST_F(DaemonConfigTest, HelpNeedsNothingElse) {
  auto c = Parse({"--bogus", "--help"});
  EXPECT_FALSE(c.ok());  // arguments are read in order
  c = Parse({"--help"});
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_TRUE(c->help);
  c = Parse({"--max-clients", "3", "-h"});
  ASSERT_TRUE(c.ok()) << Error(c);
  EXPECT_TRUE(c->help);
}

}  // namespace
}  // namespace deepinfer::daemon
