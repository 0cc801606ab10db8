// GetPeerCredentials over socketpair and on things that are not connected Unix sockets.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string>

#include "ipc/peer.h"

namespace deepinfer::ipc {
namespace {

TEST(PeerTest, SocketpairReportsThisProcess) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  for (int fd : fds) {
    Result<PeerCredentials> c = GetPeerCredentials(fd);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->pid, getpid());
    EXPECT_EQ(c->uid, getuid());
    EXPECT_EQ(c->gid, getgid());
  }
  close(fds[0]);
  close(fds[1]);
}

TEST(PeerTest, AcceptedConnectionReportsTheConnectingProcess) {
  // A listening socket in the abstract namespace (nothing on disk); a child connects.
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = "deepinfer-peer-test-" + std::to_string(getpid());
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int c = socket(AF_UNIX, SOCK_STREAM, 0);
    if (c < 0 || connect(c, reinterpret_cast<sockaddr*>(&addr), len) != 0) _exit(1);
    char b;
    _exit(read(c, &b, 1) == 1 ? 0 : 2);  // stay connected until the parent has looked
  }
  const int conn = accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  Result<PeerCredentials> c = GetPeerCredentials(conn);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c, (PeerCredentials{child, getuid(), getgid()}));
  ASSERT_EQ(write(conn, "x", 1), 1);
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  close(conn);
  close(listener);
}

TEST(PeerTest, NotAConnectedSocket) {
  EXPECT_EQ(GetPeerCredentials(-1).status().code(), ErrorCode::kIo);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  Result<PeerCredentials> c = GetPeerCredentials(p[0]);
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("SO_PEERCRED"), std::string::npos);
  close(p[0]);
  close(p[1]);
  const int s = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  EXPECT_FALSE(GetPeerCredentials(s).ok());
  close(s);
}

}  // namespace
}  // namespace deepinfer::ipc
