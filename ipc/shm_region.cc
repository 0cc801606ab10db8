#include "ipc/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/interprocess/exceptions.hpp>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace deepinfer::ipc {
namespace {

namespace bip = boost::interprocess;

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

constexpr std::uint64_t RoundUp(std::uint64_t v, std::uint64_t to) {
  return (v + to - 1) / to * to;
}

// Boost.Interprocess maps any "MemoryMappable" (shared_memory_object, file_mapping, ...): a type
// whose get_mapping_handle() names the descriptor. It has no such type for a descriptor we
// already hold (a memfd, or one received over SCM_RIGHTS), so this adapter provides one; the
// descriptor stays owned by the caller. mapping_handle_t is the public POSIX handle type of
// boost::interprocess (no ipcdetail).
class FdMappable {
 public:
  explicit FdMappable(int fd) : fd_(fd) {}
  bip::mapping_handle_t get_mapping_handle() const {
    bip::mapping_handle_t handle;
    handle.handle = fd_;
    handle.is_xsi = false;
    return handle;
  }

 private:
  int fd_;
};

// mapped_region reports failures by throwing; nothing crosses our API but a Status.
Result<bip::mapped_region> MapShared(int fd, std::size_t bytes) {
  try {
    return bip::mapped_region(FdMappable(fd), bip::read_write, 0, bytes);
  } catch (const bip::interprocess_exception& e) {
    return IoError(std::string("mmap of shared region: ") + e.what());
  }
}

Status CheckRing(const char* name, std::uint64_t offset, std::uint64_t bytes, std::uint32_t slots,
                 std::uint32_t slot_bytes, std::uint32_t want_slot_bytes,
                 std::uint64_t header_bytes, std::uint64_t total) {
  const std::string n = std::string("shm region: ") + name + " ring ";
  if (!IsValidRingCapacity(slots)) {
    return DataLoss(n + "capacity " + std::to_string(slots) +
                    " is not a power of two in [1, 2^24]");
  }
  if (slot_bytes != want_slot_bytes) {
    return DataLoss(n + "slot size " + std::to_string(slot_bytes) + ", expected " +
                    std::to_string(want_slot_bytes));
  }
  if (bytes != sizeof(SpscRingHeader) + static_cast<std::uint64_t>(slots) * slot_bytes) {
    return DataLoss(n + "size " + std::to_string(bytes) + " disagrees with its capacity");
  }
  if (offset % kCacheLineBytes != 0 || offset < header_bytes || offset > total ||
      bytes > total - offset) {
    return DataLoss(n + "[" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                    ") lies outside the region's " + std::to_string(total) + " bytes");
  }
  return Status::Ok();
}

}  // namespace

Result<ShmRegionHeader> PlanShmLayout(std::uint32_t event_slots, std::uint32_t submission_slots) {
  if (!IsValidRingCapacity(event_slots) || !IsValidRingCapacity(submission_slots)) {
    return InvalidArgument("shm region: slot counts must be powers of two in [1, 2^24], got " +
                           std::to_string(event_slots) + " and " +
                           std::to_string(submission_slots));
  }
  ShmRegionHeader h{};
  h.magic = kShmMagic;
  h.version = kShmVersion;
  h.header_bytes = sizeof(ShmRegionHeader);
  h.event_slots = event_slots;
  h.event_slot_bytes = sizeof(TokenEvent);
  h.event_ring_offset = RoundUp(sizeof(ShmRegionHeader), kCacheLineBytes);
  h.event_ring_bytes = SpscRing<TokenEvent>::BytesFor(event_slots);
  h.submission_slots = submission_slots;
  h.submission_slot_bytes = sizeof(Submission);
  h.submission_ring_offset = RoundUp(h.event_ring_offset + h.event_ring_bytes, kCacheLineBytes);
  h.submission_ring_bytes = SpscRing<Submission>::BytesFor(submission_slots);
  h.total_bytes = RoundUp(h.submission_ring_offset + h.submission_ring_bytes,
                          bip::mapped_region::get_page_size());
  if (h.total_bytes > kMaxShmRegionBytes) {
    return InvalidArgument("shm region: " + std::to_string(h.total_bytes) + " bytes exceed " +
                           std::to_string(kMaxShmRegionBytes));
  }
  return h;
}

