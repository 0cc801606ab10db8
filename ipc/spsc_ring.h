// SpscRing: a lock-free single-producer single-consumer ring of fixed-size, trivially copyable
// slots laid out in caller-provided memory (a shared-memory region; see docs/daemon.md, "Data
// plane").
//
// Layout at the ring's base (64-byte aligned):
//   SpscRingHeader (192 bytes: geometry | head | tail, each on its own cache line)
//   slots: capacity x sizeof(T), starting slots_offset bytes after the header's start.
// head counts the slots ever pushed (written only by the producer), tail the slots ever popped
// (written only by the consumer); both are 64-bit and never wrap in practice. Slot i lives at
// index i & (capacity - 1). The producer publishes with a release store of head after copying
// the slot; the consumer reads head with an acquire load before copying, and releases tail.
//
// Trust: the other side of the ring may be a hostile process that rewrites any byte of the
// shared block at any time. An SpscRing object therefore reads the geometry once (Create or
// Attach), keeps its own copy of capacity and of the index it owns, and checks every index it
// loads from shared memory against what is possible (tail in [last tail seen, head], head in
// [last head seen, tail + capacity]). A violation marks the ring corrupted (sticky): TryPush and
// TryPop then return false and status() says why; the owner should drop the peer. Slot addresses
// are always masked, so no index value can reach outside the slot array. Slot contents are
// copied out before the caller looks at them, so they cannot change under validation.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>

#include "engine/common/status.h"

namespace deepinfer::ipc {

inline constexpr std::size_t kCacheLineBytes = 64;
inline constexpr std::uint32_t kMaxRingSlots = 1u << 24;

/// The shared header of one ring. Offsets, never pointers: every process maps it elsewhere.
struct SpscRingHeader {
  alignas(kCacheLineBytes) std::uint32_t capacity;  // slots; a power of two
  std::uint32_t slot_bytes;                         // sizeof(T) of the writer
  std::uint64_t slots_offset;                       // from the start of this header
  alignas(kCacheLineBytes) std::uint64_t head;      // producer index (std::atomic_ref)
  alignas(kCacheLineBytes) std::uint64_t tail;      // consumer index (std::atomic_ref)
};
static_assert(sizeof(SpscRingHeader) == 3 * kCacheLineBytes);
static_assert(std::is_standard_layout_v<SpscRingHeader>);
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free,
              "cross-process rings need address-free (lock-free) 64-bit atomics");

constexpr bool IsValidRingCapacity(std::uint64_t capacity) {
  return capacity != 0 && capacity <= kMaxRingSlots && (capacity & (capacity - 1)) == 0;
}

template <typename T>
class SpscRing {
  static_assert(std::is_trivially_copyable_v<T>, "slots are copied as bytes");
  static_assert(alignof(T) <= kCacheLineBytes);
  static_assert(sizeof(SpscRingHeader) % alignof(T) == 0);

 public:
  /// Bytes one ring of `capacity` slots occupies (header + slots).
  static constexpr std::size_t BytesFor(std::uint32_t capacity) {
    return sizeof(SpscRingHeader) + static_cast<std::size_t>(capacity) * sizeof(T);
  }

  /// Formats `bytes` bytes at `mem` (64-byte aligned, not yet shared) as an empty ring.
  static Result<SpscRing> Create(void* mem, std::size_t bytes, std::uint32_t capacity) {
    if (mem == nullptr || reinterpret_cast<std::uintptr_t>(mem) % kCacheLineBytes != 0) {
      return InvalidArgument("spsc ring: memory must be 64-byte aligned");
    }
    if (!IsValidRingCapacity(capacity)) {
      return InvalidArgument("spsc ring: capacity " + std::to_string(capacity) +
                             " is not a power of two in [1, 2^24]");
    }
    if (bytes < BytesFor(capacity)) {
      return InvalidArgument("spsc ring: " + std::to_string(bytes) + " bytes < " +
                             std::to_string(BytesFor(capacity)) + " needed");
    }
    auto* hdr = new (mem) SpscRingHeader{};
    hdr->capacity = capacity;
    hdr->slot_bytes = static_cast<std::uint32_t>(sizeof(T));
    hdr->slots_offset = sizeof(SpscRingHeader);
    return SpscRing(hdr, capacity, sizeof(SpscRingHeader), 0, 0);
  }

  /// Validates a ring formatted by another process and returns a view of it. Reads the geometry
  /// once; the view never trusts it again.
  static Result<SpscRing> Attach(void* mem, std::size_t bytes) {
    if (mem == nullptr || reinterpret_cast<std::uintptr_t>(mem) % kCacheLineBytes != 0) {
      return InvalidArgument("spsc ring: memory must be 64-byte aligned");
    }
    if (bytes < sizeof(SpscRingHeader)) return DataLoss("spsc ring: smaller than its header");
    auto* hdr = static_cast<SpscRingHeader*>(mem);
    const std::uint32_t capacity = Volatile(&hdr->capacity);
    const std::uint32_t slot_bytes = Volatile(&hdr->slot_bytes);
    const std::uint64_t slots_offset = Volatile(&hdr->slots_offset);
    if (!IsValidRingCapacity(capacity)) {
      return DataLoss("spsc ring: capacity " + std::to_string(capacity) +
                      " is not a power of two in [1, 2^24]");
    }
    if (slot_bytes != sizeof(T)) {
      return DataLoss("spsc ring: slot size " + std::to_string(slot_bytes) + ", expected " +
                      std::to_string(sizeof(T)));
    }
    if (slots_offset < sizeof(SpscRingHeader) || slots_offset % kCacheLineBytes != 0 ||
        slots_offset > bytes ||
        static_cast<std::uint64_t>(capacity) * sizeof(T) > bytes - slots_offset) {
      return DataLoss("spsc ring: slots [" + std::to_string(slots_offset) + ", +" +
                      std::to_string(static_cast<std::uint64_t>(capacity) * sizeof(T)) +
                      ") do not fit in " + std::to_string(bytes) + " bytes");
    }
    const std::uint64_t tail = Load(&hdr->tail);
    const std::uint64_t head = Load(&hdr->head);
    if (head - tail > capacity) {
      return DataLoss("spsc ring: head " + std::to_string(head) + " and tail " +
                      std::to_string(tail) + " are inconsistent");
    }
    return SpscRing(hdr, capacity, slots_offset, head, tail);
  }

