// ParseChatCompletionRequest: the top level of a chat-completions body, sampling, thinking,
// tool_choice and response_format. Messages and tools are in openai_messages.cc.
#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "engine/common/token_id_key.h"
#include "engine/tokenizer/openai.h"
#include "engine/tokenizer/openai_internal.h"

namespace deepinfer::openai_internal {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// A number in [lo, hi] (or (lo, hi]) into a float member, when the key is present.
Status ReadFloat(const Fields& f, std::string_view key, double lo, double hi, bool lo_open,
                 float* out) {
  std::optional<double> v;
  DI_RETURN_IF_ERROR(f.Number(key, &v));
  if (!v) return Status::Ok();
  DI_RETURN_IF_ERROR(InRange(f.Path(key), *v, lo, hi, lo_open));
  *out = static_cast<float>(*v);
  return Status::Ok();
}

Status ReadInt(const Fields& f, std::string_view key, int64_t lo, int64_t hi,
               std::optional<int64_t>* out) {
  DI_RETURN_IF_ERROR(f.Integer(key, out));
  if (!*out || (**out >= lo && **out <= hi)) return Status::Ok();
  std::string range = hi == kInt64Max
                          ? "must be at least " + std::to_string(lo)
                          : "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return InvalidArgument(f.Path(key) + ": " + range + ", got " + std::to_string(**out));
}

Status CheckTokenId(const std::string& path, int64_t id, const ParseLimits& limits) {
  int64_t end = limits.vocab_size > 0 ? limits.vocab_size : std::numeric_limits<int32_t>::max();
  if (id >= 0 && id < end) return Status::Ok();
  return InvalidArgument(path + ": token id " + std::to_string(id) + " is outside [0, " +
                         std::to_string(end) + ")");
}

Status ParseStop(const Fields& top, const ParseLimits& limits, SamplingParams* sp) {
  auto e = top.Get("stop");
  if (!e) return Status::Ok();
  std::string_view s;
  if (e->get_string().get(s) == simdjson::SUCCESS) {
    if (s.empty()) return InvalidArgument("stop: must not be empty");
    sp->stop.emplace_back(s);
    return Status::Ok();
  }
  array a;
  if (e->get_array().get(a) != simdjson::SUCCESS) {
    return Expected("stop", "a string or an array of strings", *e);
  }
  if (a.size() > limits.max_stop) {
    return InvalidArgument("stop: at most " + std::to_string(limits.max_stop) +
                           " stop strings, got " + std::to_string(a.size()));
  }
  size_t i = 0;
  for (element x : a) {
    std::string path = Index("stop", i++);
    if (x.get_string().get(s) != simdjson::SUCCESS) return Expected(path, "a string", x);
    if (s.empty()) return InvalidArgument(path + ": must not be empty");
    sp->stop.emplace_back(s);
  }
  return Status::Ok();
}

Status ParseTokenLists(const Fields& top, const ParseLimits& limits, SamplingParams* sp) {
  std::optional<Fields> bias;
  DI_RETURN_IF_ERROR(top.Object("logit_bias", &bias));
  if (bias) {
    if (bias->obj().size() > limits.max_logit_bias) {
      return InvalidArgument("logit_bias: at most " + std::to_string(limits.max_logit_bias) +
                             " entries, got " + std::to_string(bias->obj().size()));
    }
    for (auto [key, value] : bias->obj()) {
      std::string path = bias->Path(key);
      const std::optional<int64_t> id = TokenIdKey(key);
      if (!id) return InvalidArgument(path + ": key must be a token id (a decimal integer string)");
      DI_RETURN_IF_ERROR(CheckTokenId(path, *id, limits));
      double v;
      if (value.get_double().get(v) != simdjson::SUCCESS) return Expected(path, "a number", value);
      DI_RETURN_IF_ERROR(InRange(path, v, -100, 100));
      sp->logit_bias[static_cast<int>(*id)] = static_cast<float>(v);
    }
  }
  std::optional<array> ids;
  DI_RETURN_IF_ERROR(top.Array("stop_token_ids", &ids));
  if (ids) {
    if (ids->size() > limits.max_stop_token_ids) {
      return InvalidArgument("stop_token_ids: at most " +
                             std::to_string(limits.max_stop_token_ids) + " ids, got " +
                             std::to_string(ids->size()));
    }
    size_t i = 0;
    for (element x : *ids) {
      std::string path = Index("stop_token_ids", i++);
      int64_t id;
      DI_RETURN_IF_ERROR(ToInteger(x, path, &id));
      DI_RETURN_IF_ERROR(CheckTokenId(path, id, limits));
      sp->stop_token_ids.push_back(static_cast<int>(id));
    }
  }
  return Status::Ok();
}

Status ParseSampling(const Fields& top, const ParseLimits& limits, SamplingParams* sp) {
  DI_RETURN_IF_ERROR(ReadFloat(top, "temperature", 0, 2, false, &sp->temperature));
  DI_RETURN_IF_ERROR(ReadFloat(top, "top_p", 0, 1, true, &sp->top_p));
  DI_RETURN_IF_ERROR(ReadFloat(top, "min_p", 0, 1, false, &sp->min_p));
  DI_RETURN_IF_ERROR(ReadFloat(top, "repetition_penalty", 0, 2, true, &sp->repetition_penalty));
  DI_RETURN_IF_ERROR(ReadFloat(top, "frequency_penalty", -2, 2, false, &sp->frequency_penalty));
  DI_RETURN_IF_ERROR(ReadFloat(top, "presence_penalty", -2, 2, false, &sp->presence_penalty));
  std::optional<int64_t> top_k, top_logprobs, n, min_tokens;
  DI_RETURN_IF_ERROR(ReadInt(top, "top_k", -1, std::numeric_limits<int32_t>::max(), &top_k));
  if (top_k) sp->top_k = *top_k == 0 ? -1 : static_cast<int>(*top_k);
  DI_RETURN_IF_ERROR(top.Integer("seed", &sp->seed));
  DI_RETURN_IF_ERROR(top.Bool("logprobs", &sp->logprobs));
  DI_RETURN_IF_ERROR(ReadInt(top, "top_logprobs", 0, 20, &top_logprobs));
  if (top_logprobs) sp->top_logprobs = static_cast<int>(*top_logprobs);
  if (sp->top_logprobs > 0 && !sp->logprobs) {
    return InvalidArgument("top_logprobs: requires logprobs to be true");
  }
  DI_RETURN_IF_ERROR(top.Integer("n", &n));
  if (n && *n != 1) return InvalidArgument("n: only n = 1 is supported, got " + std::to_string(*n));
  const int64_t cap = limits.max_tokens > 0 ? limits.max_tokens : kInt64Max;
  DI_RETURN_IF_ERROR(ReadInt(top, "max_tokens", 1, cap, &sp->max_tokens));
  std::optional<int64_t> mct;  // the newer name; it wins when both are given (as vLLM)
  DI_RETURN_IF_ERROR(ReadInt(top, "max_completion_tokens", 1, cap, &mct));
  if (mct) sp->max_tokens = mct;
  DI_RETURN_IF_ERROR(ReadInt(top, "min_tokens", 0, kInt64Max, &min_tokens));
  if (min_tokens) sp->min_tokens = *min_tokens;
  if (sp->max_tokens && sp->min_tokens > *sp->max_tokens) {
    return InvalidArgument("min_tokens: must not exceed max_tokens (" +
                           std::to_string(*sp->max_tokens) + "), got " +
                           std::to_string(sp->min_tokens));
  }
  DI_RETURN_IF_ERROR(top.Bool("ignore_eos", &sp->ignore_eos));
  DI_RETURN_IF_ERROR(ParseStop(top, limits, sp));
  return ParseTokenLists(top, limits, sp);
}

// The thinking switch can come from several fields; they must agree.
struct Switch {
  std::optional<bool> value;
  std::string source;