Status ValidateShmHeader(const ShmRegionHeader& h, std::uint64_t file_bytes) {
  if (h.magic != kShmMagic) return DataLoss("shm region: bad magic");
  if (h.version != kShmVersion) {
    return DataLoss("shm region: version " + std::to_string(h.version) + ", expected " +
                    std::to_string(kShmVersion));
  }
  if (h.header_bytes != sizeof(ShmRegionHeader)) {
    return DataLoss("shm region: header size " + std::to_string(h.header_bytes));
  }
  if (h.total_bytes != file_bytes || file_bytes > kMaxShmRegionBytes) {
    return DataLoss("shm region: header says " + std::to_string(h.total_bytes) +
                    " bytes, the file has " + std::to_string(file_bytes));
  }
  DI_RETURN_IF_ERROR(CheckRing("event", h.event_ring_offset, h.event_ring_bytes, h.event_slots,
                               h.event_slot_bytes, sizeof(TokenEvent), h.header_bytes,
                               h.total_bytes));
  DI_RETURN_IF_ERROR(CheckRing("submission", h.submission_ring_offset, h.submission_ring_bytes,
                               h.submission_slots, h.submission_slot_bytes, sizeof(Submission),
                               h.header_bytes, h.total_bytes));
  const bool disjoint = h.event_ring_offset + h.event_ring_bytes <= h.submission_ring_offset ||
                        h.submission_ring_offset + h.submission_ring_bytes <= h.event_ring_offset;
  if (!disjoint) return DataLoss("shm region: the event and submission rings overlap");
  return Status::Ok();
}

Result<ShmRegion> ShmRegion::Create(std::uint32_t event_slots, std::uint32_t submission_slots,
                                    ShmRegionOptions options) {
  DI_ASSIGN_OR_RETURN(ShmRegionHeader layout, PlanShmLayout(event_slots, submission_slots));
  ShmRegion r;
  r.fd_ = ::memfd_create("deepinfer-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (r.fd_ < 0) return IoError(Errno("memfd_create"));
  // memfd_create honours no mode: the inode is 0777 & ~umask, but it has no name anywhere; the
  // only way in is the descriptor. Tighten it anyway (docs: mode 0600).
  if (::fchmod(r.fd_, 0600) != 0) return IoError(Errno("fchmod memfd"));
  if (::ftruncate(r.fd_, static_cast<off_t>(layout.total_bytes)) != 0) {
    return IoError(Errno("ftruncate memfd"));
  }
  if (options.seal && ::fcntl(r.fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return IoError(Errno("F_ADD_SEALS"));
  }
  const int seals = ::fcntl(r.fd_, F_GET_SEALS);
  r.seals_ = seals < 0 ? 0 : seals;
  DI_ASSIGN_OR_RETURN(r.region_, MapShared(r.fd_, layout.total_bytes));
  auto* base = static_cast<unsigned char*>(r.region_.get_address());
  std::memcpy(base, &layout, sizeof(layout));
  DI_ASSIGN_OR_RETURN(r.events_,
                      SpscRing<TokenEvent>::Create(base + layout.event_ring_offset,
                                                   layout.event_ring_bytes, event_slots));
  DI_ASSIGN_OR_RETURN(r.submissions_,
                      SpscRing<Submission>::Create(base + layout.submission_ring_offset,
                                                   layout.submission_ring_bytes, submission_slots));
  return r;
}

Result<ShmRegion> ShmRegion::Attach(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return IoError(Errno("fstat shared region"));
  if (!S_ISREG(st.st_mode)) return InvalidArgument("shm region: the descriptor is not a memfd");
  const auto file_bytes = static_cast<std::uint64_t>(st.st_size);
  if (file_bytes < sizeof(ShmRegionHeader) || file_bytes > kMaxShmRegionBytes) {
    return DataLoss("shm region: the file has " + std::to_string(file_bytes) + " bytes");
  }
  ShmRegion r;
  DI_ASSIGN_OR_RETURN(r.region_, MapShared(fd, file_bytes));
  auto* base = static_cast<unsigned char*>(r.region_.get_address());
  // Validate a private copy: the peer may rewrite the shared header while we look at it.
  ShmRegionHeader h;
  std::memcpy(&h, base, sizeof(h));
  DI_RETURN_IF_ERROR(ValidateShmHeader(h, file_bytes));
  DI_ASSIGN_OR_RETURN(r.events_,
                      SpscRing<TokenEvent>::Attach(base + h.event_ring_offset, h.event_ring_bytes));
  DI_ASSIGN_OR_RETURN(r.submissions_, SpscRing<Submission>::Attach(base + h.submission_ring_offset,
                                                                   h.submission_ring_bytes));
  if (r.events_.capacity() != h.event_slots || r.submissions_.capacity() != h.submission_slots) {
    return DataLoss("shm region: a ring's own capacity disagrees with the region header");
  }
  const int seals = ::fcntl(fd, F_GET_SEALS);
  r.seals_ = seals < 0 ? 0 : seals;
  return r;
}

ShmRegion::ShmRegion(ShmRegion&& other) noexcept
    : region_(std::move(other.region_)),
      events_(std::exchange(other.events_, {})),
      submissions_(std::exchange(other.submissions_, {})),
      fd_(std::exchange(other.fd_, -1)),
      seals_(other.seals_) {}

ShmRegion& ShmRegion::operator=(ShmRegion&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    region_ = std::move(other.region_);
    events_ = std::exchange(other.events_, {});
    submissions_ = std::exchange(other.submissions_, {});
    fd_ = std::exchange(other.fd_, -1);
    seals_ = other.seals_;
  }
  return *this;
}

ShmRegion::~ShmRegion() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace deepinfer::ipc
