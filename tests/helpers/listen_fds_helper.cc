// Test helper for systemd_test: run under `systemd-socket-activate -l PATH`, it takes the
// listening socket with ListenFds(), accepts one connection, writes "ok" and exits 0.
// Any failure is reported on stderr (and, once a connection exists, on it) with exit code 1.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "daemon/systemd.h"

namespace {

int Fail(const std::string& message, int conn = -1) {
  std::fprintf(stderr, "listen_fds_helper: %s\n", message.c_str());
  if (conn >= 0) {
    std::string reply = "error: " + message;
    (void)!write(conn, reply.data(), reply.size());
  }
  return 1;
}

}  // namespace

int main() {
  auto fds = deepinfer::daemon::ListenFds();
  if (!fds.ok()) return Fail("ListenFds: " + fds.status().message());
  if (fds->size() != 1) return Fail("expected one fd, got " + std::to_string(fds->size()));
  int conn = accept4(fds->front(), nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return Fail("accept failed");
  if (std::getenv("LISTEN_PID") || std::getenv("LISTEN_FDS") || std::getenv("LISTEN_FDNAMES")) {
    return Fail("LISTEN_* still set", conn);
  }
  if (write(conn, "ok", 2) != 2) return Fail("write failed");
  close(conn);
  return 0;
}
