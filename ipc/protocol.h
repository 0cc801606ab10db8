// Control-plane messages (docs/protocol.md): typed requests and replies and their JSON bodies.
// The server parses requests with ParseRequest and writes replies with ToJson; the client library
// does the reverse with ToJson and ParseReply. No engine types: prompts are text or plain ids.
//
//   Result<Request> req = ParseRequest(frame, limits);
//   if (!req.ok()) {
//     if (req.status().code() == ErrorCode::kDataLoss) return Close();  // not a JSON object
//     return Send(ToJson(MakeErrorReply(frame, req.status())));         // connection stays
//   }
//
// Request errors are InvalidArgument and start with the field name ("max_tokens: must be >= 1").
// Until the handshake is done the server treats any failure, and any request but Hello, as a
// protocol_error and closes (docs/protocol.md, "The handshake").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/common/status.h"

namespace deepinfer::ipc {

inline constexpr int kProtocolVersion = 1;

/// Wire error codes ("error": {"code": ...}).
inline constexpr std::string_view kErrInvalidArgument = "invalid_argument";
inline constexpr std::string_view kErrVersionMismatch = "version_mismatch";
inline constexpr std::string_view kErrProtocol = "protocol_error";  // then the server closes
inline constexpr std::string_view kErrDuplicateId = "duplicate_id";
inline constexpr std::string_view kErrNotFound = "not_found";
inline constexpr std::string_view kErrOverloaded = "overloaded";
inline constexpr std::string_view kErrShuttingDown = "shutting_down";
inline constexpr std::string_view kErrUnsupported = "unsupported";  // e.g. text without tokenizer
inline constexpr std::string_view kErrInternal = "internal";

/// Bounds on one request. Zero means "no bound" for vocab_size and max_tokens only.
struct RequestLimits {
  size_t max_prompt_bytes = size_t{2} << 20;             // "prompt", UTF-8 bytes
  size_t max_prompt_ids = size_t{1} << 20;               // "prompt_ids" entries
  size_t max_messages_bytes = size_t{2} << 20;           // "messages", minified JSON bytes
  size_t max_stop = 16;                                  // "stop" strings
  size_t max_stop_bytes = 256;                           // bytes of one stop string
  size_t max_stop_ids = 256;                             // "stop_ids" entries
  size_t max_response_format_bytes = size_t{256} << 10;  // minified JSON bytes
  size_t max_client_name_bytes = 256;                    // hello "client"
  size_t max_logit_bias = 1024;                          // "logit_bias" entries
  int64_t max_tokens = 0;                                // > 0: "max_tokens" may not exceed it
  int32_t vocab_size = 0;  // > 0: token ids must be in [0, vocab_size)
};

// ---------------------------------------------------------------------------------------------
// Requests (client -> server).

struct Hello {
  int64_t protocol = kProtocolVersion;  // any integer parses; the server compares it
  std::string client;                   // free-form name, may be empty

  bool operator==(const Hello&) const = default;
};

enum class PromptKind { kText, kMessages, kIds };

struct GenerateRequest {
  uint64_t id = 0;  // client-chosen, unique among the connection's live requests
  PromptKind prompt_kind = PromptKind::kText;
  std::string prompt;                 // kText: raw text, no chat template applied
  std::string messages_json;          // kMessages: the chat messages array, minified JSON text
  std::vector<int32_t> prompt_ids;    // kIds
  std::optional<int64_t> max_tokens;  // >= 1; unset = the server's cap
  double temperature = 1.0;           // [0, 2]; 0 = greedy
  double top_p = 1.0;                 // (0, 1]
  int32_t top_k = -1;                 // -1 = off, or >= 1 (a request's 0 is read as -1)
  double min_p = 0.0;                 // [0, 1]; 0 = off
  // Logit processors, applied before the draw (engine/sampling/sampler.h ApplyLogitProcessors;
  // a request with any draws on the host sampler).
  double repetition_penalty = 1.0;                     // (0, 2]; 1 = off
  double frequency_penalty = 0.0;                      // [-2, 2]
  double presence_penalty = 0.0;                       // [-2, 2]
  std::vector<std::pair<int32_t, double>> logit_bias;  // (token id, [-100, 100]), ids distinct
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;     // non-empty strings
  std::vector<int32_t> stop_ids;     // token ids that end generation
  std::string response_format_json;  // a JSON object as minified text; empty = none
  bool logprobs = false;
  int32_t top_logprobs = 0;  // [0, 20]; > 0 requires logprobs

