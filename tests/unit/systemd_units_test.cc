// The shipped systemd files: `systemd-analyze verify` accepts the units, the hardening that
// matters for a GPU daemon is there (and what would break CUDA is not), tmpfiles/sysusers
// apply, and the example config lists every key with its real default.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/config.h"

namespace deepinfer::daemon {
namespace {

const std::string kUnits = std::string(DEEPINFER_SOURCE_DIR) + "/systemd/";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "deepinfer-units-XXXXXX";
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
    EXPECT_FALSE(path_.empty());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs a shell command; returns its exit code and puts stdout+stderr in `output`.
int RunShell(const std::string& command, std::string& output) {
  output.clear();
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) output.append(buf, n);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool HaveProgram(const std::string& name) {
  std::string out;
  return RunShell("command -v " + name, out) == 0;
}

// Directive name -> values, in order, ignoring comments and section headers.
std::multimap<std::string, std::string> Directives(const std::string& text) {
  std::multimap<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line[0] == ';' || line[0] == '[') continue;
    size_t eq = line.find('=');
    if (eq != std::string::npos) out.emplace(line.substr(0, eq), line.substr(eq + 1));
  }
  return out;
}

std::string Value(const std::multimap<std::string, std::string>& d, const std::string& key) {
  auto it = d.find(key);
  return it == d.end() ? "<absent>" : it->second;
}

TEST(SystemdUnits, VerifyAcceptsServiceAndSocket) {
  if (!HaveProgram("systemd-analyze")) GTEST_SKIP() << "systemd-analyze not installed";
  TempDir dir;
  // verify checks that ExecStart= is executable; the daemon is not installed here.
  std::string service = ReadFile(kUnits + "deepinferd.service");
  size_t exec = service.find("\nExecStart=");
  ASSERT_NE(exec, std::string::npos);
  service.replace(exec + 1, service.find('\n', exec + 1) - exec - 1, "ExecStart=/bin/true");
  std::ofstream(dir / "deepinferd.service") << service;
  std::ofstream(dir / "deepinferd.socket") << ReadFile(kUnits + "deepinferd.socket");
  std::string out;
  int rc = RunShell("systemd-analyze verify --man=no " + (dir / "deepinferd.service") + " " +
                        (dir / "deepinferd.socket"),
                    out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "") << "warnings (unknown keys, bad values) count as failures";

  // The check itself works: a typo is reported.
  std::ofstream(dir / "typo.service") << "[Service]\nExecStart=/bin/true\nProtectSystem=wat\n";
  RunShell("systemd-analyze verify --man=no " + (dir / "typo.service"), out);
  EXPECT_NE(out.find("typo.service:3:"), std::string::npos) << out;
}

TEST(SystemdUnits, ServiceDirectives) {
  auto d = Directives(ReadFile(kUnits + "deepinferd.service"));
  const std::map<std::string, std::string> expected = {
      {"Type", "notify"},
      {"NotifyAccess", "main"},
      {"ExecStart", "/usr/local/bin/deepinferd --config /etc/deepinfer/deepinferd.conf"},
      {"WatchdogSec", "30"},
      {"Restart", "on-failure"},
      {"RuntimeDirectory", "deepinfer"},
      {"RuntimeDirectoryMode", "0750"},
      {"RuntimeDirectoryPreserve", "yes"},
      {"User", "deepinfer"},
      {"Group", "deepinfer"},
      {"LimitMEMLOCK", "infinity"},
      {"NoNewPrivileges", "yes"},
      {"ProtectSystem", "strict"},
      {"ProtectHome", "yes"},
      {"PrivateTmp", "yes"},
      {"ProtectKernelTunables", "yes"},
      {"ProtectControlGroups", "yes"},
      {"RestrictAddressFamilies", "AF_UNIX"},
      {"SystemCallArchitectures", "native"},
      {"LockPersonality", "yes"},
  };
  for (const auto& [key, value] : expected) {
    EXPECT_EQ(d.count(key), 1u) << key;
    EXPECT_EQ(Value(d, key), value) << key;
  }
  // These hide /dev/nvidia*, remove IPC objects on stop, or break CUDA's JIT.
  for (const char* key : {"PrivateDevices", "DynamicUser", "RemoveIPC", "ProtectClock",
                          "DevicePolicy", "DeviceAllow", "MemoryDenyWriteExecute"}) {
    EXPECT_EQ(d.count(key), 0u) << key << " must not be set";
  }
  // ...and the file says why.
  std::string text = ReadFile(kUnits + "deepinferd.service");
  EXPECT_NE(text.find("# - PrivateDevices=yes hides /dev/nvidia"), std::string::npos);
  EXPECT_NE(text.find("NOT DynamicUser=: it implies RemoveIPC=yes"), std::string::npos);
  // The drain budget fits inside the stop timeout.
  EXPECT_LT(DaemonConfig().drain_timeout_seconds, std::stoul(Value(d, "TimeoutStopSec")));
}

