// The option table (daemon/config_options.h) as users meet it: which keys SIGHUP may change, the
// usage text listing every option once with its real default, and docs/configuration.md naming
// every flag.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "daemon/config.h"

namespace deepinfer::daemon {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(DaemonConfigReload, ReloadableKeys) {
  DaemonConfig current;
  DaemonConfig next = current;
  EXPECT_TRUE(ReloadableConfig(current, next).ok());
  next.log_level = "debug";
  next.max_clients = 8;
  next.max_requests_per_user = 4;
  next.max_frame_bytes = 1 << 20;
  next.drain_timeout_seconds = 3;
  EXPECT_TRUE(ReloadableConfig(current, next).ok());
  EXPECT_EQ(ChangedKeys(current, next),
            (std::vector<std::string>{"max_frame_bytes", "max_clients", "max_requests_per_user",
                                      "drain_timeout_seconds", "log_level"}));
  next.model_dir = "/other";
  next.socket_path = "/run/other.sock";
  Status st = ReloadableConfig(current, next);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind("model, socket: ", 0), 0u) << st.message();
  for (const DaemonOptionInfo& o : DaemonOptions()) {
    std::string key(o.key);
    bool limit = key.rfind("max_", 0) == 0 || key == "drain_timeout_seconds";
    EXPECT_EQ(o.reloadable, limit || key == "log_level") << key;
  }
}

TEST(DaemonConfigUsage, ListsEveryOptionOnce) {
  const std::set<std::string> expected = {"model",
                                          "tokenizer",
                                          "numerics",
                                          "threads",
                                          "warmup",
                                          "socket",
                                          "socket_mode",
                                          "socket_group",
                                          "max_frame_bytes",
                                          "max_prompt_tokens",
                                          "max_tokens_cap",
                                          "max_clients",
                                          "max_requests_per_client",
                                          "max_requests_per_user",
                                          "max_backlog_events",
                                          "drain_timeout_seconds",
                                          "event_ring_slots",
                                          "cache_memory_bytes",
                                          "prefix_cache_bytes",
                                          "batch_requests",
                                          "step_token_budget",
                                          "device",
                                          "forward",
                                          "slot_context",
                                          "park_slots",
                                          "share_prefixes",
                                          "device_sampling",
                                          "folded_experts",
                                          "overlap",
                                          "watchdog",
                                          "log_level"};
  std::set<std::string> keys;
  for (const DaemonOptionInfo& o : DaemonOptions()) {
    EXPECT_TRUE(keys.insert(std::string(o.key)).second) << "duplicate " << o.key;
  }
  EXPECT_EQ(keys, expected);
  std::string usage = ConfigUsage();
  EXPECT_NE(usage.find("--config FILE"), std::string::npos);
  EXPECT_NE(usage.find("--help"), std::string::npos);
  for (const DaemonOptionInfo& o : DaemonOptions()) {
    EXPECT_NE(usage.find(FlagForKey(o.key) + " "), std::string::npos) << o.key;
    EXPECT_NE(usage.find("key " + std::string(o.key) + ","), std::string::npos) << o.key;
    if (!o.default_text.empty()) {
      EXPECT_NE(usage.find(std::string(o.default_text)), std::string::npos) << o.key;
    }
  }
  EXPECT_EQ(FlagForKey("max_requests_per_user"), "--max-requests-per-user");
}

// The documented defaults are the real ones: setting each to its default text changes nothing.
TEST(DaemonConfigUsage, DefaultTextsAreTheDefaults) {
  for (const DaemonOptionInfo& o : DaemonOptions()) {
    if (o.key == "model" || o.key == "tokenizer" || o.key == "socket_group") continue;
    DaemonConfig c;
    Status st = SetOption(c, o.key, o.default_text);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(ChangedKeys(c, DaemonConfig()).empty()) << o.key;
  }
}

TEST(DaemonConfigDocs, ConfigurationMdHasEveryFlag) {
  std::string doc = ReadFile(std::string(DEEPINFER_SOURCE_DIR) + "/docs/configuration.md");
  size_t section = doc.find("## deepinferd");
  ASSERT_NE(section, std::string::npos);
  std::string text = doc.substr(section);
  for (const DaemonOptionInfo& o : DaemonOptions()) {
    EXPECT_NE(text.find("`" + FlagForKey(o.key) + " "), std::string::npos) << o.key;
    EXPECT_NE(text.find("`" + std::string(o.key) + "`"), std::string::npos) << o.key;
  }
}

}  // namespace
}  // namespace deepinfer::daemon
