// One connected client: its socket, its shared-memory region and eventfds, and its requests.
// Socket work happens on the IO thread; the engine thread only publishes events into the ring
// (the ring's single producer) and signals the client's eventfd.
#pragma once

#include <boost/asio.hpp>
#include <deque>
#include <memory>
#include <unordered_map>

#include "daemon/server.h"
#include "ipc/eventfd.h"
#include "ipc/frame.h"
#include "ipc/peer.h"
#include "ipc/shm_region.h"

namespace deepinfer::daemon {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server& server, boost::asio::local::stream_protocol::socket socket);
  boost::asio::awaitable<void> Run();

  /// Engine thread: publish one event, keeping room for the final one. False: the backlog
  /// overflowed (the client is too slow) or the ring is corrupted.
  bool Publish(const ipc::TokenEvent& event, bool final_event);
  /// Cancels every request of this client (IO thread).
  void CancelAll();

 private:
  Status HandleFrame(std::string frame);
  Status HandleHello(std::string_view body);
  void HandleGenerate(ipc::GenerateRequest req);
  Result<std::vector<int32_t>> PromptIds(const ipc::GenerateRequest& req);
  void Send(std::string json);
  boost::asio::awaitable<void> Writer();
  /// Watches the client's eventfd and applies what it pushed into the submission ring.
  boost::asio::awaitable<void> SubmissionReader();

  Server& server_;
  boost::asio::local::stream_protocol::socket socket_;
  ipc::FrameDecoder decoder_;
  ipc::PeerCredentials peer_;
  const uint64_t client_id_;  // the engine shares batch slots fairly between these
  bool greeted_ = false;
  std::optional<ipc::ShmRegion> region_;
  std::optional<ipc::EventFd> to_client_, from_client_;
  std::optional<boost::asio::posix::stream_descriptor> from_client_watch_;
  std::unordered_map<uint64_t, std::shared_ptr<EngineJob>> jobs_;  // IO thread only
  std::deque<std::string> outbox_;                                 // IO thread only
  bool writing_ = false;
  bool closed_ = false;
  // Engine thread only: events that did not fit into the ring yet.
  std::deque<ipc::TokenEvent> backlog_;
  // Requests of this client the engine has not finished: each keeps one ring slot reserved for
  // its final event (incremented on the IO thread before submission, decremented by the engine).
  std::atomic<int64_t> live_requests_{0};
};

}  // namespace deepinfer::daemon
