// SpscRing: geometry, full/empty, wraparound, two threads in order, validation of a mapped header
// and survival of corrupted indices (no access outside the slots: run under DEEPINFER_SANITIZE).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>

#include "ipc/spsc_ring.h"

namespace deepinfer::ipc {
namespace {

struct Slot {
  std::uint64_t seq;
  std::uint64_t check;
};

// 64-byte aligned storage for a ring of `capacity` slots, plus `extra` bytes.
struct Buffer {
  explicit Buffer(std::size_t bytes)
      : size(bytes),
        data(static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64))) {}
  ~Buffer() { std::free(data); }
  std::size_t size;
  unsigned char* data;
};

SpscRingHeader* Header(Buffer& b) { return reinterpret_cast<SpscRingHeader*>(b.data); }

TEST(SpscRingTest, LayoutIsCacheLineSeparated) {
  EXPECT_EQ(offsetof(SpscRingHeader, head), 64u);
  EXPECT_EQ(offsetof(SpscRingHeader, tail), 128u);
  EXPECT_EQ(SpscRing<Slot>::BytesFor(8), 192u + 8 * sizeof(Slot));
}

TEST(SpscRingTest, CreateRejectsBadArguments) {
  Buffer b(SpscRing<Slot>::BytesFor(16));
  EXPECT_FALSE(SpscRing<Slot>::Create(b.data, b.size, 0).ok());
  EXPECT_FALSE(SpscRing<Slot>::Create(b.data, b.size, 12).ok());
  EXPECT_FALSE(SpscRing<Slot>::Create(b.data, b.size, 32).ok());         // does not fit
  EXPECT_FALSE(SpscRing<Slot>::Create(b.data + 8, b.size - 8, 4).ok());  // misaligned
  EXPECT_TRUE(SpscRing<Slot>::Create(b.data, b.size, 16).ok());
}

TEST(SpscRingTest, FullAndEmpty) {
  Buffer b(SpscRing<Slot>::BytesFor(4));
  auto ring = SpscRing<Slot>::Create(b.data, b.size, 4);
  ASSERT_TRUE(ring.ok()) << ring.status().message();
  Slot s{};
  EXPECT_FALSE(ring->TryPop(&s));
  EXPECT_EQ(ring->Size(), 0u);
  for (std::uint64_t i = 0; i < 4; ++i) EXPECT_TRUE(ring->TryPush({i, ~i}));
  EXPECT_EQ(ring->Size(), 4u);
  EXPECT_FALSE(ring->TryPush({99, 0}));
  ASSERT_TRUE(ring->TryPop(&s));
  EXPECT_EQ(s.seq, 0u);
  EXPECT_TRUE(ring->TryPush({4, ~4ull}));
  EXPECT_FALSE(ring->TryPush({5, 0}));
  for (std::uint64_t i = 1; i <= 4; ++i) {
    ASSERT_TRUE(ring->TryPop(&s));
    EXPECT_EQ(s.seq, i);
    EXPECT_EQ(s.check, ~i);
  }
  EXPECT_FALSE(ring->TryPop(&s));
  EXPECT_FALSE(ring->corrupted());
}

TEST(SpscRingTest, WrapsAroundManyTimes) {
  Buffer b(SpscRing<Slot>::BytesFor(8));
  auto ring = SpscRing<Slot>::Create(b.data, b.size, 8);
  ASSERT_TRUE(ring.ok());
  std::uint64_t next_push = 0, next_pop = 0;
  std::mt19937 rng(1);
  for (int round = 0; round < 10000; ++round) {
    const int pushes = static_cast<int>(rng() % 9), pops = static_cast<int>(rng() % 9);
    for (int i = 0; i < pushes; ++i) {
      if (ring->TryPush({next_push, ~next_push})) ++next_push;
    }
    Slot s{};
    for (int i = 0; i < pops && ring->TryPop(&s); ++i) {
      ASSERT_EQ(s.seq, next_pop);
      ASSERT_EQ(s.check, ~next_pop);
      ++next_pop;
    }
    ASSERT_EQ(ring->Size(), next_push - next_pop);
  }
  EXPECT_GT(next_pop, 8u * 1000);
}

