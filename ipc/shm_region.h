// ShmRegion: the per-client shared-memory region of the data plane (docs/daemon.md, "Data
// plane"). The daemon creates it over a memfd and passes the fd to its client over the control
// socket (SCM_RIGHTS, see ipc/eventfd.h); the client attaches to the fd.
//
// Layout (all offsets from the start of the region; the region is a whole number of pages):
//   [0, 128)          ShmRegionHeader (magic, version, sizes, ring offsets and capacities)
//   event ring        SpscRing<TokenEvent>: daemon -> client, 64-byte aligned
//   submission ring   SpscRing<Submission>: client -> daemon, 64-byte aligned
//
// Roles: the region returned by Create (daemon) pushes events and pops submissions; the region
// returned by Attach (client) pops events and pushes submissions. Neither side trusts the shared
// bytes after the first validation (see ipc/spsc_ring.h).
#pragma once

#include <boost/interprocess/mapped_region.hpp>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "engine/common/status.h"
#include "ipc/spsc_ring.h"

namespace deepinfer::ipc {

/// Event kinds of a TokenEvent.
enum class EventKind : std::uint16_t {
  kToken = 1,  // one sampled token (token, logprob) and the text it completed
  kText = 2,   // continuation of the previous slot's text (text longer than 36 bytes)
  kDone = 3,   // the request finished; finish_reason says why
  kError = 4,  // the request failed; text holds a short error code
};

/// Why a request finished (TokenEvent::finish_reason of a kDone or kError event).
enum class FinishReason : std::uint16_t {
  kNone = 0,
  kStop = 1,           // a stop string or stop token
  kLength = 2,         // max_tokens
  kCancelled = 3,      // the client cancelled
  kClientTooSlow = 4,  // the event backlog of the request overflowed
  kError = 5,
};

/// One slot of the event ring (daemon -> client): 64 bytes, one cache line.
struct TokenEvent {
  std::uint64_t request_id;
  std::int32_t token;
  std::uint16_t kind;           // EventKind
  std::uint16_t finish_reason;  // FinishReason
  float logprob;
  std::uint32_t text_len;  // bytes of text used; a reader must clamp it to sizeof(text)
  char text[36];           // newly completed UTF-8, not NUL-terminated
  std::uint32_t reserved;  // explicit padding: always 0, so no stale bytes leak to the client
};
static_assert(sizeof(TokenEvent) == 64);
static_assert(std::is_trivially_copyable_v<TokenEvent>);

/// Submission kinds (client -> daemon).
enum class SubmissionKind : std::uint16_t {
  kCancel = 1,  // cancel request_id (same as the {"op": "cancel"} frame, without a syscall)
};

/// One slot of the submission ring (client -> daemon): 64 bytes. The daemon validates every
/// field of a popped submission; an unknown kind is a protocol error of that client.
struct Submission {
  std::uint64_t request_id;
  std::uint16_t kind;  // SubmissionKind
  std::uint16_t flags;
  std::uint32_t data_len;  // bytes of data used; clamp to sizeof(data)
  char data[48];
};
static_assert(sizeof(Submission) == 64);
static_assert(std::is_trivially_copyable_v<Submission>);

inline constexpr std::uint64_t kShmMagic = 0x314d48534e494444ull;  // "DDINSHM1" little-endian
inline constexpr std::uint32_t kShmVersion = 1;
inline constexpr std::uint64_t kMaxShmRegionBytes = 1ull << 30;

/// The region header, at offset 0. Offsets and sizes only; every field is validated by Attach.
struct ShmRegionHeader {
  std::uint64_t magic;         // kShmMagic
  std::uint32_t version;       // kShmVersion
  std::uint32_t header_bytes;  // sizeof(ShmRegionHeader)
  std::uint64_t total_bytes;   // size of the memfd
  std::uint64_t event_ring_offset;
  std::uint64_t event_ring_bytes;  // SpscRing<TokenEvent>::BytesFor(event_slots)
  std::uint32_t event_slots;
  std::uint32_t event_slot_bytes;  // sizeof(TokenEvent)
  std::uint64_t submission_ring_offset;
  std::uint64_t submission_ring_bytes;
  std::uint32_t submission_slots;
  std::uint32_t submission_slot_bytes;  // sizeof(Submission)
  std::uint8_t reserved[56];            // zero; pads the header to two cache lines
};
static_assert(sizeof(ShmRegionHeader) == 128);
static_assert(std::is_trivially_copyable_v<ShmRegionHeader>);

struct ShmRegionOptions {
  /// Seal the memfd against shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), so
  /// a client cannot ftruncate the region under the daemon's mapping (a SIGBUS in the daemon).
  bool seal = true;
};

class ShmRegion {
 public:
  /// Daemon side: memfd_create (MFD_CLOEXEC | MFD_ALLOW_SEALING), size, map, format, seal.
  /// Slot counts must be powers of two in [1, 2^24].
  static Result<ShmRegion> Create(std::uint32_t event_slots, std::uint32_t submission_slots,
                                  ShmRegionOptions options = {});

  /// Client side: maps the region behind `fd` (borrowed: the caller still owns and may close it;
  /// the mapping stays) and validates the header and both rings strictly. Any inconsistency —
  /// wrong magic or version, sizes that disagree with the file, rings outside the region or
  /// overlapping, a capacity that is not a power of two, indices out of range — is an error.
  static Result<ShmRegion> Attach(int fd);

  ShmRegion() = default;
  ShmRegion(ShmRegion&& other) noexcept;
  ShmRegion& operator=(ShmRegion&& other) noexcept;
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;
  ~ShmRegion();

  /// Events, daemon -> client (the daemon pushes, the client pops).
  SpscRing<TokenEvent>& events() { return events_; }
  /// Submissions, client -> daemon (the client pushes, the daemon pops).
  SpscRing<Submission>& submissions() { return submissions_; }

  /// The memfd (owned) of a created region, to pass to the client; -1 for an attached one.
  int fd() const { return fd_; }
  std::size_t size() const { return region_.get_size(); }
  void* data() const { return region_.get_address(); }
  /// The memfd's seals (F_GET_SEALS) when created or attached; 0 if none or unknown.
  int seals() const { return seals_; }

 private:
  boost::interprocess::mapped_region region_;
  SpscRing<TokenEvent> events_;
  SpscRing<Submission> submissions_;
  int fd_ = -1;
  int seals_ = 0;
};

/// The layout Create would produce for these slot counts (used by Create and by tests).
Result<ShmRegionHeader> PlanShmLayout(std::uint32_t event_slots, std::uint32_t submission_slots);

/// Checks a header copied out of a region of `file_bytes` bytes; Ok when Attach would accept it.
Status ValidateShmHeader(const ShmRegionHeader& header, std::uint64_t file_bytes);

}  // namespace deepinfer::ipc
