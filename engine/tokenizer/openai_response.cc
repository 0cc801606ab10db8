// The output side of the OpenAI conversion: `chat.completion`, `chat.completion.chunk` and error
// objects, written with a small JSON writer; numbers are written so that they read back exactly.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/common/json_writer.h"
#include "engine/tokenizer/openai.h"

namespace deepinfer {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// A JSON text under construction; tracks where commas go.
class Json {
 public:
  void Open(char c) {
    Comma();
    out_ += c;
    first_ = true;
  }
  void Close(char c) {
    out_ += c;
    first_ = false;
  }
  void Key(std::string_view key) {
    Comma();
    AppendJsonString(&out_, key);
    out_ += ':';
    first_ = true;
  }
  void Str(std::string_view s) {
    Comma();
    AppendJsonString(&out_, s);
  }
  void Int(int64_t v) {
    Comma();
    AppendJsonNumber(&out_, v);
  }
  void Float(float v) {
    Comma();
    AppendJsonNumber(&out_, v);
  }
  void Null() {
    Comma();
    out_ += "null";
  }
  void Field(std::string_view key, std::string_view s) {
    Key(key);
    Str(s);
  }
  void Field(std::string_view key, int64_t v) {
    Key(key);
    Int(v);
  }
  std::string Take() { return std::move(out_); }