TEST(SpscRingTest, TwoThreadsKeepOrder) {
#if defined(__SANITIZE_ADDRESS__)
  constexpr std::uint64_t kEvents = 1'000'000;
#else
  constexpr std::uint64_t kEvents = 10'000'000;
#endif
  Buffer b(SpscRing<Slot>::BytesFor(1024));
  auto created = SpscRing<Slot>::Create(b.data, b.size, 1024);
  ASSERT_TRUE(created.ok());
  // Separate views, as two processes would have.
  auto consumer = SpscRing<Slot>::Attach(b.data, b.size);
  ASSERT_TRUE(consumer.ok());
  std::thread producer([&] {
    SpscRing<Slot>& ring = *created;
    for (std::uint64_t i = 0; i < kEvents;) {
      if (ring.TryPush({i, i * 0x9e3779b97f4a7c15ull})) {
        ++i;
      } else {
        std::this_thread::yield();  // two cores, shared with other builds
      }
    }
  });
  std::uint64_t expected = 0, bad = 0;
  Slot s{};
  while (expected < kEvents) {
    if (consumer->TryPop(&s)) {
      bad += (s.seq != expected) + (s.check != expected * 0x9e3779b97f4a7c15ull);
      ++expected;
    } else {
      std::this_thread::yield();
    }
  }
  producer.join();
  EXPECT_EQ(bad, 0u);
  EXPECT_FALSE(consumer->TryPop(&s));
  EXPECT_FALSE(consumer->corrupted());
  EXPECT_FALSE(created->corrupted());
}

TEST(SpscRingTest, AttachValidatesTheMappedHeader) {
  Buffer b(SpscRing<Slot>::BytesFor(16));
  ASSERT_TRUE(SpscRing<Slot>::Create(b.data, b.size, 16).ok());
  EXPECT_TRUE(SpscRing<Slot>::Attach(b.data, b.size).ok());
  EXPECT_FALSE(SpscRing<Slot>::Attach(b.data, b.size - 1).ok());  // slots beyond the mapping
  EXPECT_FALSE(SpscRing<Slot>::Attach(b.data, 100).ok());         // smaller than the header
  SpscRingHeader* h = Header(b);
  const SpscRingHeader good = *h;
  h->capacity = 12;
  EXPECT_FALSE(SpscRing<Slot>::Attach(b.data, b.size).ok());
  h->capacity = 0;
  EXPECT_FALSE(SpscRing<Slot>::Attach(b.data, b.size).ok());
  h->capacity = 1u << 31;
  EXPECT_FALSE(SpscRing<Slot>::Attach(b.data, b.size).ok());
  *h = good;
  h->slot_bytes = 8;
  EXPECT_FALSE(SpscRing<Slot>::Attach(b.data, b.size).ok());
  *h = good;
  h->slots_offset = ~0ull - 63;
  EXPECT_FALSE(SpscRing<Slot>::Attach(b.data, b.size).ok());
  *h = good;
  h->slots_offset = 100;  // misaligned
  EXPECT_FALSE(SpscRing<Slot>::Attach(b.data, b.size).ok());
  *h = good;
  h->head = 17;  // more than capacity published
  EXPECT_FALSE(SpscRing<Slot>::Attach(b.data, b.size).ok());
  h->head = 3;
  h->tail = 5;  // consumed more than published
  EXPECT_FALSE(SpscRing<Slot>::Attach(b.data, b.size).ok());
  h->head = (1ull << 63) + 4;  // any base is fine while head - tail <= capacity
  h->tail = (1ull << 63);
  auto ring = SpscRing<Slot>::Attach(b.data, b.size);
  ASSERT_TRUE(ring.ok());
  EXPECT_EQ(ring->Size(), 4u);
}

