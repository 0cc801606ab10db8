// The systemd protocols without libsystemd: sd_notify datagrams, the watchdog interval, and
// socket activation (in forked children, and end to end under systemd-socket-activate).
#include "daemon/systemd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

namespace deepinfer::daemon {
namespace {

using std::chrono::microseconds;

std::string TempPath(const std::string& stem) {
  return ::testing::TempDir() + stem + "-" + std::to_string(getpid());
}

// Binds an AF_UNIX datagram socket (a stand-in for the service manager's notify socket) and
// points $NOTIFY_SOCKET at it; `abstract` uses the abstract namespace ("@name").
class NotifyListener {
 public:
  explicit NotifyListener(bool abstract) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd_, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::string name;
    socklen_t len;
    if (abstract) {
      name = "deepinfer-notify-test-" + std::to_string(getpid());
      std::memcpy(sa.sun_path + 1, name.data(), name.size());
      len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
      address_ = "@" + name;
    } else {
      path_ = TempPath("deepinfer-notify.sock");
      unlink(path_.c_str());
      std::memcpy(sa.sun_path, path_.c_str(), path_.size() + 1);
      len = sizeof(sa);
      address_ = path_;
    }
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&sa), len), 0) << std::strerror(errno);
    setenv("NOTIFY_SOCKET", address_.c_str(), 1);
  }
  ~NotifyListener() {
    unsetenv("NOTIFY_SOCKET");
    close(fd_);
    if (!path_.empty()) unlink(path_.c_str());
  }

  // The next datagram, or "<timeout>" after two seconds.
  std::string Receive() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 2000) != 1) return "<timeout>";
    char buf[4096];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n < 0 ? "<error>" : std::string(buf, static_cast<size_t>(n));
  }

 private:
  int fd_ = -1;
  std::string path_, address_;
};

TEST(SdNotify, NoOpWithoutNotifySocket) {
  unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(SdNotify("READY=1").ok());
  setenv("NOTIFY_SOCKET", "", 1);
  EXPECT_TRUE(NotifyReady().ok());
  unsetenv("NOTIFY_SOCKET");
}

TEST(SdNotify, SendsEachStateToAPathSocket) {
  NotifyListener listener(/*abstract=*/false);
  ASSERT_TRUE(NotifyReady().ok());
  EXPECT_EQ(listener.Receive(), "READY=1");
  ASSERT_TRUE(NotifyStatus("loading model\nREADY=1").ok());
  EXPECT_EQ(listener.Receive(), "STATUS=loading model READY=1");
  ASSERT_TRUE(NotifyWatchdog().ok());
  EXPECT_EQ(listener.Receive(), "WATCHDOG=1");
  ASSERT_TRUE(NotifyStopping().ok());
  EXPECT_EQ(listener.Receive(), "STOPPING=1");
  ASSERT_TRUE(NotifyExtendTimeout(std::chrono::seconds(90)).ok());
  EXPECT_EQ(listener.Receive(), "EXTEND_TIMEOUT_USEC=90000000");
  ASSERT_TRUE(NotifyReloading().ok());
  std::string reloading = listener.Receive();
  ASSERT_EQ(reloading.rfind("RELOADING=1\nMONOTONIC_USEC=", 0), 0u) << reloading;
  std::string usec = reloading.substr(reloading.find('=', 12) + 1);
  EXPECT_FALSE(usec.empty());
  EXPECT_EQ(usec.find_first_not_of("0123456789"), std::string::npos) << usec;
}

TEST(SdNotify, AbstractNamespace) {
  NotifyListener listener(/*abstract=*/true);
  ASSERT_TRUE(SdNotify("READY=1\nSTATUS=serving").ok());
  EXPECT_EQ(listener.Receive(), "READY=1\nSTATUS=serving");
}

TEST(SdNotify, Errors) {
  setenv("NOTIFY_SOCKET", TempPath("deepinfer-no-such.sock").c_str(), 1);
  EXPECT_EQ(NotifyReady().code(), ErrorCode::kIo);
  setenv("NOTIFY_SOCKET", "vsock:2:1234", 1);
  EXPECT_EQ(NotifyReady().code(), ErrorCode::kInvalidArgument);
  setenv("NOTIFY_SOCKET", ("/" + std::string(200, 'x')).c_str(), 1);
  EXPECT_EQ(NotifyReady().code(), ErrorCode::kInvalidArgument);
  unsetenv("NOTIFY_SOCKET");
}

