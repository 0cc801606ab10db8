#include "ipc/eventfd.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace deepinfer::ipc {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

using Clock = std::chrono::steady_clock;

// poll() one descriptor for `events`, retrying EINTR with the remaining time. True when ready.
Result<bool> PollOne(int fd, short events, std::chrono::milliseconds timeout) {
  const bool forever = timeout.count() < 0;
  const auto deadline = Clock::now() + (forever ? std::chrono::milliseconds(0) : timeout);
  for (;;) {
    int wait_ms = -1;
    if (!forever) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      wait_ms = left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
    }
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, wait_ms);
    if (n > 0) {
      if (p.revents & POLLNVAL) return InvalidArgument("poll: descriptor is not open");
      return true;  // readable / writable, or POLLERR / POLLHUP: the next call reports it
    }
    if (n == 0) return false;
    if (errno != EINTR) return IoError(Errno("poll"));
  }
}

}  // namespace

void UniqueFd::reset(int fd) {
  if (fd_ >= 0 && fd_ != fd) ::close(fd_);
  fd_ = fd;
}

Result<EventFd> EventFd::Create() {
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return IoError(Errno("eventfd"));
  return EventFd(UniqueFd(fd));
}

Result<EventFd> EventFd::Adopt(UniqueFd fd) {
  if (!fd.valid()) return InvalidArgument("eventfd: invalid descriptor");
  // An eventfd is an anonymous inode whose /proc link reads "anon_inode:[eventfd]".
  char link[64] = {};
  const std::string path = "/proc/self/fd/" + std::to_string(fd.get());
  const ssize_t n = ::readlink(path.c_str(), link, sizeof(link) - 1);
  if (n < 0 || std::string_view(link, static_cast<std::size_t>(n)) != "anon_inode:[eventfd]") {
    return InvalidArgument("eventfd: descriptor " + std::to_string(fd.get()) +
                           " is not an eventfd");
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return IoError(Errno("fcntl O_NONBLOCK"));
  }
  return EventFd(std::move(fd));
}

Status EventFd::Signal() const {
  const std::uint64_t one = 1;
  for (;;) {
    if (::write(fd_.get(), &one, sizeof(one)) == sizeof(one)) return Status::Ok();
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return Status::Ok();  // counter saturated: a wakeup is pending
    return IoError(Errno("eventfd write"));
  }
}

std::uint64_t EventFd::Drain() const {
  std::uint64_t value = 0;
  for (;;) {
    if (::read(fd_.get(), &value, sizeof(value)) == sizeof(value)) return value;
    if (errno != EINTR) return 0;  // EAGAIN: nothing pending
  }
}

Result<bool> EventFd::Wait(std::chrono::milliseconds timeout) const {
  return PollOne(fd_.get(), POLLIN, timeout);
}

Status SendFds(int socket, std::string_view payload, std::span<const int> fds,
               std::chrono::milliseconds timeout) {
  if (payload.empty()) return InvalidArgument("SendFds: the payload must not be empty");
  if (fds.size() > kMaxPassedFds) {
    return InvalidArgument("SendFds: " + std::to_string(fds.size()) + " descriptors > " +
                           std::to_string(kMaxPassedFds));
  }
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  std::size_t sent = 0;
  while (sent < payload.size()) {
    iovec iov{const_cast<char*>(payload.data() + sent), payload.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (sent == 0 && !fds.empty()) {  // the descriptors ride on the first byte
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    const ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      DI_ASSIGN_OR_RETURN(bool ready, PollOne(socket, POLLOUT, timeout));
      if (!ready) return IoError("SendFds: timed out waiting for the socket");
      continue;
    }
    return IoError(Errno("sendmsg"));
  }
  return Status::Ok();
}

Result<std::size_t> RecvFds(int socket, std::span<char> buffer, std::vector<UniqueFd>* fds,
                            std::size_t max_fds) {
  if (buffer.empty()) return InvalidArgument("RecvFds: empty buffer");
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  for (;;) {
    iovec iov{buffer.data(), buffer.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(Errno("recvmsg"));
    }
    // Take ownership of everything that arrived before judging it, so nothing leaks.
    std::vector<UniqueFd> got;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        got.emplace_back(fd);
      }
    }
    if (msg.msg_flags & MSG_CTRUNC) {
      return DataLoss("RecvFds: control data truncated (too many descriptors)");
    }
    if (got.size() > max_fds) {
      return DataLoss("RecvFds: " + std::to_string(got.size()) + " descriptors > " +
                      std::to_string(max_fds));
    }
    for (UniqueFd& fd : got) fds->push_back(std::move(fd));
    return static_cast<std::size_t>(n);
  }
}

}  // namespace deepinfer::ipc