  Status Set(bool v, const std::string& path) {
    if (value && *value != v) return InvalidArgument(path + ": conflicts with " + source);
    value = v;
    source = path;
    return Status::Ok();
  }
};

// `thinking`: true/false or {"type": "enabled" | "disabled"} (DeepSeek / Anthropic style).
Status ParseThinkingField(element e, Switch* thinking) {
  bool b;
  if (e.get_bool().get(b) == simdjson::SUCCESS) return thinking->Set(b, "thinking");
  object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) {
    return Expected("thinking", "a boolean or an object", e);
  }
  Fields f(o, "thinking");
  std::string type;
  DI_RETURN_IF_ERROR(f.RequiredString("type", &type));
  if (type != "enabled" && type != "disabled") {
    return InvalidArgument("thinking.type: must be 'enabled' or 'disabled', got " + Quoted(type));
  }
  return thinking->Set(type == "enabled", "thinking.type");
}

Status ParseThinking(const Fields& top, ChatOptions* options) {
  Switch thinking;
  std::string effort;
  std::string effort_source;  // the field it came from; "" when none was given
  auto add_effort = [&](const Fields& f, std::string_view key) -> Status {
    std::string e;
    if (!f.Get(key)) return Status::Ok();
    DI_RETURN_IF_ERROR(f.String(key, &e));
    if (!effort_source.empty() && e != effort) {
      return InvalidArgument(f.Path(key) + ": conflicts with " + effort_source);
    }
    effort = e;
    effort_source = f.Path(key);
    return Status::Ok();
  };
  if (auto e = top.Get("thinking")) DI_RETURN_IF_ERROR(ParseThinkingField(*e, &thinking));
  if (auto e = top.Get("reasoning")) {  // OpenRouter: true/false or {enabled, effort}
    bool b;
    object o;
    if (e->get_bool().get(b) == simdjson::SUCCESS) {
      DI_RETURN_IF_ERROR(thinking.Set(b, "reasoning"));
    } else if (e->get_object().get(o) == simdjson::SUCCESS) {
      Fields r(o, "reasoning");
      if (r.Get("enabled")) {
        DI_RETURN_IF_ERROR(r.Bool("enabled", &b));
        DI_RETURN_IF_ERROR(thinking.Set(b, "reasoning.enabled"));
      } else if (!r.Get("effort")) {
        DI_RETURN_IF_ERROR(thinking.Set(true, "reasoning"));
      }
      DI_RETURN_IF_ERROR(add_effort(r, "effort"));
    } else {
      return Expected("reasoning", "a boolean or an object", *e);
    }
  }
  std::optional<Fields> kwargs;
  DI_RETURN_IF_ERROR(top.Object("chat_template_kwargs", &kwargs));
  if (kwargs) {
    for (std::string_view key : {"thinking", "enable_thinking"}) {
      bool b = false;
      if (!kwargs->Get(key)) continue;
      DI_RETURN_IF_ERROR(kwargs->Bool(key, &b));
      DI_RETURN_IF_ERROR(thinking.Set(b, kwargs->Path(key)));
    }
    DI_RETURN_IF_ERROR(add_effort(*kwargs, "reasoning_effort"));
  }
  DI_RETURN_IF_ERROR(add_effort(top, "reasoning_effort"));

  // V4 knows two efforts, high and max; OpenAI's lower ones select the model's default. Any
  // effort but "none" turns thinking on unless a thinking switch says otherwise.
  std::optional<bool> implied;
  if (!effort_source.empty()) {
    if (effort == "none") {
      implied = false;
      effort.clear();
    } else if (effort == "minimal" || effort == "low" || effort == "medium") {
      implied = true;
      effort.clear();
    } else if (effort == "high" || effort == "max") {
      implied = true;
    } else {
      return InvalidArgument(effort_source +
                             ": must be one of none, minimal, low, medium, high, max, got " +
                             Quoted(effort));
    }
  }
  options->thinking = thinking.value.value_or(implied.value_or(false));
  options->reasoning_effort = options->thinking ? effort : "";
  return Status::Ok();
}

