#include "daemon/systemd.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

namespace deepinfer::daemon {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Parses a whole decimal number, no sign, no spaces (what systemd writes).
template <typename T>
bool ParseDecimal(std::string_view s, T& out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && s.front() != '-' && ec == std::errc() && ptr == s.data() + s.size();
}

// Closes an fd on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

// Unsets the socket-activation variables on scope exit, whatever the outcome.
struct ListenEnvCleanup {
  ~ListenEnvCleanup() {
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
  }
};

int SockOpt(int fd, int option, int& value) {
  socklen_t len = sizeof(value);
  return getsockopt(fd, SOL_SOCKET, option, &value, &len);
}

// Ok when `fd` is a listening AF_UNIX stream socket.
Status CheckListeningUnixStream(int fd) {
  std::string what = "LISTEN_FDS: fd " + std::to_string(fd);
  int domain = 0, type = 0, listening = 0;
  if (SockOpt(fd, SO_DOMAIN, domain) != 0 || SockOpt(fd, SO_TYPE, type) != 0 ||
      SockOpt(fd, SO_ACCEPTCONN, listening) != 0) {
    return InvalidArgument(Errno((what + ": not a socket").c_str()));
  }
  if (domain != AF_UNIX) return InvalidArgument(what + ": not an AF_UNIX socket");
  if (type != SOCK_STREAM) return InvalidArgument(what + ": not a stream socket");
  if (!listening) return InvalidArgument(what + ": socket is not listening");
  return Status::Ok();
}

}  // namespace

Status SdNotify(std::string_view state) {
  const char* env = std::getenv("NOTIFY_SOCKET");
  if (env == nullptr || env[0] == '\0') return Status::Ok();
  std::string_view address(env);

  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (address.front() != '/' && address.front() != '@') {
    return InvalidArgument("NOTIFY_SOCKET: unsupported address `" + std::string(address) +
                           "` (expected /path or @abstract)");
  }
  // A path needs its NUL inside sun_path; an abstract name ('@' becomes the leading NUL) does
  // not, and its length is exact: trailing bytes would be part of the name.
  size_t limit = sizeof(sa.sun_path) - (address.front() == '/' ? 1 : 0);
  if (address.size() > limit) return InvalidArgument("NOTIFY_SOCKET: address too long");
  std::memcpy(sa.sun_path, address.data(), address.size());
  if (address.front() == '@') sa.sun_path[0] = '\0';
  auto sa_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size() +
                                       (address.front() == '/' ? 1 : 0));

  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return IoError(Errno("sd_notify: socket"));
  FdCloser closer(fd);
  ssize_t sent;
  do {
    sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                  reinterpret_cast<const sockaddr*>(&sa), sa_len);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) return IoError(Errno(("sd_notify: send to " + std::string(address)).c_str()));
  if (static_cast<size_t>(sent) != state.size()) return IoError("sd_notify: short send");
  return Status::Ok();
}

Status NotifyReady() { return SdNotify("READY=1"); }

Status NotifyStatus(std::string_view text) {
  std::string state = "STATUS=" + std::string(text);
  for (char& ch : state) {
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  return SdNotify(state);
}

Status NotifyStopping() { return SdNotify("STOPPING=1"); }

Status NotifyReloading() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t usec = static_cast<uint64_t>(ts.tv_sec) * 1000000u + ts.tv_nsec / 1000;
  return SdNotify("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec));
}

Status NotifyWatchdog() { return SdNotify("WATCHDOG=1"); }

Status NotifyExtendTimeout(std::chrono::microseconds extra) {
  return SdNotify("EXTEND_TIMEOUT_USEC=" + std::to_string(extra.count()));
}

Result<std::optional<std::chrono::microseconds>> WatchdogInterval() {
  using Interval = std::optional<std::chrono::microseconds>;
  const char* usec_env = std::getenv("WATCHDOG_USEC");
  if (usec_env == nullptr) return Interval();
  uint64_t usec = 0;
  if (!ParseDecimal(usec_env, usec) || usec == 0) {
    return InvalidArgument("WATCHDOG_USEC: expected a positive integer, got `" +
                           std::string(usec_env) + "`");
  }
  if (const char* pid_env = std::getenv("WATCHDOG_PID"); pid_env != nullptr) {
    pid_t pid = 0;
    if (!ParseDecimal(pid_env, pid) || pid <= 0) {
      return InvalidArgument("WATCHDOG_PID: expected a process id, got `" + std::string(pid_env) +
                             "`");
    }
    if (pid != getpid()) return Interval();
  }
  return Interval(std::chrono::microseconds(usec));
}

Result<std::vector<int>> ListenFds() {
  ListenEnvCleanup cleanup;
  const char* pid_env = std::getenv("LISTEN_PID");
  if (pid_env == nullptr) return std::vector<int>();
  pid_t pid = 0;
  if (!ParseDecimal(pid_env, pid) || pid <= 0) {
    return InvalidArgument("LISTEN_PID: expected a process id, got `" + std::string(pid_env) + "`");
  }
  if (pid != getpid()) return std::vector<int>();  // meant for another process
  const char* fds_env = std::getenv("LISTEN_FDS");
  if (fds_env == nullptr) return std::vector<int>();
  int count = 0;
  if (!ParseDecimal(fds_env, count) || count > 65536) {
    return InvalidArgument("LISTEN_FDS: expected a small count, got `" + std::string(fds_env) +
                           "`");
  }
  std::vector<int> fds;
  for (int fd = kListenFdsStart; fd < kListenFdsStart + count; ++fd) {
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0) {
      return InvalidArgument(Errno(("LISTEN_FDS: fd " + std::to_string(fd)).c_str()));
    }
    if (!(flags & FD_CLOEXEC) && fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0) {
      return IoError(Errno(("LISTEN_FDS: fd " + std::to_string(fd) + ": FD_CLOEXEC").c_str()));
    }
    fds.push_back(fd);
  }
  for (int fd : fds) DI_RETURN_IF_ERROR(CheckListeningUnixStream(fd));
  return fds;
}

}  // namespace deepinfer::daemon
