// ToJson for every request and reply: compact JSON objects, "op" first, optional members left out
// when unset, doubles in their shortest round-trip form.
#include <charconv>

#include "engine/common/json_writer.h"
#include "ipc/protocol.h"

namespace deepinfer::ipc {
namespace {

// Builds one JSON object member by member.
class Obj {
 public:
  explicit Obj(std::string_view op) {
    s_ = "{\"op\":";
    AppendJsonString(&s_, op);
  }
  Obj& Str(std::string_view key, std::string_view v) {
    Key(key);
    AppendJsonString(&s_, v);
    return *this;
  }
  template <typename T>
  Obj& Int(std::string_view key, T v) {
    Key(key);
    s_ += std::to_string(v);
    return *this;
  }
  Obj& Dbl(std::string_view key, double v) {
    Key(key);
    AppendDouble(v);
    return *this;
  }
  // {"id": v, ...}: token ids as the object's keys (OpenAI's logit_bias).
  Obj& IdMap(std::string_view key, const std::vector<std::pair<int32_t, double>>& v) {
    Key(key);
    s_ += '{';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) s_ += ',';
      s_ += '"' + std::to_string(v[i].first) + "\":";
      AppendDouble(v[i].second);
    }
    s_ += '}';
    return *this;
  }
  Obj& Bool(std::string_view key, bool v) {
    Key(key);
    s_ += v ? "true" : "false";
    return *this;
  }
  Obj& Raw(std::string_view key, std::string_view json) {
    Key(key);
    s_ += json;
    return *this;
  }
  template <typename T>
  Obj& IntArray(std::string_view key, const std::vector<T>& v) {
    Key(key);
    s_ += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) s_ += ',';
      s_ += std::to_string(v[i]);
    }
    s_ += ']';
    return *this;
  }
  Obj& StrArray(std::string_view key, const std::vector<std::string>& v) {
    Key(key);
    s_ += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) s_ += ',';
      AppendJsonString(&s_, v[i]);
    }
    s_ += ']';
    return *this;
  }
  Obj& Error(const WireError& e) {
    Key("error");
    s_ += "{\"code\":";
    AppendJsonString(&s_, e.code);
    s_ += ",\"message\":";
    AppendJsonString(&s_, e.message);
    s_ += '}';
    return *this;
  }
  std::string Done() {
    s_ += '}';
    return std::move(s_);
  }

 private:
  // The shortest text that reads back as v.
  void AppendDouble(double v) {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof(buf), v);
    s_.append(buf, r.ptr);
  }
  void Key(std::string_view key) {
    s_ += ',';
    AppendJsonString(&s_, key);
    s_ += ':';
  }
  std::string s_;
};

}  // namespace

std::string ToJson(const Hello& m) {
  return Obj("hello").Int("protocol", m.protocol).Str("client", m.client).Done();
}

std::string ToJson(const GenerateRequest& m) {
  Obj o("generate");
  o.Int("id", m.id);
  switch (m.prompt_kind) {
    case PromptKind::kText:
      o.Str("prompt", m.prompt);
      break;
    case PromptKind::kMessages:
      o.Raw("messages", m.messages_json);
      break;
    case PromptKind::kIds:
      o.IntArray("prompt_ids", m.prompt_ids);
      break;
  }
  if (m.max_tokens) o.Int("max_tokens", *m.max_tokens);
  o.Dbl("temperature", m.temperature).Dbl("top_p", m.top_p).Int("top_k", m.top_k);
  o.Dbl("min_p", m.min_p);
  if (m.repetition_penalty != 1.0) o.Dbl("repetition_penalty", m.repetition_penalty);
  if (m.frequency_penalty != 0.0) o.Dbl("frequency_penalty", m.frequency_penalty);
  if (m.presence_penalty != 0.0) o.Dbl("presence_penalty", m.presence_penalty);
  if (!m.logit_bias.empty()) o.IdMap("logit_bias", m.logit_bias);
  if (m.seed) o.Int("seed", *m.seed);
  if (!m.stop.empty()) o.StrArray("stop", m.stop);
  if (!m.stop_ids.empty()) o.IntArray("stop_ids", m.stop_ids);
  if (!m.response_format_json.empty()) o.Raw("response_format", m.response_format_json);
  if (m.logprobs) o.Bool("logprobs", true);
  if (m.top_logprobs > 0) o.Int("top_logprobs", m.top_logprobs);
  return o.Done();
}

std::string ToJson(const CancelRequest& m) { return Obj("cancel").Int("id", m.id).Done(); }
std::string ToJson(const StatusRequest&) { return Obj("status").Done(); }
std::string ToJson(const HealthRequest&) { return Obj("health").Done(); }

std::string ToJson(const HelloReply& m) {
  Obj o("hello");
  o.Bool("ok", m.ok).Int("protocol", m.protocol);
  if (!m.ok) return o.Error(m.error).Done();
  return o.Str("server", m.server).Str("model", m.model).Int("vocab_size", m.vocab_size).Done();
}

std::string ToJson(const ShmOffer& m) {
  return Obj("shm").Int("bytes", m.bytes).Int("ring_slots", m.ring_slots).Done();
}

std::string ToJson(const Accepted& m) {
  return Obj("accepted").Int("id", m.id).Int("prompt_tokens", m.prompt_tokens).Done();
}

std::string ToJson(const ErrorReply& m) {
  Obj o("error");
  if (m.id) o.Int("id", *m.id);
  return o.Error(m.error).Done();
}

std::string ToJson(const HealthReply& m) {
  Obj o("health");
  o.Bool("ok", m.ok);
  if (!m.reason.empty()) o.Str("reason", m.reason);
  return o.Done();
}

std::string ToJson(const StatusReply& m) {
  // Splice the members of fields_json after "op": {"op":"status",<members>}.
  std::string_view f = m.fields_json;
  const size_t open = f.find('{'), close = f.rfind('}');
  std::string out = "{\"op\":\"status\"";
  if (open != std::string_view::npos && close != std::string_view::npos && open < close) {
    std::string_view inner = f.substr(open + 1, close - open - 1);
    if (inner.find_first_not_of(" \t\r\n") != std::string_view::npos) {
      out += ',';
      out += inner;
    }
  }
  out += '}';
  return out;
}

std::string ToJson(const Request& m) {
  return std::visit([](const auto& x) { return ToJson(x); }, m);
}
std::string ToJson(const Reply& m) {
  return std::visit([](const auto& x) { return ToJson(x); }, m);
}

}  // namespace deepinfer::ipc
