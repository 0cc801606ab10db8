// The control-plane server: a Boost.Asio io_context with C++20 coroutines accepts clients on
// the Unix socket, performs the handshake, hands each client its shared-memory ring, validates
// and tokenizes requests, and gives them to the engine thread. See docs/daemon.md.
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "daemon/config.h"
#include "daemon/engine_worker.h"
#include "grammar/vocabulary.h"
#include "ipc/protocol.h"

namespace deepinfer::daemon {

struct ModelInfo {
  std::string name;
  int32_t vocab_size = 0;
};

struct ServerCounters {
  std::atomic<uint64_t> clients_total{0};
  std::atomic<int64_t> clients{0};
  std::atomic<uint64_t> requests_total{0};
  std::atomic<uint64_t> requests_rejected{0};
  std::atomic<uint64_t> bad_frames{0};
  std::atomic<int64_t> in_flight{0};
};

class Session;

class Server {
 public:
  Server(boost::asio::io_context& io, const DaemonConfig& config, EngineWorker& engine,
         const Tokenizer* tokenizer, ModelInfo model);
  /// The vocabulary structured outputs are masked over (needs the tokenizer).
  void SetVocabulary(std::shared_ptr<const grammar::TokenVocabulary> v) { vocab_ = std::move(v); }
  ~Server();

  /// Binds config.socket_path (mode, group) or adopts a socket-activated listening fd.
  Status Listen(std::optional<int> activated_fd);
  void Start();
  /// Stops accepting connections and new requests (they get shutting_down).
  void BeginDrain();
  /// Cancels every request in flight.
  void CancelAll();
  /// Applies the reloadable limits of a new configuration.
  void Reload(const DaemonConfig& config) { config_ = config; }
  int64_t in_flight() const { return counters_.in_flight.load(); }
  std::string StatusJson() const;

 private:
  friend class Session;
  boost::asio::awaitable<void> AcceptLoop();

  boost::asio::io_context& io_;
  DaemonConfig config_;
  EngineWorker& engine_;
  const Tokenizer* tok_;
  ModelInfo model_;
  std::optional<boost::asio::local::stream_protocol::acceptor> acceptor_;
  bool draining_ = false;
  std::atomic<uint64_t> next_job_id_{1};
  std::atomic<uint64_t> next_client_id_{1};
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  ServerCounters counters_;
  std::vector<std::weak_ptr<Session>> sessions_;        // IO thread only
  std::unordered_map<uid_t, int64_t> requests_by_uid_;  // IO thread only: in-flight per user
  std::shared_ptr<const grammar::TokenVocabulary> vocab_;
  // Compiled response formats by their JSON text (IO thread only; bounded).
  std::unordered_map<std::string, std::shared_ptr<const grammar::CompiledGrammar>> grammars_;
};

}  // namespace deepinfer::daemon