TEST(Watchdog, Interval) {
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
  auto wd = WatchdogInterval();
  ASSERT_TRUE(wd.ok());
  EXPECT_FALSE(wd->has_value());

  setenv("WATCHDOG_USEC", "30000000", 1);
  wd = WatchdogInterval();
  ASSERT_TRUE(wd.ok());
  EXPECT_EQ(wd->value(), microseconds(30000000));

  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  wd = WatchdogInterval();
  ASSERT_TRUE(wd.ok() && wd->has_value());
  setenv("WATCHDOG_PID", std::to_string(getpid() + 1).c_str(), 1);
  wd = WatchdogInterval();
  ASSERT_TRUE(wd.ok());
  EXPECT_FALSE(wd->has_value());  // meant for another process

  setenv("WATCHDOG_PID", "x", 1);
  EXPECT_EQ(WatchdogInterval().status().code(), ErrorCode::kInvalidArgument);
  unsetenv("WATCHDOG_PID");
  for (const char* bad : {"0", "", "-5", "12s", "abc"}) {
    setenv("WATCHDOG_USEC", bad, 1);
    EXPECT_EQ(WatchdogInterval().status().code(), ErrorCode::kInvalidArgument) << bad;
  }
  unsetenv("WATCHDOG_USEC");
}

TEST(ListenFds, NotActivated) {
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  auto fds = ListenFds();
  ASSERT_TRUE(fds.ok());
  EXPECT_TRUE(fds->empty());
}

// Runs `body` in a forked child (which may then rearrange fds 3+ freely) and returns what it
// reported: "" for success, else the failure. Children report through a pipe kept at fd 100.
std::string InChild(const std::function<std::string()>& body) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    int out = fcntl(pipe_fds[1], F_DUPFD_CLOEXEC, 100);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::string report = body();
    if (report.empty()) report = "ok";
    (void)!write(out, report.data(), report.size());
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string report;
  char buf[512];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof(buf))) > 0;) report.append(buf, n);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "child crashed: " + report;
  return report == "ok" ? "" : report;
}

// Moves `fd` to `target` (closing the original), as the service manager would pass it.
void PlaceAt(int fd, int target) {
  if (fd == target) return;
  dup2(fd, target);
  close(fd);
}

// An AF_UNIX socket of `type`, autobound to an abstract name; listening if asked.
int UnixSocket(int type, bool listening) {
  int fd = socket(AF_UNIX, type, 0);
  sa_family_t family = AF_UNIX;
  bind(fd, reinterpret_cast<sockaddr*>(&family), sizeof(family));  // autobind
  if (listening) listen(fd, 4);
  return fd;
}

void SetListenEnv(const std::string& pid, const std::string& count) {
  setenv("LISTEN_PID", pid.c_str(), 1);
  setenv("LISTEN_FDS", count.c_str(), 1);
  setenv("LISTEN_FDNAMES", "deepinferd.socket", 1);
}

std::string EnvLeft() {
  for (const char* name : {"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"}) {
    if (getenv(name)) return std::string(name) + " still set";
  }
  return "";
}

// Places `fd` at 3, sets the variables for this process and expects ListenFds() to fail
// with a message containing `expect`.
std::string ExpectRejected(int fd, const std::string& count, const std::string& expect) {
  PlaceAt(fd, 3);
  SetListenEnv(std::to_string(getpid()), count);
  auto fds = ListenFds();
  if (fds.ok()) return "accepted a bad fd (expected: " + expect + ")";
  if (fds.status().code() != ErrorCode::kInvalidArgument) return "wrong code";
  if (fds.status().message().find(expect) == std::string::npos) {
    return "message `" + fds.status().message() + "` lacks `" + expect + "`";
  }
  return EnvLeft();
}

TEST(ListenFds, AcceptsListeningUnixStreamSocketAtFd3) {
  EXPECT_EQ(InChild([] {
              PlaceAt(UnixSocket(SOCK_STREAM, true), 3);
              SetListenEnv(std::to_string(getpid()), "1");
              auto fds = ListenFds();
              if (!fds.ok()) return fds.status().message();
              if (*fds != std::vector<int>{3}) return std::string("wrong fds");
              if (!(fcntl(3, F_GETFD) & FD_CLOEXEC)) return std::string("CLOEXEC not set");
              return EnvLeft();
            }),
            "");
}