TEST(SystemdUnits, SocketMatchesDaemonDefaults) {
  auto d = Directives(ReadFile(kUnits + "deepinferd.socket"));
  DaemonConfig defaults;
  EXPECT_EQ(Value(d, "ListenStream"), defaults.socket_path);
  EXPECT_EQ(Value(d, "SocketMode"), "0660");
  EXPECT_EQ(std::stoul(Value(d, "SocketMode"), nullptr, 8), defaults.socket_mode);
  EXPECT_EQ(Value(d, "SocketGroup"), "deepinfer");
  EXPECT_EQ(Value(d, "Service"), "deepinferd.service");
  EXPECT_EQ(Value(d, "Accept"), "no");
}

// sysusers creates the user and group, then tmpfiles creates the directories with them,
// all inside a scratch root.
TEST(SystemdUnits, SysusersAndTmpfilesApply) {
  if (!HaveProgram("systemd-sysusers") || !HaveProgram("systemd-tmpfiles")) {
    GTEST_SKIP() << "systemd-sysusers/systemd-tmpfiles not installed";
  }
  if (geteuid() != 0) GTEST_SKIP() << "tmpfiles needs root to chown into the scratch root";
  TempDir root;
  std::filesystem::create_directories(root / "etc");
  std::string out;
  ASSERT_EQ(
      RunShell("systemd-sysusers --root=" + (root / "") + " " + kUnits + "deepinferd.sysusers",
               out),
      0)
      << out;
  EXPECT_NE(ReadFile(root / "etc/passwd").find("deepinfer:"), std::string::npos);
  EXPECT_NE(ReadFile(root / "etc/group").find("deepinfer:"), std::string::npos);
  ASSERT_EQ(RunShell("systemd-tmpfiles --create --root=" + (root / "") + " " + kUnits +
                         "deepinferd.tmpfiles",
                     out),
            0)
      << out;
  struct stat st {};
  ASSERT_EQ(stat((root / "run/deepinfer").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0750u);
}

// Uncommenting every `# key = value` line of the example gives the real defaults: the
// example lists every key, and its documented defaults cannot drift from the code.
TEST(SystemdUnits, ExampleConfigListsEveryKeyWithItsDefault) {
  std::string example = ReadFile(kUnits + "deepinferd.conf.example");
  ASSERT_FALSE(example.empty());
  for (const DaemonOptionInfo& o : DaemonOptions()) {
    std::string key(o.key);
    bool listed = example.find("\n# " + key + " = ") != std::string::npos ||
                  example.find("\n" + key + " = ") != std::string::npos;
    EXPECT_TRUE(listed) << key;
  }
  std::string uncommented;
  std::istringstream in(example);
  for (std::string line; std::getline(in, line);) {
    size_t eq = line.find(" = ");
    bool setting = line.rfind("# ", 0) == 0 && eq != std::string::npos &&
                   line.find(' ', 2) == eq;  // "# key = value", not prose
    if (setting && line.rfind("# socket_group", 0) != 0) line = line.substr(2);
    uncommented += line + "\n";
  }
  DaemonConfig c;
  Status st = ApplyConfigText(uncommented, "example", c);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(ChangedKeys(c, DaemonConfig()), (std::vector<std::string>{"model", "tokenizer"}));
}

}  // namespace
}  // namespace deepinfer::daemon
