#include "daemon/session.h"

#include <spdlog/spdlog.h>

#include <cstring>

#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/openai.h"
#include "grammar/response_format.h"

namespace deepinfer::daemon {

namespace asio = boost::asio;

Session::Session(Server& server, asio::local::stream_protocol::socket socket)
    : server_(server),
      socket_(std::move(socket)),
      decoder_(server.config_.max_frame_bytes),
      client_id_(server.next_client_id_.fetch_add(1)) {}

asio::awaitable<void> Session::Run() {
  auto self = shared_from_this();
  server_.counters_.clients.fetch_add(1);
  server_.counters_.clients_total.fetch_add(1);
  if (auto peer = ipc::GetPeerCredentials(socket_.native_handle()); peer.ok()) peer_ = *peer;
  spdlog::debug("client connected: pid {} uid {} gid {}", peer_.pid, peer_.uid, peer_.gid);
  char buf[64 << 10];
  for (;;) {
    boost::system::error_code ec;
    const size_t n = co_await socket_.async_read_some(
        asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;  // the client closed or died
    Status st =
        decoder_.FeedAll(buf, n, [&](std::string frame) { return HandleFrame(std::move(frame)); });
    if (!st.ok()) {
      // Broken framing or a protocol violation: the stream cannot be trusted any more.
      server_.counters_.bad_frames.fetch_add(1);
      spdlog::warn("client pid {} uid {}: closing: {}", peer_.pid, peer_.uid, st.ToString());
      break;
    }
  }
  closed_ = true;
  CancelAll();
  if (from_client_watch_) {
    boost::system::error_code ignored_ec;
    from_client_watch_->cancel(ignored_ec);
    (void)from_client_watch_->release();  // the EventFd owns the descriptor
  }
  boost::system::error_code ignored;
  socket_.close(ignored);
  server_.counters_.clients.fetch_sub(1);
  spdlog::debug("client disconnected: pid {} uid {}", peer_.pid, peer_.uid);
}

void Session::CancelAll() {
  for (auto& [id, job] : jobs_) job->cancel.store(true);
}

Status Session::HandleFrame(std::string frame) {
  ipc::RequestLimits limits;
  limits.vocab_size = server_.model_.vocab_size;
  limits.max_tokens = server_.config_.max_tokens_cap;
  Result<ipc::Request> req = ipc::ParseRequest(frame, limits);
  if (!req.ok()) {
    if (req.status().code() == ErrorCode::kDataLoss) return req.status();
    server_.counters_.requests_rejected.fetch_add(1);
    Send(ipc::ToJson(ipc::MakeErrorReply(frame, req.status())));
    return greeted_ ? Status::Ok() : DataLoss("the first frame must be a valid hello");
  }
  if (!greeted_ && !std::holds_alternative<ipc::Hello>(*req)) {
    return DataLoss("the first frame must be hello");
  }
  if (std::holds_alternative<ipc::Hello>(*req)) {
    if (greeted_) return DataLoss("a second hello");
    return HandleHello(frame);
  }
  if (auto* gen = std::get_if<ipc::GenerateRequest>(&*req)) {
    HandleGenerate(std::move(*gen));
  } else if (auto* cancel = std::get_if<ipc::CancelRequest>(&*req)) {
    auto it = jobs_.find(cancel->id);
    if (it == jobs_.end()) {
      Send(ipc::ToJson(
          ipc::ErrorReply{cancel->id, {std::string(ipc::kErrNotFound), "no such request"}}));
    } else {
      it->second->cancel.store(true);
    }
  } else if (std::holds_alternative<ipc::StatusRequest>(*req)) {
    Send(ipc::ToJson(ipc::StatusReply{server_.StatusJson()}));
  } else if (std::holds_alternative<ipc::HealthRequest>(*req)) {
    Send(ipc::ToJson(ipc::HealthReply{!server_.draining_, server_.draining_ ? "draining" : ""}));
  }
  return Status::Ok();
}

Status Session::HandleHello(std::string_view body) {
  auto req = ipc::ParseRequest(body, {});
  const auto& hello = std::get<ipc::Hello>(*req);
  ipc::HelloReply reply;
  if (hello.protocol != ipc::kProtocolVersion) {
    reply.ok = false;
    reply.error = {std::string(ipc::kErrVersionMismatch),
                   "server speaks protocol " + std::to_string(ipc::kProtocolVersion) + ", client " +
                       std::to_string(hello.protocol)};
    Send(ipc::ToJson(reply));
    return DataLoss("protocol version mismatch");
  }
  auto region = ipc::ShmRegion::Create(server_.config_.event_ring_slots, 64);
  auto to_client = ipc::EventFd::Create();
  auto from_client = ipc::EventFd::Create();
  if (!region.ok() || !to_client.ok() || !from_client.ok()) {
    reply.ok = false;
    reply.error = {std::string(ipc::kErrInternal), "cannot create the shared-memory region"};
    Send(ipc::ToJson(reply));
    return Internal("shared-memory setup failed");
  }
  region_.emplace(std::move(region).value());
  to_client_.emplace(std::move(to_client).value());
  from_client_.emplace(std::move(from_client).value());
  reply.server = "deepinferd " DEEPINFER_VERSION;
  reply.model = server_.model_.name;
  reply.vocab_size = server_.model_.vocab_size;
  greeted_ = true;
  // The hello reply and the offer go out synchronously, in order, before any other frame.
  std::string out = ipc::EncodeFrame(ipc::ToJson(reply));
  Status st = ipc::SendFds(socket_.native_handle(), out, {});
  if (!st.ok()) return st;
  const int fds[3] = {region_->fd(), to_client_->fd(), from_client_->fd()};
  const std::string offer = ipc::EncodeFrame(
      ipc::ToJson(ipc::ShmOffer{region_->size(), server_.config_.event_ring_slots}));
  DI_RETURN_IF_ERROR(ipc::SendFds(socket_.native_handle(), offer, fds));
  from_client_watch_.emplace(server_.io_, from_client_->fd());
  asio::co_spawn(server_.io_, SubmissionReader(), asio::detached);
  return Status::Ok();
}

Result<std::vector<int32_t>> Session::PromptIds(const ipc::GenerateRequest& req) {
  const Tokenizer* tok = server_.tok_;
  switch (req.prompt_kind) {
    case ipc::PromptKind::kIds:
      return req.prompt_ids;
    case ipc::PromptKind::kText:
      if (tok == nullptr)
        return InvalidArgument("prompt: this model has no tokenizer; send prompt_ids");
      // Client text is untrusted: special-token strings in it stay plain text.
      return tok->Encode(req.prompt, SpecialTokens::kPlainText);
    case ipc::PromptKind::kMessages: {
      if (tok == nullptr) return InvalidArgument("messages: this model has no tokenizer");
      DI_ASSIGN_OR_RETURN(ChatCompletionRequest chat,
                          ParseChatCompletionRequest("{\"messages\": " + req.messages_json + "}"));
      DI_ASSIGN_OR_RETURN(RenderedPrompt prompt, RenderV4Chat(chat.messages, chat.options));
      return tok->EncodePrompt(prompt);
    }
  }
  return Internal("unknown prompt kind");
}

void Session::HandleGenerate(ipc::GenerateRequest req) {
  server_.counters_.requests_total.fetch_add(1);
  auto reject = [&](std::string_view code, std::string message) {
    server_.counters_.requests_rejected.fetch_add(1);
    Send(ipc::ToJson(ipc::ErrorReply{req.id, {std::string(code), std::move(message)}}));
  };
  if (server_.draining_) return reject(ipc::kErrShuttingDown, "the daemon is shutting down");
  if (jobs_.count(req.id)) return reject(ipc::kErrDuplicateId, "request id already in flight");
  if (jobs_.size() >= server_.config_.max_requests_per_client) {
    return reject(ipc::kErrOverloaded, "max_requests_per_client reached");
  }
  int64_t& user_requests = server_.requests_by_uid_[peer_.uid];
  if (server_.config_.max_requests_per_user > 0 &&
      user_requests >= static_cast<int64_t>(server_.config_.max_requests_per_user)) {
    return reject(ipc::kErrOverloaded,
                  "max_requests_per_user reached for uid " + std::to_string(peer_.uid));
  }
  auto ids = PromptIds(req);
  if (!ids.ok()) return reject(ipc::WireErrorCode(ids.status()), ids.status().message());
  if (ids->empty()) return reject(ipc::kErrInvalidArgument, "prompt: empty after tokenization");
  for (int32_t id : *ids) {
    if (id < 0 || id >= server_.model_.vocab_size) {
      return reject(ipc::kErrInvalidArgument, "prompt: token id " + std::to_string(id) +
                                                  " is outside the model's vocabulary of " +
                                                  std::to_string(server_.model_.vocab_size) +
                                                  " (tokenizer and model disagree?)");
    }
  }
  auto job = std::make_shared<EngineJob>();
  job->id = server_.next_job_id_.fetch_add(1);
  job->client = client_id_;
  GenerationParams& p = job->params;
  p.prompt = std::move(ids).value();
  p.max_tokens = static_cast<int>(req.max_tokens.value_or(server_.config_.max_tokens_cap));
  p.logprobs = req.logprobs;
  p.sampling.temperature = static_cast<float>(req.temperature);
  p.sampling.top_p = static_cast<float>(req.top_p);
  p.sampling.top_k = req.top_k;
  p.sampling.min_p = static_cast<float>(req.min_p);
  p.sampling.repetition_penalty = static_cast<float>(req.repetition_penalty);
  p.sampling.frequency_penalty = static_cast<float>(req.frequency_penalty);
  p.sampling.presence_penalty = static_cast<float>(req.presence_penalty);
  for (const auto& [id, bias] : req.logit_bias) {
    p.sampling.logit_bias.emplace_back(id, static_cast<float>(bias));
  }
  // A client seed makes the request reproducible across runs and batches; without one each
  // request gets its own stream.
  p.sampling.seed = req.seed.value_or(job->id);
  job->stream = req.seed.has_value() ? 0 : job->id;
  p.stop_ids = req.stop_ids;
  p.stop_strings = req.stop;
  if (server_.config_.max_prompt_tokens > 0 &&
      p.prompt.size() > server_.config_.max_prompt_tokens) {
    return reject(ipc::kErrInvalidArgument, "prompt: " + std::to_string(p.prompt.size()) +
                                                " tokens exceed max_prompt_tokens");
  }
  // On the slot path a sequence holds at most slot_context positions: the prompt and its
  // max_tokens must fit (unset, max_tokens takes what is left, as a context length would).
  if (server_.config_.forward == "slots") {
    const size_t room = server_.config_.slot_context;
    if (p.prompt.size() >= room || (req.max_tokens && p.prompt.size() + *req.max_tokens > room)) {
      return reject(ipc::kErrInvalidArgument,
                    "prompt: " + std::to_string(p.prompt.size()) + " tokens" +
                        (req.max_tokens ? " plus max_tokens" : "") + " do not fit slot_context (" +
                        std::to_string(room) + ")");
    }
    p.max_tokens = std::min<int>(p.max_tokens, static_cast<int>(room - p.prompt.size()));
  }
  if (!req.response_format_json.empty()) {
    if (!server_.vocab_)
      return reject(ipc::kErrInvalidArgument, "response_format: needs a tokenizer");
    auto found = server_.grammars_.find(req.response_format_json);
    if (found != server_.grammars_.end()) {
      p.grammar = found->second;
    } else {
      std::vector<std::string> warnings;
      auto g = grammar::CompileResponseFormat(req.response_format_json, &warnings);
      if (!g.ok()) return reject(ipc::kErrInvalidArgument, g.status().message());
      for (const auto& w : warnings) spdlog::info("response_format not fully enforced: {}", w);
      // A bounded cache: cleared before the insert, so no reference into it outlives the clear.
      if (server_.grammars_.size() >= 256) server_.grammars_.clear();
      server_.grammars_.emplace(req.response_format_json, *g);
      p.grammar = *g;
    }
    if (p.grammar) p.vocabulary = server_.vocab_;
  }
  if (req.top_logprobs > 0) {  // refused rather than ignored: nothing would report them
    return reject(ipc::kErrUnsupported,
                  "top_logprobs: not reported; a token event carries the chosen token's "
                  "log-probability only (logprobs: true)");
  }
  if (!p.stop_strings.empty() && server_.tok_ == nullptr) {
    return reject(ipc::kErrInvalidArgument,
                  "stop: stop strings need a tokenizer; this model has none");
  }
  const uint64_t client_id = req.id;
  auto self = shared_from_this();
  // Set on the engine thread when this request's events overflow the client's backlog.
  auto too_slow = std::make_shared<bool>(false);
  job->on_token = [self, client_id, too_slow](const GeneratedToken& t) {
    ipc::TokenEvent e{};
    e.request_id = client_id;
    e.token = t.token;
    e.logprob = t.logprob;
    e.kind = static_cast<uint16_t>(ipc::EventKind::kToken);
    size_t off = 0;
    do {
      const size_t n = std::min(t.text.size() - off, sizeof(e.text));
      std::memcpy(e.text, t.text.data() + off, n);
      e.text_len = static_cast<uint32_t>(n);
      if (!self->Publish(e, false)) {
        *too_slow = true;
        return false;
      }
      off += n;
      e = ipc::TokenEvent{};
      e.request_id = client_id;
      e.kind = static_cast<uint16_t>(ipc::EventKind::kText);
    } while (off < t.text.size());
    return true;
  };
  job->on_done = [self, client_id, too_slow, &io = server_.io_](const Result<GenerationEnd>& r) {
    ipc::TokenEvent e{};
    e.request_id = client_id;
    if (r.ok()) {
      e.kind = static_cast<uint16_t>(ipc::EventKind::kDone);
      e.finish_reason =
          static_cast<uint16_t>(*r == GenerationEnd::kLength ? ipc::FinishReason::kLength
                                : *r == GenerationEnd::kStop ? ipc::FinishReason::kStop
                                : *too_slow                  ? ipc::FinishReason::kClientTooSlow
                                                             : ipc::FinishReason::kCancelled);
    } else {
      e.kind = static_cast<uint16_t>(ipc::EventKind::kError);
      e.finish_reason = static_cast<uint16_t>(ipc::FinishReason::kError);
      const std::string code(ipc::WireErrorCode(r.status()));
      e.text_len = static_cast<uint32_t>(std::min(code.size(), sizeof(e.text)));
      std::memcpy(e.text, code.data(), e.text_len);
    }
    self->Publish(e, true);
    self->live_requests_.fetch_sub(1);
    asio::post(io, [self, client_id] {
      self->jobs_.erase(client_id);
      self->server_.counters_.in_flight.fetch_sub(1);
      self->server_.requests_by_uid_[self->peer_.uid]--;
    });
  };
  live_requests_.fetch_add(1);
  if (!server_.engine_.Submit(job)) {
    live_requests_.fetch_sub(1);
    return reject(ipc::kErrOverloaded, "the engine queue is full");
  }
  jobs_.emplace(req.id, job);
  server_.counters_.in_flight.fetch_add(1);
  user_requests++;
  Send(ipc::ToJson(ipc::Accepted{req.id, static_cast<int64_t>(job->params.prompt.size())}));
}

bool Session::Publish(const ipc::TokenEvent& event, bool final_event) {
  if (!region_) return false;
  auto& ring = region_->events();
  // Every unfinished request of this client keeps one slot free for its final event.
  auto room = [&] {
    return ring.Size() + static_cast<uint64_t>(std::max<int64_t>(live_requests_.load(), 1)) <
           ring.capacity();
  };
  while (!backlog_.empty() && room() && ring.TryPush(backlog_.front())) backlog_.pop_front();
  bool ok = true;
  if (final_event) {
    // The request is over: what still waits in the backlog is dropped (the final event says
    // why), and the final event takes the reserved slot.
    backlog_.clear();
    ok = ring.TryPush(event);
  } else if (backlog_.empty() && room()) {
    ok = ring.TryPush(event);
  } else if (backlog_.size() < server_.config_.max_backlog_events) {
    backlog_.push_back(event);
  } else {
    ok = false;  // the client does not read: the request ends as client_too_slow
  }
  (void)to_client_->Signal();
  return ok && !ring.corrupted();
}

asio::awaitable<void> Session::SubmissionReader() {
  auto self = shared_from_this();
  auto& ring = region_->submissions();
  while (!closed_) {
    boost::system::error_code ec;
    co_await from_client_watch_->async_wait(asio::posix::stream_descriptor::wait_read,
                                            asio::redirect_error(asio::use_awaitable, ec));
    if (ec || closed_) co_return;
    (void)from_client_->Drain();
    ipc::Submission sub;
    while (ring.TryPop(&sub)) {
      if (sub.kind != static_cast<uint16_t>(ipc::SubmissionKind::kCancel)) {
        spdlog::warn("client pid {}: unknown submission kind {}; closing", peer_.pid, sub.kind);
        boost::system::error_code ignored;
        socket_.close(ignored);
        co_return;
      }
      if (auto it = jobs_.find(sub.request_id); it != jobs_.end()) it->second->cancel.store(true);
    }
    if (ring.corrupted()) {
      spdlog::warn("client pid {}: corrupted submission ring; closing", peer_.pid);
      boost::system::error_code ignored;
      socket_.close(ignored);
      co_return;
    }
  }
}

void Session::Send(std::string json) {
  if (closed_) return;
  outbox_.push_back(ipc::EncodeFrame(json));
  if (!writing_) {
    writing_ = true;
    asio::co_spawn(server_.io_, Writer(), asio::detached);
  }
}

asio::awaitable<void> Session::Writer() {
  auto self = shared_from_this();
  while (!outbox_.empty() && !closed_) {
    std::string frame = std::move(outbox_.front());
    outbox_.pop_front();
    boost::system::error_code ec;
    co_await asio::async_write(socket_, asio::buffer(frame),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
  }
  writing_ = false;
}

}  // namespace deepinfer::daemon
