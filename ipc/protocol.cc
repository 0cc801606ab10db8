// ParseRequest (the server side) and ParseReply (the client side). Serializers are in
// protocol_json.cc; the typed member reads in protocol_fields.*.
#include "ipc/protocol.h"

#include <algorithm>

#include "engine/common/json_writer.h"
#include "engine/common/token_id_key.h"
#include "ipc/protocol_fields.h"

namespace deepinfer::ipc {
namespace {

using namespace protocol_internal;  // NOLINT: this file's vocabulary

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr uint64_t kUint64Max = std::numeric_limits<uint64_t>::max();

Result<std::string> ReadOp(const Fields& f) {
  DI_RETURN_IF_ERROR(f.Required("op"));
  std::string op;
  DI_RETURN_IF_ERROR(f.String("op", 64, &op));
  return op;
}

Status UnknownOp(const std::string& op) {
  return InvalidArgument("op: unknown operation " + JsonString(op));
}

Status ReadTokenIds(array a, std::string_view name, int32_t vocab_size, std::vector<int32_t>* out) {
  const int32_t hi = vocab_size > 0 ? vocab_size - 1 : kInt32Max;
  out->reserve(a.size());
  size_t i = 0;
  for (element e : a) {
    int32_t id;
    DI_RETURN_IF_ERROR(ToInt<int32_t>(e, Index(name, i++), 0, hi, &id));
    out->push_back(id);
  }
  return Status::Ok();
}

Status ParsePrompt(const Fields& f, const RequestLimits& lim, GenerateRequest* r) {
  const bool text = f.Get("prompt").has_value(), msgs = f.Get("messages").has_value(),
             ids = f.Get("prompt_ids").has_value();
  if (text + msgs + ids != 1) {
    return InvalidArgument(text + msgs + ids == 0
                               ? "prompt: one of prompt, messages or prompt_ids is required"
                               : "prompt: give exactly one of prompt, messages or prompt_ids");
  }
  if (text) {
    r->prompt_kind = PromptKind::kText;
    DI_RETURN_IF_ERROR(f.String("prompt", lim.max_prompt_bytes, &r->prompt));
    if (r->prompt.empty()) return InvalidArgument("prompt: must not be empty");
  } else if (msgs) {
    r->prompt_kind = PromptKind::kMessages;
    DI_RETURN_IF_ERROR(
        f.Raw("messages", element_type::ARRAY, lim.max_messages_bytes, &r->messages_json));
    array a = f.Get("messages")->get_array().value_unsafe();
    if (a.size() == 0) return InvalidArgument("messages: must not be empty");
    size_t i = 0;
    for (element e : a) {
      if (!e.is_object()) return Expected(Index("messages", i), "an object", e);
      ++i;
    }
  } else {
    r->prompt_kind = PromptKind::kIds;
    std::optional<array> a;
    DI_RETURN_IF_ERROR(f.Array("prompt_ids", lim.max_prompt_ids, &a));
    if (a->size() == 0) return InvalidArgument("prompt_ids: must not be empty");
    DI_RETURN_IF_ERROR(ReadTokenIds(*a, "prompt_ids", lim.vocab_size, &r->prompt_ids));
  }
  return Status::Ok();
}

Status ParseStops(const Fields& f, const RequestLimits& lim, GenerateRequest* r) {
  std::optional<array> a;
  DI_RETURN_IF_ERROR(f.Array("stop", lim.max_stop, &a));
  if (a) {
    size_t i = 0;
    for (element e : *a) {
      const std::string path = Index("stop", i++);
      std::string_view s;
      if (e.get_string().get(s) != simdjson::SUCCESS) return Expected(path, "a string", e);
      if (s.empty()) return InvalidArgument(path + ": must not be empty");
      DI_RETURN_IF_ERROR(CheckString(path, s, lim.max_stop_bytes));
      r->stop.emplace_back(s);
    }
  }
  a.reset();
  DI_RETURN_IF_ERROR(f.Array("stop_ids", lim.max_stop_ids, &a));
  if (a) DI_RETURN_IF_ERROR(ReadTokenIds(*a, "stop_ids", lim.vocab_size, &r->stop_ids));
  return Status::Ok();
}

// The logit processors: penalties, and logit_bias as an object of decimal token ids (OpenAI's
// form) to biases.
Status ParseProcessors(const Fields& f, const RequestLimits& lim, GenerateRequest* r) {
  DI_RETURN_IF_ERROR(f.Number("repetition_penalty", 0, 2, true, &r->repetition_penalty));
  DI_RETURN_IF_ERROR(f.Number("frequency_penalty", -2, 2, false, &r->frequency_penalty));
  DI_RETURN_IF_ERROR(f.Number("presence_penalty", -2, 2, false, &r->presence_penalty));
  std::optional<Fields> bias;
  DI_RETURN_IF_ERROR(f.Object("logit_bias", &bias));
  if (!bias) return Status::Ok();
  if (bias->obj().size() > lim.max_logit_bias) {
    return InvalidArgument("logit_bias: at most " + std::to_string(lim.max_logit_bias) +
                           " entries, got " + std::to_string(bias->obj().size()));
  }
  const int64_t hi = lim.vocab_size > 0 ? lim.vocab_size - 1 : kInt32Max;
  for (auto [key, value] : bias->obj()) {
    const std::string path = bias->Path(key);
    const std::optional<int64_t> id = TokenIdKey(key);
    if (!id) return InvalidArgument(path + ": key must be a token id (a decimal integer string)");
    if (*id > hi) {
      return InvalidArgument(path + ": token id must be in [0, " + std::to_string(hi) + "]");
    }
    double v;
    if (value.get_double().get(v) != simdjson::SUCCESS) return Expected(path, "a number", value);
    if (!(v >= -100 && v <= 100)) {
      return InvalidArgument(path + ": must be in [-100, 100], got " + Num(v));
    }
    r->logit_bias.emplace_back(static_cast<int32_t>(*id), v);
  }
  // Each id once ("5" and "05" are one token): sorted, a repeat sits beside its first.
  std::vector<int32_t> ids;
  ids.reserve(r->logit_bias.size());
  for (const auto& [id, unused] : r->logit_bias) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  const auto twice = std::adjacent_find(ids.begin(), ids.end());
  if (twice != ids.end()) {
    return InvalidArgument(bias->Path(std::to_string(*twice)) + ": token id given twice");
  }
  return Status::Ok();
}

Result<GenerateRequest> ParseGenerate(const Fields& f, const RequestLimits& lim) {
  GenerateRequest r;
  DI_RETURN_IF_ERROR(f.RequiredInt<uint64_t>("id", 0, kUint64Max, &r.id));
  DI_RETURN_IF_ERROR(ParsePrompt(f, lim, &r));
  const int64_t cap = lim.max_tokens > 0 ? lim.max_tokens : kInt64Max;
  DI_RETURN_IF_ERROR(f.Int<int64_t>("max_tokens", 1, cap, &r.max_tokens));
  DI_RETURN_IF_ERROR(f.Number("temperature", 0, 2, false, &r.temperature));
  DI_RETURN_IF_ERROR(f.Number("top_p", 0, 1, true, &r.top_p));
  std::optional<int32_t> top_k;
  DI_RETURN_IF_ERROR(f.Int<int32_t>("top_k", -1, kInt32Max, &top_k));
  if (top_k) r.top_k = *top_k == 0 ? -1 : *top_k;
  DI_RETURN_IF_ERROR(f.Number("min_p", 0, 1, false, &r.min_p));
  DI_RETURN_IF_ERROR(ParseProcessors(f, lim, &r));
  DI_RETURN_IF_ERROR(f.Int<uint64_t>("seed", 0, kUint64Max, &r.seed));
  DI_RETURN_IF_ERROR(ParseStops(f, lim, &r));
  DI_RETURN_IF_ERROR(f.Raw("response_format", element_type::OBJECT, lim.max_response_format_bytes,
                           &r.response_format_json));
  DI_RETURN_IF_ERROR(f.Bool("logprobs", &r.logprobs));
  std::optional<int32_t> top_logprobs;
  DI_RETURN_IF_ERROR(f.Int<int32_t>("top_logprobs", 0, 20, &top_logprobs));
  if (top_logprobs) r.top_logprobs = *top_logprobs;
  if (r.top_logprobs > 0 && !r.logprobs) {
    return InvalidArgument("top_logprobs: requires logprobs to be true");
  }
  return r;
}

Status ParseWireError(const Fields& f, WireError* out) {
  std::optional<Fields> e;
  DI_RETURN_IF_ERROR(f.Required("error"));
  DI_RETURN_IF_ERROR(f.Object("error", &e));
  DI_RETURN_IF_ERROR(e->Required("code"));
  DI_RETURN_IF_ERROR(e->String("code", 256, &out->code));
  return e->String("message", kUint64Max, &out->message);
}

Result<HelloReply> ParseHelloReply(const Fields& f) {
  HelloReply r;
  DI_RETURN_IF_ERROR(f.Required("ok"));
  DI_RETURN_IF_ERROR(f.Bool("ok", &r.ok));
  DI_RETURN_IF_ERROR(f.RequiredInt<int64_t>("protocol", -kInt64Max - 1, kInt64Max, &r.protocol));
  if (!r.ok) {
    DI_RETURN_IF_ERROR(ParseWireError(f, &r.error));
    return r;
  }
  DI_RETURN_IF_ERROR(f.String("server", kUint64Max, &r.server));
  DI_RETURN_IF_ERROR(f.String("model", kUint64Max, &r.model));
  DI_RETURN_IF_ERROR(f.RequiredInt<int32_t>("vocab_size", 0, kInt32Max, &r.vocab_size));
  return r;
}

// The object's members except "op", as a minified JSON object.
StatusReply ParseStatusReply(const Fields& f) {
  StatusReply r;
  r.fields_json = "{";
  for (auto [key, value] : f.obj()) {
    if (key == "op") continue;
    if (r.fields_json.size() > 1) r.fields_json += ',';
    AppendJsonString(&r.fields_json, key);
    r.fields_json += ':';
    r.fields_json += simdjson::minify(value);
  }
  r.fields_json += '}';
  return r;
}

Result<Reply> ParseReplyFields(const Fields& f, const std::string& op) {
  if (op == "hello") {
    DI_ASSIGN_OR_RETURN(HelloReply r, ParseHelloReply(f));
    return Reply(std::move(r));
  }
  if (op == "shm") {
    ShmOffer r;
    DI_RETURN_IF_ERROR(f.RequiredInt<uint64_t>("bytes", 0, kUint64Max, &r.bytes));
    DI_RETURN_IF_ERROR(f.RequiredInt<uint32_t>("ring_slots", 0, UINT32_MAX, &r.ring_slots));
    return Reply(r);
  }
  if (op == "accepted") {
    Accepted r;
    DI_RETURN_IF_ERROR(f.RequiredInt<uint64_t>("id", 0, kUint64Max, &r.id));
    DI_RETURN_IF_ERROR(f.RequiredInt<int64_t>("prompt_tokens", 0, kInt64Max, &r.prompt_tokens));
    return Reply(r);
  }
  if (op == "error") {
    ErrorReply r;
    DI_RETURN_IF_ERROR(f.Int<uint64_t>("id", 0, kUint64Max, &r.id));
    DI_RETURN_IF_ERROR(ParseWireError(f, &r.error));
    return Reply(std::move(r));
  }
  if (op == "health") {
    HealthReply r;
    DI_RETURN_IF_ERROR(f.Required("ok"));
    DI_RETURN_IF_ERROR(f.Bool("ok", &r.ok));
    DI_RETURN_IF_ERROR(f.String("reason", kUint64Max, &r.reason));
    return Reply(std::move(r));
  }
  if (op == "status") return Reply(ParseStatusReply(f));
  return UnknownOp(op);
}

}  // namespace

Result<Request> ParseRequest(std::string_view body, const RequestLimits& limits) {
  simdjson::dom::parser parser;
  DI_ASSIGN_OR_RETURN(object obj, ParseObject(parser, body));
  const Fields f(obj, "");
  DI_ASSIGN_OR_RETURN(std::string op, ReadOp(f));
  if (op == "generate") {
    DI_ASSIGN_OR_RETURN(GenerateRequest r, ParseGenerate(f, limits));
    return Request(std::move(r));
  }
  if (op == "cancel") {
    CancelRequest r;
    DI_RETURN_IF_ERROR(f.RequiredInt<uint64_t>("id", 0, kUint64Max, &r.id));
    return Request(r);
  }
  if (op == "status") return Request(StatusRequest{});
  if (op == "health") return Request(HealthRequest{});
  if (op == "hello") {
    Hello r;
    DI_RETURN_IF_ERROR(f.RequiredInt<int64_t>("protocol", -kInt64Max - 1, kInt64Max, &r.protocol));
    DI_RETURN_IF_ERROR(f.String("client", limits.max_client_name_bytes, &r.client));
    return Request(std::move(r));
  }
  return UnknownOp(op);
}

Result<Reply> ParseReply(std::string_view body) {
  simdjson::dom::parser parser;
  DI_ASSIGN_OR_RETURN(object obj, ParseObject(parser, body));
  const Fields f(obj, "");
  DI_ASSIGN_OR_RETURN(std::string op, ReadOp(f));
  return ParseReplyFields(f, op);
}

std::string_view WireErrorCode(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kInvalidArgument:
      return kErrInvalidArgument;
    case ErrorCode::kNotFound:
      return kErrNotFound;
    case ErrorCode::kUnimplemented:
      return kErrUnsupported;
    case ErrorCode::kDataLoss:
      return kErrProtocol;
    default:
      return kErrInternal;
  }
}

ErrorReply MakeErrorReply(std::string_view body, const Status& status) {
  ErrorReply r;
  r.error.code = std::string(WireErrorCode(status));
  r.error.message = status.message();
  simdjson::dom::parser parser;
  Result<object> obj = ParseObject(parser, body);
  if (obj.ok()) {
    std::optional<uint64_t> id;
    if (Fields(*obj, "").Int<uint64_t>("id", 0, kUint64Max, &id).ok()) r.id = id;
  }
  return r;
}

}  // namespace deepinfer::ipc