  SpscRing() = default;

  /// Producer: copies `value` into the next slot and publishes it. False when the ring is full
  /// or corrupted (check corrupted()). Never blocks.
  bool TryPush(const T& value) {
    if (corrupted_) return false;
    if (head_ - tail_seen_ >= capacity_) {
      const std::uint64_t tail = Load(&hdr_->tail);
      if (tail - tail_seen_ > head_ - tail_seen_) {  // tail outside [tail_seen_, head_]
        return MarkCorrupted("tail", tail);
      }
      tail_seen_ = tail;
      if (head_ - tail_seen_ >= capacity_) return false;
    }
    std::memcpy(SlotAt(head_), &value, sizeof(T));
    ++head_;
    Store(&hdr_->head, head_);
    return true;
  }

  /// Consumer: copies the oldest published slot into `*out` and frees it. False when the ring is
  /// empty or corrupted (check corrupted()).
  bool TryPop(T* out) {
    if (corrupted_) return false;
    if (tail_ == head_seen_) {
      const std::uint64_t head = Load(&hdr_->head);
      if (head - head_seen_ > tail_ + capacity_ - head_seen_) {  // outside [seen, tail + cap]
        return MarkCorrupted("head", head);
      }
      head_seen_ = head;
      if (tail_ == head_seen_) return false;
    }
    std::memcpy(static_cast<void*>(out), SlotAt(tail_), sizeof(T));
    ++tail_;
    Store(&hdr_->tail, tail_);
    return true;
  }

  /// Published, not yet consumed slots, as seen in shared memory, clamped to [0, capacity].
  /// A snapshot: exact only when called by the producer or the consumer while the other is idle.
  std::size_t Size() const {
    if (hdr_ == nullptr) return 0;
    const std::uint64_t tail = Load(&hdr_->tail);
    const std::uint64_t head = Load(&hdr_->head);
    if (head < tail) return 0;
    return head - tail > capacity_ ? capacity_ : static_cast<std::size_t>(head - tail);
  }
  bool Empty() const { return Size() == 0; }

  std::uint32_t capacity() const { return capacity_; }
  bool valid() const { return hdr_ != nullptr; }
  bool corrupted() const { return corrupted_; }
  /// Ok, or why the ring was found corrupted.
  Status status() const { return corrupted_ ? DataLoss(corruption_) : Status::Ok(); }

 private:
  SpscRing(SpscRingHeader* hdr, std::uint32_t capacity, std::uint64_t slots_offset,
           std::uint64_t head, std::uint64_t tail)
      : hdr_(hdr),
        slots_(reinterpret_cast<unsigned char*>(hdr) + slots_offset),
        capacity_(capacity),
        mask_(capacity - 1),
        head_(head),
        tail_seen_(tail),
        tail_(tail),
        head_seen_(head) {}

  static std::uint64_t Load(std::uint64_t* p) {
    return std::atomic_ref<std::uint64_t>(*p).load(std::memory_order_acquire);
  }
  static void Store(std::uint64_t* p, std::uint64_t v) {
    std::atomic_ref<std::uint64_t>(*p).store(v, std::memory_order_release);
  }
  template <typename U>
  static U Volatile(const U* p) {  // one read of a field the peer may rewrite concurrently
    return *static_cast<const volatile U*>(p);
  }

  unsigned char* SlotAt(std::uint64_t index) const { return slots_ + (index & mask_) * sizeof(T); }

  bool MarkCorrupted(const char* which, std::uint64_t value) {
    corrupted_ = true;
    corruption_ = std::string("spsc ring: peer wrote impossible ") + which + " " +
                  std::to_string(value) + " (capacity " + std::to_string(capacity_) + ")";
    return false;
  }

  SpscRingHeader* hdr_ = nullptr;
  unsigned char* slots_ = nullptr;
  std::uint32_t capacity_ = 0;
  std::uint64_t mask_ = 0;
  // Producer side: head_ is authoritative (only we write it); tail_seen_ caches the consumer.
  std::uint64_t head_ = 0;
  std::uint64_t tail_seen_ = 0;
  // Consumer side: tail_ is authoritative; head_seen_ caches the producer.
  std::uint64_t tail_ = 0;
  std::uint64_t head_seen_ = 0;
  bool corrupted_ = false;
  std::string corruption_;
};

}  // namespace deepinfer::ipc
