// ShmRegion: memfd creation and seals, strict Attach validation, and two processes (fork) sharing
// a region with events flowing daemon -> client and eventfd wakeups both ways.
#include "ipc/shm_region.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>

#include "ipc/eventfd.h"

namespace deepinfer::ipc {
namespace {

ShmRegionHeader ReadHeader(const ShmRegion& r) {
  ShmRegionHeader h;
  std::memcpy(&h, r.data(), sizeof(h));
  return h;
}

void WriteHeader(const ShmRegion& r, const ShmRegionHeader& h) {
  std::memcpy(r.data(), &h, sizeof(h));
}

TEST(ShmRegionTest, CreateMapsASealedMemfd) {
  auto r = ShmRegion::Create(256, 16);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GE(r->fd(), 0);
  EXPECT_EQ(r->size() % 4096, 0u);
  EXPECT_EQ(r->events().capacity(), 256u);
  EXPECT_EQ(r->submissions().capacity(), 16u);
  EXPECT_EQ(fcntl(r->fd(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  const int seals = fcntl(r->fd(), F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW), F_SEAL_SHRINK | F_SEAL_GROW);
  EXPECT_NE(ftruncate(r->fd(), 4096), 0);  // a client cannot shrink the daemon's mapping
  EXPECT_NE(ftruncate(r->fd(), static_cast<off_t>(r->size() * 2)), 0);
  const ShmRegionHeader h = ReadHeader(*r);
  EXPECT_EQ(h.magic, kShmMagic);
  EXPECT_EQ(h.total_bytes, r->size());
  EXPECT_EQ(h.event_ring_offset % 64, 0u);
  EXPECT_EQ(h.submission_ring_offset % 64, 0u);
  EXPECT_TRUE(ValidateShmHeader(h, r->size()).ok());
}

TEST(ShmRegionTest, CreateRejectsBadSlotCounts) {
  EXPECT_FALSE(ShmRegion::Create(0, 16).ok());
  EXPECT_FALSE(ShmRegion::Create(100, 16).ok());
  EXPECT_FALSE(ShmRegion::Create(16, 3).ok());
  EXPECT_FALSE(ShmRegion::Create(1u << 25, 16).ok());
}

TEST(ShmRegionTest, AttachSeesTheDaemonsEvents) {
  auto daemon = ShmRegion::Create(8, 4);
  ASSERT_TRUE(daemon.ok());
  auto client = ShmRegion::Attach(daemon->fd());
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ(client->fd(), -1);
  TokenEvent e{};
  e.request_id = 7;
  e.token = 42;
  e.kind = static_cast<std::uint16_t>(EventKind::kToken);
  e.text_len = 2;
  std::memcpy(e.text, "hi", 2);
  ASSERT_TRUE(daemon->events().TryPush(e));
  TokenEvent got{};
  ASSERT_TRUE(client->events().TryPop(&got));
  EXPECT_EQ(got.request_id, 7u);
  EXPECT_EQ(got.token, 42);
  EXPECT_EQ(std::string(got.text, got.text_len), "hi");
  Submission s{};
  s.request_id = 7;
  s.kind = static_cast<std::uint16_t>(SubmissionKind::kCancel);
  ASSERT_TRUE(client->submissions().TryPush(s));
  Submission got_s{};
  ASSERT_TRUE(daemon->submissions().TryPop(&got_s));
  EXPECT_EQ(got_s.request_id, 7u);
}

TEST(ShmRegionTest, AttachRejectsNonMemfds) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  EXPECT_FALSE(ShmRegion::Attach(p[0]).ok());
  close(p[0]);
  close(p[1]);
  EXPECT_FALSE(ShmRegion::Attach(-1).ok());
  const int empty = memfd_create("empty", MFD_CLOEXEC);
  ASSERT_GE(empty, 0);
  EXPECT_FALSE(ShmRegion::Attach(empty).ok());  // smaller than a header
  ASSERT_EQ(ftruncate(empty, 4096), 0);
  EXPECT_FALSE(ShmRegion::Attach(empty).ok());  // zeros: bad magic
  close(empty);
}

// Each case corrupts one aspect of a valid header; Attach must refuse all of them.
TEST(ShmRegionTest, AttachRejectsCorruptedHeaders) {
  auto daemon = ShmRegion::Create(64, 8);
  ASSERT_TRUE(daemon.ok());
  const ShmRegionHeader good = ReadHeader(*daemon);
  const std::uint64_t size = daemon->size();
  const std::function<void(ShmRegionHeader&)> corruptions[] = {
      [](ShmRegionHeader& h) { h.magic ^= 1; },
      [](ShmRegionHeader& h) { h.version = 2; },
      [](ShmRegionHeader& h) { h.header_bytes = 64; },
      [&](ShmRegionHeader& h) { h.total_bytes = size * 2; },  // larger than the mapping
      [&](ShmRegionHeader& h) { h.total_bytes = size - 4096; },
      [](ShmRegionHeader& h) { h.event_slots = 48; },  // not a power of two
      [](ShmRegionHeader& h) { h.submission_slots = 0; },
      [](ShmRegionHeader& h) { h.event_slot_bytes = 32; },
      [](ShmRegionHeader& h) { h.event_slots = 1u << 24; },  // ring bytes disagree
      [](ShmRegionHeader& h) {  // consistent sizes, but far larger than the mapping
        h.event_slots = 1u << 24;
        h.event_ring_bytes = SpscRing<TokenEvent>::BytesFor(1u << 24);
      },
      [&](ShmRegionHeader& h) { h.event_ring_offset = size; },
      [](ShmRegionHeader& h) { h.event_ring_offset = ~0ull - 63; },  // offset + bytes overflows
      [](ShmRegionHeader& h) { h.event_ring_offset = 0; },           // over the header
      [](ShmRegionHeader& h) { h.event_ring_offset += 8; },          // misaligned
      [](ShmRegionHeader& h) { h.submission_ring_offset = h.event_ring_offset + 64; },  // overlap
  };
  int index = 0;
  for (const auto& corrupt : corruptions) {
    ShmRegionHeader h = good;
    corrupt(h);
    WriteHeader(*daemon, h);
    EXPECT_FALSE(ShmRegion::Attach(daemon->fd()).ok()) << "corruption " << index;
    ++index;
  }
  WriteHeader(*daemon, good);
  ASSERT_TRUE(ShmRegion::Attach(daemon->fd()).ok());
  // The ring's own header is checked against the region header too.
  auto* ring = reinterpret_cast<SpscRingHeader*>(static_cast<unsigned char*>(daemon->data()) +
                                                 good.event_ring_offset);
  ring->capacity = 32;
  EXPECT_FALSE(ShmRegion::Attach(daemon->fd()).ok());
  ring->capacity = 64;
  ring->head = 1000;
  EXPECT_FALSE(ShmRegion::Attach(daemon->fd()).ok());
}

// The daemon (parent) streams events into a forked client through the shared memfd, signalling
// the client's eventfd after each push; the client acknowledges every 1000th event through the
// submission ring and the daemon's eventfd. Ordering and payloads are checked in the client.
TEST(ShmRegionTest, TwoProcessesShareARegion) {
  constexpr std::uint64_t kEvents = 200'000;
  auto daemon = ShmRegion::Create(256, 64);
  ASSERT_TRUE(daemon.ok());
  auto to_client = EventFd::Create();
  auto to_daemon = EventFd::Create();
  ASSERT_TRUE(to_client.ok() && to_daemon.ok());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // client: no gtest assertions here, only an exit code
    auto client = ShmRegion::Attach(daemon->fd());
    if (!client.ok()) _exit(2);
    std::uint64_t next = 0;
    TokenEvent e;
    while (next < kEvents) {
      if (!client->events().TryPop(&e)) {
        if (client->events().corrupted()) _exit(3);
        auto woke = to_client->Wait(std::chrono::milliseconds(5000));
        if (!woke.ok() || !*woke) _exit(4);  // lost wakeup
        to_client->Drain();
        continue;
      }
      if (e.request_id != next || e.token != static_cast<std::int32_t>(next % 100000) ||
          e.text_len != 8 || std::memcmp(e.text, &next, 8) != 0) {
        _exit(5);
      }
      if (++next % 1000 == 0) {
        Submission ack{};
        ack.request_id = next;
        while (!client->submissions().TryPush(ack)) usleep(10);
        if (!to_daemon->Signal().ok()) _exit(6);
      }
    }
    _exit(0);
  }
  std::uint64_t acked = 0;
  for (std::uint64_t i = 0; i < kEvents;) {
    TokenEvent e{};
    e.request_id = i;
    e.token = static_cast<std::int32_t>(i % 100000);
    e.kind = static_cast<std::uint16_t>(EventKind::kToken);
    e.text_len = 8;
    std::memcpy(e.text, &i, 8);
    if (daemon->events().TryPush(e)) {
      ++i;
      ASSERT_TRUE(to_client->Signal().ok());
    } else {
      ASSERT_FALSE(daemon->events().corrupted());
      ASSERT_TRUE(to_daemon->Wait(std::chrono::milliseconds(1)).ok());  // let the client run
      to_daemon->Drain();
    }
    Submission s;
    while (daemon->submissions().TryPop(&s)) {
      ASSERT_EQ(s.request_id, acked + 1000);
      acked = s.request_id;
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  Submission s;
  while (daemon->submissions().TryPop(&s)) acked = s.request_id;
  EXPECT_EQ(acked, kEvents);
}

// A hostile client scribbles random bytes over the whole shared region (headers, indices, slots)
// and tries to resize it, while the daemon keeps pushing events and popping submissions. The
// daemon must neither crash nor loop: it pushes, finds rings full, or marks them corrupted.
TEST(ShmRegionTest, DaemonSurvivesAHostileClient) {
  auto daemon = ShmRegion::Create(64, 64);
  ASSERT_TRUE(daemon.ok());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto* bytes = static_cast<std::uint64_t*>(daemon->data());
    const ShmRegionHeader h = ReadHeader(*daemon);
    const std::size_t words = daemon->size() / sizeof(std::uint64_t);
    std::uint64_t x = 88172645463325252ull;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (std::chrono::steady_clock::now() < end) {
      for (int i = 0; i < 1000; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;            // xorshift64
        const std::uint64_t value = (x & 1) ? x : x % 128;  // huge values and plausible ones
        // Half the writes hit the indices the daemon reads (event tail, submission head).
        const std::size_t word = (x & 2)   ? x % words
                                 : (x & 4) ? (h.event_ring_offset + 128) / 8
                                           : (h.submission_ring_offset + 64) / 8;
        bytes[word] = value;
      }
      if (ftruncate(daemon->fd(), 4096) == 0) _exit(7);  // the seal must hold
    }
    _exit(0);
  }
  std::uint64_t pushed = 0, popped = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < end) {
    TokenEvent e{};
    e.request_id = pushed;
    pushed += daemon->events().TryPush(e);
    Submission s;
    while (daemon->submissions().TryPop(&s)) ++popped;  // bounded: at most capacity per refresh
    EXPECT_LE(daemon->events().Size(), 64u);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // Detection depends on timing (a plausible index is indistinguishable from a real one), but a
  // ring that noticed must say so, and one that did not still never went out of bounds.
  EXPECT_EQ(daemon->events().corrupted(), !daemon->events().status().ok());
  EXPECT_EQ(daemon->submissions().corrupted(), !daemon->submissions().status().ok());
  std::printf("pushed %llu, popped %llu, corrupted: events %d, submissions %d\n",
              static_cast<unsigned long long>(pushed), static_cast<unsigned long long>(popped),
              daemon->events().corrupted(), daemon->submissions().corrupted());
}

}  // namespace
}  // namespace deepinfer::ipc
