// EventFd (signal, drain, wait with timeout) and SCM_RIGHTS descriptor passing over a socketpair,
// including the handshake's [memfd, eventfd, eventfd] bundle.
#include "ipc/eventfd.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <string>
#include <thread>

#include "ipc/shm_region.h"

namespace deepinfer::ipc {
namespace {

using std::chrono::milliseconds;

int OpenFdCount() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n;
}

struct SocketPair {
  SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd), 0); }
  ~SocketPair() {
    close(fd[0]);
    close(fd[1]);
  }
  int fd[2] = {-1, -1};
};

TEST(EventFdTest, SignalDrainWait) {
  auto e = EventFd::Create();
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(fcntl(e->fd(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  EXPECT_EQ(fcntl(e->fd(), F_GETFL) & O_NONBLOCK, O_NONBLOCK);
  auto woke = e->Wait(milliseconds(0));
  ASSERT_TRUE(woke.ok());
  EXPECT_FALSE(*woke);
  EXPECT_EQ(e->Drain(), 0u);  // nothing pending, does not block
  ASSERT_TRUE(e->Signal().ok());
  ASSERT_TRUE(e->Signal().ok());
  woke = e->Wait(milliseconds(1000));
  ASSERT_TRUE(woke.ok());
  EXPECT_TRUE(*woke);
  EXPECT_EQ(e->Drain(), 2u);
  const auto start = std::chrono::steady_clock::now();
  woke = e->Wait(milliseconds(30));
  ASSERT_TRUE(woke.ok());
  EXPECT_FALSE(*woke);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(29));
}

TEST(EventFdTest, WaitWakesAcrossThreads) {
  auto e = EventFd::Create();
  ASSERT_TRUE(e.ok());
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(20));
    (void)e->Signal();
  });
  auto woke = e->Wait(milliseconds(-1));
  t.join();
  ASSERT_TRUE(woke.ok());
  EXPECT_TRUE(*woke);
  EXPECT_EQ(e->Drain(), 1u);
}

TEST(EventFdTest, SaturatedCounterIsNotAnError) {
  auto e = EventFd::Create();
  ASSERT_TRUE(e.ok());
  const std::uint64_t max = ~0ull - 1;  // what a hostile peer can write
  ASSERT_EQ(write(e->fd(), &max, sizeof(max)), static_cast<ssize_t>(sizeof(max)));
  EXPECT_TRUE(e->Signal().ok());  // EAGAIN, not a block
  EXPECT_EQ(e->Drain(), max);
}

TEST(EventFdTest, AdoptAcceptsOnlyEventfds) {
  auto e = EventFd::Create();
  ASSERT_TRUE(e.ok());
  auto adopted = EventFd::Adopt(UniqueFd(dup(e->fd())));
  ASSERT_TRUE(adopted.ok()) << adopted.status().message();
  ASSERT_TRUE(adopted->Signal().ok());
  EXPECT_EQ(e->Drain(), 1u);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  close(p[1]);
  EXPECT_FALSE(EventFd::Adopt(UniqueFd(p[0])).ok());
  EXPECT_FALSE(EventFd::Adopt(UniqueFd()).ok());
}