Status ParseToolChoice(const Fields& top, ChatCompletionRequest* req) {
  const bool has_tools = !req->tool_names.empty();
  ToolChoice& choice = req->tool_choice;
  choice.kind = has_tools ? ToolChoiceKind::kAuto : ToolChoiceKind::kNone;
  auto e = top.Get("tool_choice");
  if (!e) return Status::Ok();
  std::string_view s;
  object o;
  if (e->get_string().get(s) == simdjson::SUCCESS) {
    if (s == "none") {
      choice.kind = ToolChoiceKind::kNone;
    } else if (s == "required") {
      if (!has_tools) return InvalidArgument("tool_choice: 'required' needs tools");
      choice.kind = ToolChoiceKind::kRequired;
    } else if (s != "auto") {
      return InvalidArgument("tool_choice: must be 'auto', 'none', 'required' or an object, got " +
                             Quoted(s));
    }
    return Status::Ok();
  }
  if (e->get_object().get(o) != simdjson::SUCCESS) {
    return Expected("tool_choice", "a string or an object", *e);
  }
  Fields f(o, "tool_choice");
  std::string type;
  DI_RETURN_IF_ERROR(f.RequiredString("type", &type));
  if (type != "function") {
    return InvalidArgument("tool_choice.type: must be 'function', got " + Quoted(type));
  }
  std::optional<Fields> fn;
  DI_RETURN_IF_ERROR(f.Object("function", &fn));
  if (!fn) return InvalidArgument("tool_choice.function: required");
  DI_RETURN_IF_ERROR(fn->RequiredString("name", &choice.function_name));
  if (std::find(req->tool_names.begin(), req->tool_names.end(), choice.function_name) ==
      req->tool_names.end()) {
    return InvalidArgument("tool_choice.function.name: no tool named " +
                           Quoted(choice.function_name) + " in tools");
  }
  choice.kind = ToolChoiceKind::kFunction;
  return Status::Ok();
}

