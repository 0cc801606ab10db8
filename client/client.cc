#include "client/client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

namespace deepinfer::client {

Result<std::unique_ptr<Client>> Client::Connect(const std::string& path, const std::string& name) {
  std::unique_ptr<Client> c(new Client());
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return InvalidArgument(path + ": socket path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  c->fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!c->fd_.valid()) return IoError(std::string("socket: ") + std::strerror(errno));
  if (::connect(c->fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return IoError(path + ": cannot connect: " + std::strerror(errno));
  }
  ipc::Hello hello;
  hello.client = name;
  DI_RETURN_IF_ERROR(c->SendJson(ipc::ToJson(hello)));
  DI_ASSIGN_OR_RETURN(ipc::Reply reply, c->ReadReply());
  auto* h = std::get_if<ipc::HelloReply>(&reply);
  if (h == nullptr) return DataLoss("the daemon did not answer hello");
  c->hello_ = *h;
  if (!h->ok)
    return InvalidArgument("the daemon refused: " + h->error.code + ": " + h->error.message);
  DI_ASSIGN_OR_RETURN(std::string offer_json, c->ReadFrame());
  std::vector<ipc::UniqueFd> fds = std::move(c->pending_fds_);
  DI_ASSIGN_OR_RETURN(ipc::Reply offer, ipc::ParseReply(offer_json));
  if (!std::holds_alternative<ipc::ShmOffer>(offer) || fds.size() != 3) {
    return DataLoss("the daemon's shared-memory offer is missing or lacks its descriptors");
  }
  DI_ASSIGN_OR_RETURN(ipc::ShmRegion region, ipc::ShmRegion::Attach(fds[0].get()));
  c->region_.emplace(std::move(region));
  DI_ASSIGN_OR_RETURN(ipc::EventFd from, ipc::EventFd::Adopt(std::move(fds[1])));
  DI_ASSIGN_OR_RETURN(ipc::EventFd to, ipc::EventFd::Adopt(std::move(fds[2])));
  c->from_daemon_.emplace(std::move(from));
  c->to_daemon_.emplace(std::move(to));
  c->region_fds_.push_back(std::move(fds[0]));
  return c;
}

Client::~Client() = default;

deepinfer::Status Client::SendRaw(std::string_view bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd_.get(), bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError(std::string("send: ") + std::strerror(errno));
    off += static_cast<size_t>(n);
  }
  return deepinfer::Status::Ok();
}

deepinfer::Status Client::SendJson(const std::string& json) {
  return SendRaw(ipc::EncodeFrame(json));
}

Result<std::string> Client::ReadFrame() {
  for (;;) {
    // Bytes already received go to the decoder first; it takes them up to a frame's end.
    const size_t used = decoder_.Feed(inbuf_.data(), inbuf_.size());
    inbuf_.erase(0, used);
    DI_ASSIGN_OR_RETURN(std::optional<std::string> frame, decoder_.Next());
    if (frame) return std::move(*frame);
    if (!inbuf_.empty()) continue;
    char buf[4096];
    DI_ASSIGN_OR_RETURN(size_t n,
                        ipc::RecvFds(fd_.get(), std::span<char>(buf, sizeof(buf)), &pending_fds_));
    if (n == 0) return IoError("the daemon closed the connection");
    inbuf_.append(buf, n);
  }
}

Result<ipc::Reply> Client::ReadReply() {
  DI_ASSIGN_OR_RETURN(std::string frame, ReadFrame());
  return ipc::ParseReply(frame);
}

Result<ipc::Accepted> Client::Generate(const ipc::GenerateRequest& request) {
  DI_RETURN_IF_ERROR(SendJson(ipc::ToJson(request)));
  for (;;) {
    DI_ASSIGN_OR_RETURN(ipc::Reply reply, ReadReply());
    if (auto* a = std::get_if<ipc::Accepted>(&reply); a && a->id == request.id) return *a;
    if (auto* e = std::get_if<ipc::ErrorReply>(&reply); e && (!e->id || *e->id == request.id)) {
      return InvalidArgument(e->error.code + ": " + e->error.message);
    }
  }
}

deepinfer::Status Client::Cancel(uint64_t id) {
  return SendJson(ipc::ToJson(ipc::CancelRequest{id}));
}

deepinfer::Status Client::CancelViaRing(uint64_t id) {
  ipc::Submission sub{};
  sub.request_id = id;
  sub.kind = static_cast<uint16_t>(ipc::SubmissionKind::kCancel);
  if (!region_->submissions().TryPush(sub)) return IoError("submission ring full");
  return to_daemon_->Signal();
}

Result<std::string> Client::GetStatus() {
  DI_RETURN_IF_ERROR(SendJson(ipc::ToJson(ipc::StatusRequest{})));
  for (;;) {
    DI_ASSIGN_OR_RETURN(ipc::Reply reply, ReadReply());
    if (auto* s = std::get_if<ipc::StatusReply>(&reply)) return s->fields_json;
  }
}

Result<ipc::HealthReply> Client::Health() {
  DI_RETURN_IF_ERROR(SendJson(ipc::ToJson(ipc::HealthRequest{})));
  for (;;) {
    DI_ASSIGN_OR_RETURN(ipc::Reply reply, ReadReply());
    if (auto* h = std::get_if<ipc::HealthReply>(&reply)) return *h;
  }
}

Result<std::optional<ipc::TokenEvent>> Client::NextEvent(std::chrono::milliseconds timeout) {
  ipc::TokenEvent e;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (region_->events().TryPop(&e)) {
      e.text_len = std::min<uint32_t>(e.text_len, sizeof(e.text));
      return std::optional<ipc::TokenEvent>(e);
    }
    if (region_->events().corrupted()) return DataLoss("event ring corrupted");
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::optional<ipc::TokenEvent>();
    // Wait for the daemon's signal, or for the socket to close (a dead daemon).
    pollfd p[2] = {{from_daemon_->fd(), POLLIN, 0}, {fd_.get(), POLLRDHUP, 0}};
    const int r = ::poll(p, 2, static_cast<int>(std::min<int64_t>(left.count(), 100)));
    if (r > 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
      if (!region_->events().TryPop(&e)) return IoError("the daemon closed the connection");
      e.text_len = std::min<uint32_t>(e.text_len, sizeof(e.text));
      return std::optional<ipc::TokenEvent>(e);
    }
    if (r > 0 && (p[0].revents & POLLIN)) (void)from_daemon_->Drain();
  }
}

}  // namespace deepinfer::client