TEST(ScmRightsTest, RoundTripsTheHandshakeBundle) {
  auto region = ShmRegion::Create(16, 4);
  auto to_client = EventFd::Create();
  auto to_daemon = EventFd::Create();
  ASSERT_TRUE(region.ok() && to_client.ok() && to_daemon.ok());
  SocketPair sp;
  const std::string frame = R"({"op": "shm", "bytes": 8192, "ring_slots": 16})";
  const std::array<int, 3> fds = {region->fd(), to_client->fd(), to_daemon->fd()};
  ASSERT_TRUE(SendFds(sp.fd[0], frame, fds).ok());

  std::vector<UniqueFd> got;
  std::string buf(256, '\0');
  auto n = RecvFds(sp.fd[1], std::span<char>(buf.data(), buf.size()), &got);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(buf.substr(0, *n), frame);
  ASSERT_EQ(got.size(), 3u);
  for (const UniqueFd& fd : got) {
    EXPECT_EQ(fcntl(fd.get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    for (int sent : fds) EXPECT_NE(fd.get(), sent);  // new descriptors, same files
  }
  // The received memfd maps the same region; the received eventfds reach the same counters.
  auto client = ShmRegion::Attach(got[0].get());
  ASSERT_TRUE(client.ok()) << client.status().message();
  TokenEvent e{};
  e.request_id = 99;
  ASSERT_TRUE(region->events().TryPush(e));
  auto client_wake = EventFd::Adopt(std::move(got[1]));
  auto daemon_wake = EventFd::Adopt(std::move(got[2]));
  ASSERT_TRUE(client_wake.ok() && daemon_wake.ok());
  ASSERT_TRUE(to_client->Signal().ok());
  auto woke = client_wake->Wait(milliseconds(1000));
  ASSERT_TRUE(woke.ok() && *woke);
  TokenEvent got_e{};
  ASSERT_TRUE(client->events().TryPop(&got_e));
  EXPECT_EQ(got_e.request_id, 99u);
  ASSERT_TRUE(daemon_wake->Signal().ok());
  EXPECT_EQ(to_daemon->Drain(), 1u);
}

TEST(ScmRightsTest, PayloadWithoutDescriptors) {
  SocketPair sp;
  ASSERT_TRUE(SendFds(sp.fd[0], "ping", {}).ok());
  std::vector<UniqueFd> got;
  char buf[16];
  auto n = RecvFds(sp.fd[1], buf, &got);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buf, *n), "ping");
  EXPECT_TRUE(got.empty());
  close(sp.fd[0]);
  sp.fd[0] = -1;
  n = RecvFds(sp.fd[1], buf, &got);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);  // the peer closed
}

TEST(ScmRightsTest, RejectsBadArguments) {
  SocketPair sp;
  const int fd = sp.fd[0];
  EXPECT_FALSE(SendFds(fd, "", std::array<int, 1>{fd}).ok());  // nothing to carry the fds
  std::array<int, kMaxPassedFds + 1> many;
  many.fill(fd);
  EXPECT_FALSE(SendFds(fd, "x", many).ok());
  EXPECT_FALSE(SendFds(-1, "x", {}).ok());
}

TEST(ScmRightsTest, TooManyDescriptorsAreClosedNotLeaked) {
  SocketPair sp;
  auto e = EventFd::Create();
  ASSERT_TRUE(e.ok());
  const std::array<int, 4> fds = {e->fd(), e->fd(), e->fd(), e->fd()};
  ASSERT_TRUE(SendFds(sp.fd[0], "four", fds).ok());
  const int before = OpenFdCount();
  std::vector<UniqueFd> got;
  char buf[16];
  auto n = RecvFds(sp.fd[1], buf, &got, /*max_fds=*/3);
  EXPECT_FALSE(n.ok());
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(OpenFdCount(), before);
}

TEST(ScmRightsTest, LargePayloadArrivesWhole) {
  SocketPair sp;
  auto e = EventFd::Create();
  ASSERT_TRUE(e.ok());
  const std::string big(1 << 20, 'x');  // more than the socket buffer: partial sends
  std::string received;
  std::vector<UniqueFd> got;
  std::thread reader([&] {
    std::string buf(65536, '\0');
    while (received.size() < big.size()) {
      auto n = RecvFds(sp.fd[1], std::span<char>(buf.data(), buf.size()), &got);
      if (!n.ok() || *n == 0) break;
      received.append(buf.data(), *n);
    }
  });
  const std::array<int, 1> fds = {e->fd()};
  EXPECT_TRUE(SendFds(sp.fd[0], big, fds).ok());
  reader.join();
  EXPECT_EQ(received, big);
  EXPECT_EQ(got.size(), 1u);
}

}  // namespace
}  // namespace deepinfer::ipc