  bool operator==(const GenerateRequest&) const = default;
};

struct CancelRequest {
  uint64_t id = 0;

  bool operator==(const CancelRequest&) const = default;
};
struct StatusRequest {
  bool operator==(const StatusRequest&) const = default;
};
struct HealthRequest {
  bool operator==(const HealthRequest&) const = default;
};

using Request = std::variant<Hello, GenerateRequest, CancelRequest, StatusRequest, HealthRequest>;

/// Parses and validates one request frame. kDataLoss: the body is not a JSON object (the server
/// closes the connection); kInvalidArgument: a bad request (the server replies with an error and
/// keeps the connection). Unknown fields are ignored; a null field counts as absent.
Result<Request> ParseRequest(std::string_view body, const RequestLimits& limits);

// ---------------------------------------------------------------------------------------------
// Replies (server -> client).

struct WireError {
  std::string code;  // one of the kErr* codes (clients must accept unknown codes)
  std::string message;

  bool operator==(const WireError&) const = default;
};

struct HelloReply {
  bool ok = true;
  int64_t protocol = kProtocolVersion;  // the server's protocol version, also when !ok
  std::string server;                   // ok: "deepinferd <version>"
  std::string model;                    // ok
  int32_t vocab_size = 0;               // ok
  WireError error;                      // !ok

  bool operator==(const HelloReply&) const = default;
};

/// Sent after an ok HelloReply; the ancillary data of its sendmsg carries the memfd and the two
/// eventfds (SCM_RIGHTS), which this JSON does not describe.
struct ShmOffer {
  uint64_t bytes = 0;
  uint32_t ring_slots = 0;

  bool operator==(const ShmOffer&) const = default;
};

struct Accepted {
  uint64_t id = 0;
  int64_t prompt_tokens = 0;

  bool operator==(const Accepted&) const = default;
};

struct ErrorReply {
  std::optional<uint64_t> id;  // the request's id when it could be read
  WireError error;

  bool operator==(const ErrorReply&) const = default;
};

struct HealthReply {
  bool ok = true;
  std::string reason;  // why not ok; empty when ok

  bool operator==(const HealthReply&) const = default;
};

/// The server's status: any JSON object (minified text, without the "op" member).
struct StatusReply {
  std::string fields_json = "{}";

  bool operator==(const StatusReply&) const = default;
};

using Reply = std::variant<HelloReply, ShmOffer, Accepted, ErrorReply, HealthReply, StatusReply>;

/// Parses one reply frame (the client side). kDataLoss when the body is not a JSON object,
/// kInvalidArgument for a missing or mistyped field or an unknown op.
Result<Reply> ParseReply(std::string_view body);

/// The wire code for a Status: invalid_argument, not_found, unsupported (kUnimplemented),
/// protocol_error (kDataLoss), internal (anything else).
std::string_view WireErrorCode(const Status& status);
/// The error reply for a request that failed: the code from `status`, the id from `body` when it
/// has a valid "id".
ErrorReply MakeErrorReply(std::string_view body, const Status& status);

// ---------------------------------------------------------------------------------------------
// Serializers (compact JSON objects with "op" first). Raw JSON members (messages_json,
// response_format_json, fields_json) are written as given: callers pass valid JSON.

std::string ToJson(const Hello& m);
std::string ToJson(const GenerateRequest& m);
std::string ToJson(const CancelRequest& m);
std::string ToJson(const StatusRequest& m);
std::string ToJson(const HealthRequest& m);
std::string ToJson(const Request& m);
std::string ToJson(const HelloReply& m);
std::string ToJson(const ShmOffer& m);
std::string ToJson(const Accepted& m);
std::string ToJson(const ErrorReply& m);
std::string ToJson(const HealthReply& m);
std::string ToJson(const StatusReply& m);
std::string ToJson(const Reply& m);

}  // namespace deepinfer::ipc