TEST(SpscRingTest, ProducerSurvivesACorruptedTail) {
  for (std::uint64_t bad_tail : {5ull, 100ull, ~0ull, 1ull << 40}) {
    Buffer b(SpscRing<Slot>::BytesFor(4));
    auto producer = SpscRing<Slot>::Create(b.data, b.size, 4);
    ASSERT_TRUE(producer.ok());
    for (std::uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(producer->TryPush({i, 0}));
    Header(b)->tail = bad_tail;  // beyond head (4): impossible
    EXPECT_FALSE(producer->TryPush({4, 0}));
    EXPECT_TRUE(producer->corrupted());
    EXPECT_FALSE(producer->status().ok());
    EXPECT_FALSE(producer->TryPush({5, 0}));  // sticky
    EXPECT_LE(producer->Size(), 4u);
  }
}

TEST(SpscRingTest, ProducerIgnoresARewrittenHead) {
  Buffer b(SpscRing<Slot>::BytesFor(4));
  auto producer = SpscRing<Slot>::Create(b.data, b.size, 4);
  ASSERT_TRUE(producer.ok());
  Header(b)->head = 1ull << 50;  // the producer owns head: it never reads it back
  Header(b)->capacity = 1u << 20;
  Header(b)->slots_offset = 1ull << 40;
  for (std::uint64_t i = 0; i < 4; ++i) EXPECT_TRUE(producer->TryPush({i, 0}));
  EXPECT_FALSE(producer->TryPush({4, 0}));
  EXPECT_FALSE(producer->corrupted());
}

TEST(SpscRingTest, ConsumerSurvivesACorruptedHead) {
  for (std::uint64_t bad_head : {9ull, 1000ull, ~0ull}) {
    Buffer b(SpscRing<Slot>::BytesFor(4));
    ASSERT_TRUE(SpscRing<Slot>::Create(b.data, b.size, 4).ok());
    auto consumer = SpscRing<Slot>::Attach(b.data, b.size);
    ASSERT_TRUE(consumer.ok());
    Header(b)->head = 2;
    Slot s{};
    EXPECT_TRUE(consumer->TryPop(&s));
    EXPECT_TRUE(consumer->TryPop(&s));
    Header(b)->head = bad_head;  // more than capacity ahead of tail (2), or behind it
    EXPECT_FALSE(consumer->TryPop(&s));
    EXPECT_TRUE(consumer->corrupted());
    EXPECT_FALSE(consumer->TryPop(&s));
  }
  Buffer b(SpscRing<Slot>::BytesFor(4));
  ASSERT_TRUE(SpscRing<Slot>::Create(b.data, b.size, 4).ok());
  auto consumer = SpscRing<Slot>::Attach(b.data, b.size);
  ASSERT_TRUE(consumer.ok());
  Header(b)->head = 3;
  Slot s{};
  EXPECT_TRUE(consumer->TryPop(&s));
  Header(b)->head = 1;                // moved backwards
  EXPECT_TRUE(consumer->TryPop(&s));  // still within what it saw before (head 3)
  EXPECT_TRUE(consumer->TryPop(&s));
  EXPECT_FALSE(consumer->TryPop(&s));
  EXPECT_TRUE(consumer->corrupted());
}

TEST(SpscRingTest, RandomIndexGarbageNeverEscapesTheSlots) {
  // A hostile peer scribbles over both indices while the two views keep working. Whatever they
  // read, every slot access stays inside the buffer (ASan checks this in the sanitizer build).
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    Buffer b(SpscRing<Slot>::BytesFor(8));
    auto producer = SpscRing<Slot>::Create(b.data, b.size, 8);
    ASSERT_TRUE(producer.ok());
    auto consumer = SpscRing<Slot>::Attach(b.data, b.size);
    ASSERT_TRUE(consumer.ok());
    Slot s{};
    for (int step = 0; step < 64; ++step) {
      switch (rng() % 4) {
        case 0:
          producer->TryPush({static_cast<std::uint64_t>(step), 0});
          break;
        case 1:
          consumer->TryPop(&s);
          break;
        case 2:
          Header(b)->head = rng() % 3 == 0 ? rng() : Header(b)->head + rng() % 20 - 10;
          break;
        default:
          Header(b)->tail = rng() % 3 == 0 ? rng() : Header(b)->tail + rng() % 20 - 10;
      }
      ASSERT_LE(producer->Size(), 8u);
      ASSERT_LE(consumer->Size(), 8u);
    }
  }
}

}  // namespace
}  // namespace deepinfer::ipc
