// Wakeups and descriptor passing for the data plane (docs/daemon.md, "Data plane"):
//  - UniqueFd: an owned file descriptor.
//  - EventFd: a non-blocking eventfd; the producer of a ring Signal()s the consumer's eventfd
//    after publishing, the consumer Wait()s on it (poll) when its ring is empty, then Drain()s.
//  - SendFds / RecvFds: pass descriptors ([memfd, daemon->client eventfd, client->daemon
//    eventfd]) with a payload over a Unix stream socket (SCM_RIGHTS).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/common/status.h"

namespace deepinfer::ipc {

/// The most descriptors one SendFds / RecvFds call carries.
inline constexpr std::size_t kMaxPassedFds = 16;

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

class EventFd {
 public:
  /// eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK).
  static Result<EventFd> Create();
  /// Adopts a received eventfd; makes it non-blocking. Fails when `fd` is not an eventfd.
  static Result<EventFd> Adopt(UniqueFd fd);

  EventFd() = default;

  /// Adds 1 to the counter (wakes a waiter). A counter already at its maximum (a peer wrote
  /// 2^64-2) means a wakeup is pending anyway: that is not an error, and Signal never blocks.
  Status Signal() const;
  /// Reads and resets the counter; returns the value (0 when nothing was pending).
  std::uint64_t Drain() const;
  /// Waits until the counter is non-zero (poll). True when readable, false on timeout;
  /// a negative timeout waits forever. Does not drain.
  Result<bool> Wait(std::chrono::milliseconds timeout) const;

  int fd() const { return fd_.get(); }
  bool valid() const { return fd_.valid(); }
  UniqueFd Release() { return std::move(fd_); }

 private:
  explicit EventFd(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

/// Sends `payload` (at least one byte: stream sockets carry ancillary data only with data) and
/// `fds` (at most kMaxPassedFds; still owned by the caller) over the Unix stream socket. The fds
/// travel with the payload's first byte. Retries partial writes and EINTR; on a non-blocking
/// socket waits up to `timeout` for room, then fails.
Status SendFds(int socket, std::string_view payload, std::span<const int> fds,
               std::chrono::milliseconds timeout = std::chrono::milliseconds(1000));

/// One recvmsg on a Unix stream socket: up to `buffer.size()` bytes into `buffer`, and any
/// descriptors that came with them appended to `*fds` (owned, close-on-exec). Returns the byte
/// count; 0 means the peer closed. More than `max_fds` descriptors, or a truncated control
/// message, is an error and every received descriptor is closed. Stream sockets keep no message
/// boundaries: the bytes may be part of a frame, or more than one; the caller reassembles.
Result<std::size_t> RecvFds(int socket, std::span<char> buffer, std::vector<UniqueFd>* fds,
                            std::size_t max_fds = kMaxPassedFds);

}  // namespace deepinfer::ipc
