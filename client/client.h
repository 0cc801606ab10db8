// libdeepinfer-client: connects to deepinferd over its Unix socket, performs the handshake, maps
// the shared-memory event ring, submits requests and reads their token events.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/common/status.h"
#include "ipc/eventfd.h"
#include "ipc/frame.h"
#include "ipc/protocol.h"
#include "ipc/shm_region.h"

namespace deepinfer::client {

class Client {
 public:
  /// Connects, says hello (protocol 1) and maps the region the daemon offers.
  static Result<std::unique_ptr<Client>> Connect(const std::string& socket_path,
                                                 const std::string& name = "deepinfer");
  ~Client();

  const ipc::HelloReply& hello() const { return hello_; }

  /// Submits a request and waits for its acceptance (or the typed error the daemon returned).
  Result<ipc::Accepted> Generate(const ipc::GenerateRequest& request);
  deepinfer::Status Cancel(uint64_t id);
  /// Cancels through the shared-memory submission ring (no socket write).
  deepinfer::Status CancelViaRing(uint64_t id);
  /// The daemon's status object (JSON text).
  Result<std::string> GetStatus();
  Result<ipc::HealthReply> Health();

  /// The next token event of any request, waiting up to `timeout`; nullopt on timeout.
  Result<std::optional<ipc::TokenEvent>> NextEvent(std::chrono::milliseconds timeout);

  /// Sends raw bytes (tests of the daemon's robustness use this).
  deepinfer::Status SendRaw(std::string_view bytes);
  int socket_fd() const { return fd_.get(); }

 private:
  Client() = default;
  deepinfer::Status SendJson(const std::string& json);
  Result<std::string> ReadFrame();
  Result<ipc::Reply> ReadReply();

  ipc::UniqueFd fd_;
  ipc::FrameDecoder decoder_;
  std::optional<ipc::ShmRegion> region_;
  std::optional<ipc::EventFd> from_daemon_, to_daemon_;
  std::vector<ipc::UniqueFd> region_fds_;
  std::vector<ipc::UniqueFd> pending_fds_;  // descriptors received with socket bytes
  std::string inbuf_;                       // received bytes the decoder has not taken yet
  ipc::HelloReply hello_;
};

}  // namespace deepinfer::client