 private:
  void Comma() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  std::string out_;
  bool first_ = true;
};

void WriteUsage(Json& j, const Usage& u) {
  j.Key("usage");
  j.Open('{');
  j.Field("prompt_tokens", u.prompt_tokens);
  j.Field("completion_tokens", u.completion_tokens);
  j.Field("total_tokens", u.prompt_tokens + u.completion_tokens);
  if (u.cached_tokens) {
    j.Key("prompt_tokens_details");
    j.Open('{');
    j.Field("cached_tokens", *u.cached_tokens);
    j.Close('}');
  }
  if (u.reasoning_tokens) {
    j.Key("completion_tokens_details");
    j.Open('{');
    j.Field("reasoning_tokens", *u.reasoning_tokens);
    j.Close('}');
  }
  j.Close('}');
}

// token, logprob and bytes: the members shared by a token and its alternatives.
void WriteTokenFields(Json& j, const std::string& token, float logprob) {
  j.Field("token", token);
  j.Key("logprob");
  j.Float(std::isfinite(logprob) ? logprob : -9999.0f);
  j.Key("bytes");
  j.Open('[');
  for (unsigned char b : token) j.Int(b);
  j.Close(']');
}

void WriteLogprobs(Json& j, const std::optional<std::vector<TokenLogprob>>& logprobs) {
  j.Key("logprobs");
  if (!logprobs) {
    j.Null();
    return;
  }
  j.Open('{');
  j.Key("content");
  j.Open('[');
  for (const TokenLogprob& t : *logprobs) {
    j.Open('{');
    WriteTokenFields(j, t.token, t.logprob);
    j.Key("top_logprobs");
    j.Open('[');
    for (const TopLogprob& top : t.top_logprobs) {
      j.Open('{');
      WriteTokenFields(j, top.token, top.logprob);
      j.Close('}');
    }
    j.Close(']');
    j.Close('}');
  }
  j.Close(']');
  j.Close('}');
}

void WriteFinishReason(Json& j, FinishReason reason) {
  j.Key("finish_reason");
  if (const char* name = FinishReasonName(reason)) {
    j.Str(name);
  } else {
    j.Null();
  }
}

// id, object, created, model and system_fingerprint: the head of both object kinds.
void WriteHead(Json& j, const std::string& id, const char* object, int64_t created,
               const std::string& model, const std::string& fingerprint) {
  j.Field("id", id);
  j.Field("object", object);
  j.Field("created", created);
  j.Field("model", model);
  if (!fingerprint.empty()) j.Field("system_fingerprint", fingerprint);
}

// A call's id, type and function name; `arguments` follows in the function object.
void WriteToolCallHead(Json& j, const std::string& id, const std::string& name) {
  j.Field("id", id);
  j.Field("type", "function");
  j.Key("function");
  j.Open('{');
  j.Field("name", name);
}

// std::to_chars without a precision writes the shortest text that reads back as exactly `v`.
// Where that is a long run of digits (3.39e19 as "33935263963869904896"), the scientific form is
// written instead: integers past 64 bits are refused by some parsers (simdjson among them).
template <typename T>
void AppendShortest(std::string* out, T v) {
  if (!std::isfinite(v)) {
    out->append("null");
    return;
  }
  char buf[48];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string_view text(buf, r.ptr - buf);
  if (text.size() > 16 && text.find_first_of(".e") == std::string_view::npos) {
    r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  }
  out->append(buf, r.ptr);
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace

void AppendJsonNumber(std::string* out, double v) { AppendShortest(out, v); }

void AppendJsonNumber(std::string* out, float v) { AppendShortest(out, v); }

void AppendJsonNumber(std::string* out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return nullptr;
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kToolCalls:
      return "tool_calls";
    case FinishReason::kContentFilter:
      return "content_filter";
    case FinishReason::kError:
      return "error";
    case FinishReason::kAbort:
      return "abort";
  }
  return nullptr;
}

std::string MakeToolCallId(std::string_view request_id, uint64_t counter) {
  std::string id = "call_";
  const uint64_t h = Fnv1a(request_id);
  for (int shift = 60; shift >= 0; shift -= 4) id.push_back(kHex[(h >> shift) & 15]);
  for (int shift = 28; shift >= 0; shift -= 4) id.push_back(kHex[(counter >> shift) & 15]);
  return id;
}

std::string ChatCompletionResponseJson(const ChatCompletion& c) {
  Json j;
  j.Open('{');
  WriteHead(j, c.id, "chat.completion", c.created, c.model, c.system_fingerprint);
  j.Key("choices");
  j.Open('[');
  j.Open('{');
  j.Field("index", int64_t{0});
  j.Key("message");
  j.Open('{');
  j.Field("role", "assistant");
  j.Key("content");
  if (c.content.empty() && !c.tool_calls.empty()) {
    j.Null();
  } else {
    j.Str(c.content);
  }
  if (!c.reasoning_content.empty()) j.Field("reasoning_content", c.reasoning_content);
  if (!c.tool_calls.empty()) {
    j.Key("tool_calls");
    j.Open('[');
    for (size_t i = 0; i < c.tool_calls.size(); ++i) {
      const ToolCall& call = c.tool_calls[i];
      j.Open('{');
      WriteToolCallHead(j, call.id.empty() ? MakeToolCallId(c.id, i) : call.id, call.name);
      j.Field("arguments", call.arguments_json);
      j.Close('}');
      j.Close('}');
    }
    j.Close(']');
  }
  j.Close('}');
  WriteLogprobs(j, c.logprobs);
  WriteFinishReason(j, c.finish_reason);
  j.Close('}');
  j.Close(']');
  WriteUsage(j, c.usage);
  j.Close('}');
  return j.Take();
}

std::string ChatCompletionChunkJson(const CompletionChunk& c) {
  Json j;
  j.Open('{');
  WriteHead(j, c.id, "chat.completion.chunk", c.created, c.model, c.system_fingerprint);
  j.Key("choices");
  j.Open('[');
  if (!c.usage_only) {
    j.Open('{');
    j.Field("index", int64_t{0});
    j.Key("delta");
    j.Open('{');
    if (c.role) j.Field("role", "assistant");
    if (c.role || !c.content.empty()) j.Field("content", c.content);
    if (!c.reasoning_content.empty()) j.Field("reasoning_content", c.reasoning_content);
    if (!c.tool_calls.empty()) {
      j.Key("tool_calls");
      j.Open('[');
      for (const ToolCallDelta& d : c.tool_calls) {
        j.Open('{');
        j.Field("index", int64_t{d.index});
        if (!d.name.empty()) {
          WriteToolCallHead(j, d.id.empty() ? MakeToolCallId(c.id, d.index) : d.id, d.name);
        } else {
          j.Key("function");
          j.Open('{');
        }
        j.Field("arguments", d.arguments);
        j.Close('}');
        j.Close('}');
      }
      j.Close(']');
    }
    j.Close('}');
    WriteLogprobs(j, c.logprobs);
    WriteFinishReason(j, c.finish_reason);
    j.Close('}');
  }
  j.Close(']');
  if (c.usage) WriteUsage(j, *c.usage);
  j.Close('}');
  return j.Take();
}

std::string ErrorResponseJson(const Status& status) {
  const std::string& msg = status.message();
  // The message starts with the field's path ("messages[2].content: ...") when it names one.
  std::string_view param;
  if (size_t colon = msg.find(": "); colon != std::string::npos && colon > 0) {
    std::string_view head(msg.data(), colon);
    bool is_path = head != "body" && head.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_.[]") == std::string_view::npos;
    if (is_path) param = head;
  }
  const char* type = "server_error";
  if (status.code() == ErrorCode::kInvalidArgument || status.code() == ErrorCode::kUnimplemented) {
    type = "invalid_request_error";
  } else if (status.code() == ErrorCode::kNotFound) {
    type = "not_found_error";
  }
  Json j;
  j.Open('{');
  j.Key("error");
  j.Open('{');
  j.Field("message", msg);
  j.Field("type", type);
  j.Key("param");
  if (param.empty()) {
    j.Null();
  } else {
    j.Str(param);
  }
  j.Field("code", ErrorCodeName(status.code()));
  j.Close('}');
  j.Close('}');
  return j.Take();
}

std::string SseEvent(std::string_view json) {
  std::string out;
  out.reserve(json.size() + 8);
  out.append("data: ").append(json).append("\n\n");
  return out;
}

}  // namespace deepinfer