TEST(ListenFds, RejectsOtherDescriptors) {
  EXPECT_EQ(InChild([] {
              int pair[2];
              socketpair(AF_UNIX, SOCK_STREAM, 0, pair);
              return ExpectRejected(pair[0], "1", "fd 3: socket is not listening");
            }),
            "");
  EXPECT_EQ(InChild([] {
              return ExpectRejected(UnixSocket(SOCK_DGRAM, false), "1",
                                    "fd 3: not a stream socket");
            }),
            "");
  EXPECT_EQ(InChild([] {
              int p[2];
              if (pipe(p) != 0) return std::string("pipe failed");
              return ExpectRejected(p[0], "1", "fd 3: not a socket");
            }),
            "");
  EXPECT_EQ(InChild([] {
              int fd = socket(AF_INET, SOCK_STREAM, 0);
              if (fd < 0) return std::string();  // no IPv4 here: nothing to check
              return ExpectRejected(fd, "1", "fd 3: not an AF_UNIX socket");
            }),
            "");
  EXPECT_EQ(InChild([] {  // claims two fds, only fd 3 exists
              close(4);
              return ExpectRejected(UnixSocket(SOCK_STREAM, true), "2", "fd 4");
            }),
            "");
  EXPECT_EQ(
      InChild([] { return ExpectRejected(UnixSocket(SOCK_STREAM, true), "one", "LISTEN_FDS"); }),
      "");
}

TEST(ListenFds, IgnoresVariablesMeantForAnotherProcessButClearsThem) {
  EXPECT_EQ(InChild([] {
              PlaceAt(UnixSocket(SOCK_STREAM, true), 3);
              SetListenEnv(std::to_string(getppid()), "1");
              auto fds = ListenFds();
              if (!fds.ok() || !fds->empty()) return std::string("used another process's fds");
              if (fcntl(3, F_GETFD) & FD_CLOEXEC) return std::string("touched fd 3");
              return EnvLeft();
            }),
            "");
  EXPECT_EQ(InChild([] {
              SetListenEnv("garbage", "1");
              auto fds = ListenFds();
              if (fds.ok()) return std::string("accepted LISTEN_PID=garbage");
              return EnvLeft();
            }),
            "");
}

std::string FindProgram(const std::string& name) {
  const char* path = getenv("PATH");
  std::string dirs = std::string(path ? path : "") + ":/usr/bin:/bin";
  for (size_t pos = 0; pos <= dirs.size();) {
    size_t end = dirs.find(':', pos);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(pos, end - pos) + "/" + name;
    if (end > pos && access(candidate.c_str(), X_OK) == 0) return candidate;
    pos = end + 1;
  }
  return "";
}

// The real thing: systemd-socket-activate binds the socket, waits for a connection, then
// execs the helper with LISTEN_PID/LISTEN_FDS set; the helper accepts it and writes "ok".
TEST(ListenFds, EndToEndWithSystemdSocketActivate) {
  std::string activate = FindProgram("systemd-socket-activate");
  if (activate.empty()) GTEST_SKIP() << "systemd-socket-activate not installed";
  std::string sock = TempPath("deepinfer-activate.sock");
  unlink(sock.c_str());
  pid_t pid = fork();
  if (pid == 0) {
    execl(activate.c_str(), "systemd-socket-activate", "-l", sock.c_str(),
          DEEPINFER_LISTEN_FDS_HELPER, static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(pid, 0);

  int conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, sock.c_str(), sock.size() + 1);
  bool connected = false;
  for (int i = 0; i < 1000 && !connected; ++i) {  // up to 10 s for the activator to bind
    connected = connect(conn, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
    if (!connected) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string reply;
  if (connected) {
    pollfd p{conn, POLLIN, 0};
    char buf[256];
    for (ssize_t n = 1; n > 0 && poll(&p, 1, 10000) == 1;) {
      n = read(conn, buf, sizeof(buf));
      if (n > 0) reply.append(buf, static_cast<size_t>(n));
    }
  }
  close(conn);
  int status = -1;
  for (int i = 0; i < 1000 && waitpid(pid, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (status == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  unlink(sock.c_str());
  ASSERT_TRUE(connected) << "could not connect to " << sock;
  EXPECT_EQ(reply, "ok");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

}  // namespace
}  // namespace deepinfer::daemon