Status ParseResponseFormat(const Fields& top, ChatCompletionRequest* req) {
  std::optional<Fields> rf;
  DI_RETURN_IF_ERROR(top.Object("response_format", &rf));
  if (!rf) return Status::Ok();
  ResponseFormat& out = req->response_format;
  std::string type;
  DI_RETURN_IF_ERROR(rf->RequiredString("type", &type));
  if (type == "text") return Status::Ok();  // nothing to constrain; response_format_json stays ""
  if (type == "json_object") {
    out.kind = ResponseFormatKind::kJsonObject;
  } else if (type == "json_schema") {
    out.kind = ResponseFormatKind::kJsonSchema;
    std::optional<Fields> js;
    DI_RETURN_IF_ERROR(rf->Object("json_schema", &js));
    if (!js) return InvalidArgument("response_format.json_schema: required");
    DI_RETURN_IF_ERROR(js->String("name", &out.name));
    DI_RETURN_IF_ERROR(js->Bool("strict", &out.strict));
    auto schema = js->Get("schema");
    if (!schema) return InvalidArgument(js->Path("schema") + ": required");
    if (!schema->is_object()) return Expected(js->Path("schema"), "a JSON Schema object", *schema);
    out.schema_json = simdjson::minify(*schema);
  } else if (type == "regex") {
    out.kind = ResponseFormatKind::kRegex;
    DI_RETURN_IF_ERROR(rf->RequiredString("regex", &out.pattern));
  } else if (type == "grammar") {
    out.kind = ResponseFormatKind::kGrammar;
    DI_RETURN_IF_ERROR(rf->RequiredString("grammar", &out.pattern));
  } else {
    return InvalidArgument(
        "response_format.type: must be one of text, json_object, json_schema, regex, grammar, "
        "got " +
        Quoted(type));
  }
  req->options.response_format_json = simdjson::minify(rf->obj());
  return Status::Ok();
}

Result<ChatCompletionRequest> ParseRequest(std::string_view json_body, const ParseLimits& limits) {
  if (json_body.size() > limits.max_body_bytes) {
    return InvalidArgument("body: " + std::to_string(json_body.size()) +
                           " bytes exceed the limit of " + std::to_string(limits.max_body_bytes));
  }
  simdjson::dom::parser parser;
  element root;
  if (auto err = parser.parse(json_body.data(), json_body.size()).get(root); err) {
    return InvalidArgument(std::string("body: invalid JSON (") + simdjson::error_message(err) +
                           ")");
  }
  object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    return Expected("body", "a JSON object", root);
  }
  Fields top(obj, "");
  ChatCompletionRequest req;
  DI_RETURN_IF_ERROR(top.String("model", &req.model));
  DI_RETURN_IF_ERROR(top.String("user", &req.user));
  DI_RETURN_IF_ERROR(ParseMessages(top, limits, &req));
  DI_RETURN_IF_ERROR(ParseTools(top, limits, &req));
  DI_RETURN_IF_ERROR(ParseToolChoice(top, &req));
  DI_RETURN_IF_ERROR(top.Bool("parallel_tool_calls", &req.parallel_tool_calls));
  DI_RETURN_IF_ERROR(ParseResponseFormat(top, &req));
  DI_RETURN_IF_ERROR(ParseThinking(top, &req.options));
  DI_RETURN_IF_ERROR(top.Bool("stream", &req.stream));
  std::optional<Fields> stream_options;
  DI_RETURN_IF_ERROR(top.Object("stream_options", &stream_options));
  if (stream_options) {
    DI_RETURN_IF_ERROR(stream_options->Bool("include_usage", &req.stream_options.include_usage));
  }
  DI_RETURN_IF_ERROR(ParseSampling(top, limits, &req.sampling));
  return req;
}

}  // namespace
}  // namespace deepinfer::openai_internal

namespace deepinfer {

Result<ChatCompletionRequest> ParseChatCompletionRequest(std::string_view json_body,
                                                         const ParseLimits& limits) {
  return openai_internal::ParseRequest(json_body, limits);
}

}  // namespace deepinfer
