#include "daemon/server.h"

#include <grp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "daemon/session.h"
#include "engine/common/json_writer.h"

namespace deepinfer::daemon {

namespace asio = boost::asio;
using stream = asio::local::stream_protocol;

Server::Server(asio::io_context& io, const DaemonConfig& config, EngineWorker& engine,
               const Tokenizer* tokenizer, ModelInfo model)
    : io_(io), config_(config), engine_(engine), tok_(tokenizer), model_(std::move(model)) {}

Server::~Server() = default;

Status Server::Listen(std::optional<int> activated_fd) {
  boost::system::error_code ec;
  acceptor_.emplace(io_);
  if (activated_fd) {
    acceptor_->assign(stream(), *activated_fd, ec);
    if (ec) return IoError("adopting the activated socket: " + ec.message());
    return Status::Ok();
  }
  const std::string& path = config_.socket_path;
  std::error_code fs_ec;
  // A stale socket from a crashed daemon would make bind fail; anything else is left alone.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return InvalidArgument(path + ": exists and is not a socket");
    std::filesystem::remove(path, fs_ec);
  }
  acceptor_->open(stream(), ec);
  if (!ec) acceptor_->bind(stream::endpoint(path), ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return IoError(path + ": cannot listen: " + ec.message());
  if (::chmod(path.c_str(), config_.socket_mode) != 0) {
    return IoError(path + ": chmod failed: " + std::strerror(errno));
  }
  if (config_.socket_gid &&
      ::chown(path.c_str(), static_cast<uid_t>(-1), *config_.socket_gid) != 0) {
    return IoError(path + ": chown to group " + config_.socket_group +
                   " failed: " + std::strerror(errno));
  }
  return Status::Ok();
}

void Server::Start() { asio::co_spawn(io_, AcceptLoop(), asio::detached); }

asio::awaitable<void> Server::AcceptLoop() {
  for (;;) {
    boost::system::error_code ec;
    stream::socket socket =
        co_await acceptor_->async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || draining_) co_return;
      spdlog::warn("accept failed: {}", ec.message());
      continue;
    }
    if (counters_.clients.load() >= static_cast<int64_t>(config_.max_clients)) {
      spdlog::warn("refusing a client: {} clients connected (max_clients)",
                   counters_.clients.load());
      continue;  // the socket closes as it goes out of scope
    }
    auto session = std::make_shared<Session>(*this, std::move(socket));
    sessions_.push_back(session);
    asio::co_spawn(io_, session->Run(), asio::detached);
  }
}

void Server::BeginDrain() {
  draining_ = true;
  if (acceptor_) {
    boost::system::error_code ec;
    acceptor_->close(ec);
    std::error_code fs_ec;
    if (!config_.socket_path.empty()) std::filesystem::remove(config_.socket_path, fs_ec);
  }
}

void Server::CancelAll() {
  for (auto& w : sessions_) {
    if (auto s = w.lock()) s->CancelAll();
  }
}

std::string Server::StatusJson() const {
  const auto& e = engine_.stats();
  const double uptime =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::string j = "{\"version\": \"" DEEPINFER_VERSION "\", \"model\": ";
  AppendJsonString(&j, model_.name);
  j += ", \"vocab_size\": " + std::to_string(model_.vocab_size);
  j += ", \"uptime_seconds\": " + std::to_string(uptime);
  j += ", \"draining\": " + std::string(draining_ ? "true" : "false");
  j += ", \"clients\": " + std::to_string(counters_.clients.load());
  j += ", \"clients_total\": " + std::to_string(counters_.clients_total.load());
  j += ", \"queue_depth\": " + std::to_string(e.queue_depth.load());
  j += ", \"running_requests\": " + std::to_string(e.running.load());
  j += ", \"in_flight_requests\": " + std::to_string(counters_.in_flight.load());
  j += ", \"requests_total\": " + std::to_string(counters_.requests_total.load());
  j += ", \"requests_rejected\": " + std::to_string(counters_.requests_rejected.load());
  j += ", \"requests_done\": " + std::to_string(e.jobs_done.load());
  j += ", \"prompt_tokens\": " + std::to_string(e.prompt_tokens.load());
  j += ", \"tokens_served\": " + std::to_string(e.tokens_generated.load());
  j += ", \"engine_steps\": " + std::to_string(e.steps.load());
  j += ", \"cache_bytes\": " + std::to_string(e.cache_bytes.load());
  j += ", \"cache_memory_bytes\": " + std::to_string(config_.cache_memory_bytes);
  j += ", \"preemptions\": " + std::to_string(e.preemptions.load());
  j += ", \"prefix_cache_hit_tokens\": " + std::to_string(e.prefix_cache_hit_tokens.load());
  j += ", \"prefix_cache_lookup_tokens\": " + std::to_string(e.prefix_cache_lookup_tokens.load());
  j += ", \"prefix_cache_bytes\": " + std::to_string(e.prefix_cache_bytes.load());
  constexpr uint64_t kBlockBytes = BlockPool::kBlockFloats * sizeof(float);
  j += ", \"kv_block_bytes\": " + std::to_string(kBlockBytes);
  j += ", \"kv_blocks_in_use\": " + std::to_string(e.kv_blocks_in_use.load());
  j += ", \"kv_blocks_free\": " + std::to_string(e.kv_blocks_free.load());
  j += ", \"forward\": \"" + config_.forward + "\"";
  j += ", \"slots_total\": " + std::to_string(e.slots_total.load());
  j += ", \"slots_free\": " + std::to_string(e.slots_free.load());
  j += ", \"slots_parked\": " + std::to_string(e.slots_parked.load());
  j += ", \"slots_shared\": " + std::to_string(e.slots_shared.load());
  j += ", \"stepper_sampled_tokens\": " + std::to_string(e.stepper_sampled_tokens.load());
  j += ", \"stepper_redrawn_draws\": " + std::to_string(e.stepper_redrawn_draws.load());
  const uint64_t fwd = e.forward_steps.load(), gaps = e.idle_gaps.load();
  j += ", \"overlap\": " + std::string(config_.overlap ? "true" : "false");
  j += ", \"step_forward_us_avg\": " +
       std::to_string(fwd ? e.forward_ns_total.load() / 1000.0 / static_cast<double>(fwd) : 0.0);
  j += ", \"idle_gap_us_avg\": " +
       std::to_string(gaps ? e.idle_gap_ns_total.load() / 1000.0 / static_cast<double>(gaps) : 0.0);
  j += ", \"idle_gap_us_max\": " + std::to_string(e.idle_gap_ns_max.load() / 1000.0);
  j += ", \"bad_frames\": " + std::to_string(counters_.bad_frames.load());
  j += "}";
  return j;
}

}  // namespace deepinfer::daemon
