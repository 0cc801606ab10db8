// The conversation half of a chat-completions request: `messages` (content strings and parts,
// assistant tool calls and reasoning, tool results) and `tools`.
#include <simdjson.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/openai_internal.h"

namespace deepinfer::openai_internal {
namespace {

constexpr std::string_view kRoles[] = {"system", "user", "assistant", "tool", "developer"};

// Content part types that carry media. This model reads text only.
constexpr std::string_view kMediaParts[] = {"image_url",   "input_image", "image",
                                            "input_audio", "audio",       "file",
                                            "input_file",  "video_url",   "video"};

template <typename Range>
bool Contains(const Range& range, std::string_view s) {
  return std::find(std::begin(range), std::end(range), s) != std::end(range);
}

// A function name as the V4 template writes it inside `name="..."`: 1..128 characters of
// [A-Za-z0-9_.:-] (OpenAI's set plus '.' and ':', which MCP-style clients use).
Status CheckFunctionName(const std::string& path, std::string_view name) {
  if (name.size() > 128) return InvalidArgument(path + ": longer than 128 characters");
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.' || c == ':';
    if (!ok) {
      return InvalidArgument(path + ": " + Quoted(name) +
                             " has characters outside [A-Za-z0-9_.:-]");
    }
  }
  return Status::Ok();
}

// `content`: a string, or an array of parts whose text parts are concatenated as they are (no
// separator). Media parts are refused.
Status ParseContent(element e, const std::string& path, std::string* out) {
  std::string_view s;
  if (e.get_string().get(s) == simdjson::SUCCESS) {
    *out = std::string(s);
    return Status::Ok();
  }
  array parts;
  if (e.get_array().get(parts) != simdjson::SUCCESS) {
    return Expected(path, "a string or an array of content parts", e);
  }
  out->clear();
  size_t i = 0;
  for (element part : parts) {
    std::string part_path = Index(path, i++);
    object o;
    if (part.get_object().get(o) != simdjson::SUCCESS) {
      return Expected(part_path, "a content part object", part);
    }
    Fields f(o, part_path);
    std::string type;
    DI_RETURN_IF_ERROR(f.RequiredString("type", &type));
    if (type == "text") {
      if (!f.Get("text")) return InvalidArgument(f.Path("text") + ": required");
      std::string text;
      DI_RETURN_IF_ERROR(f.String("text", &text));
      out->append(text);
    } else if (Contains(kMediaParts, type)) {
      return InvalidArgument(part_path + ": content part type " + Quoted(type) +
                             " is not supported (text only)");
    } else {
      return InvalidArgument(f.Path("type") + ": unknown content part type " + Quoted(type));
    }
  }
  return Status::Ok();
}

// `function.arguments`: a JSON object encoded as a string, kept as sent. An empty or missing
// value means {}; an object (a common client slip) is accepted and written out minified.
Status ParseArguments(const Fields& fn, simdjson::dom::parser* scratch, std::string* out) {
  std::string path = fn.Path("arguments");
  auto e = fn.Get("arguments");
  if (!e) {
    *out = "{}";
    return Status::Ok();
  }
  if (e->is_object()) {
    *out = simdjson::minify(*e);
    return Status::Ok();
  }
  std::string_view s;
  if (e->get_string().get(s) != simdjson::SUCCESS) {
    return Expected(path, "a string holding a JSON object", *e);
  }
  if (s.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    *out = "{}";
    return Status::Ok();
  }
  element parsed;
  if (scratch->parse(s.data(), s.size()).get(parsed) != simdjson::SUCCESS || !parsed.is_object()) {
    return InvalidArgument(path + ": must be a JSON object encoded as a string");
  }
  *out = std::string(s);
  return Status::Ok();
}

Status ParseToolCalls(array calls, const std::string& path, simdjson::dom::parser* scratch,
                      std::vector<ToolCall>* out) {
  size_t i = 0;
  for (element c : calls) {
    std::string call_path = Index(path, i++);
    object o;
    if (c.get_object().get(o) != simdjson::SUCCESS) {
      return Expected(call_path, "a tool call object", c);
    }
    Fields f(o, call_path);
    ToolCall call;
    DI_RETURN_IF_ERROR(f.String("id", &call.id));
    std::string type = "function";
    DI_RETURN_IF_ERROR(f.String("type", &type));
    if (type != "function") {
      return InvalidArgument(f.Path("type") + ": must be 'function', got " + Quoted(type));
    }
    std::optional<Fields> fn;
    DI_RETURN_IF_ERROR(f.Object("function", &fn));
    if (!fn) return InvalidArgument(f.Path("function") + ": required");
    DI_RETURN_IF_ERROR(fn->RequiredString("name", &call.name));
    DI_RETURN_IF_ERROR(CheckFunctionName(fn->Path("name"), call.name));
    DI_RETURN_IF_ERROR(ParseArguments(*fn, scratch, &call.arguments_json));
    out->push_back(std::move(call));
  }
  return Status::Ok();
}

Status ParseMessage(element e, const std::string& path, simdjson::dom::parser* scratch,
                    ChatMessage* m) {
  object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) return Expected(path, "a message object", e);
  Fields f(o, path);
  DI_RETURN_IF_ERROR(f.RequiredString("role", &m->role));
  if (!Contains(kRoles, m->role)) {
    return InvalidArgument(f.Path("role") +
                           ": must be one of system, user, assistant, tool, developer, got " +
                           Quoted(m->role));
  }
  const bool assistant = m->role == "assistant";
  if (auto content = f.Get("content")) {
    DI_RETURN_IF_ERROR(ParseContent(*content, f.Path("content"), &m->content));
  } else if (!assistant) {
    return InvalidArgument(f.Path("content") + ": required for role " + Quoted(m->role));
  }
  DI_RETURN_IF_ERROR(f.String("name", &m->name));
  if (assistant) {
    // `reasoning` is the newer spelling (vLLM, OpenRouter); reasoning_content wins over it.
    DI_RETURN_IF_ERROR(f.String("reasoning", &m->reasoning_content));
    DI_RETURN_IF_ERROR(f.String("reasoning_content", &m->reasoning_content));
    std::optional<array> calls;
    DI_RETURN_IF_ERROR(f.Array("tool_calls", &calls));
    if (calls)
      DI_RETURN_IF_ERROR(ParseToolCalls(*calls, f.Path("tool_calls"), scratch, &m->tool_calls));
  }
  if (m->role == "tool") DI_RETURN_IF_ERROR(f.RequiredString("tool_call_id", &m->tool_call_id));
  return Status::Ok();
}

}  // namespace

Status ParseMessages(const Fields& top, const ParseLimits& limits, ChatCompletionRequest* req) {
  std::optional<array> messages;
  DI_RETURN_IF_ERROR(top.Array("messages", &messages));
  if (!messages) return InvalidArgument("messages: required");
  const size_t n = messages->size();
  if (n == 0) return InvalidArgument("messages: must not be empty");
  if (n > limits.max_messages) {
    return InvalidArgument("messages: " + std::to_string(n) + " messages exceed the limit of " +
                           std::to_string(limits.max_messages));
  }
  simdjson::dom::parser scratch;  // validates tool-call arguments; allocates on first use
  req->messages.reserve(n);
  size_t i = 0;
  for (element e : *messages) {
    ChatMessage m;
    DI_RETURN_IF_ERROR(ParseMessage(e, Index("messages", i++), &scratch, &m));
    req->messages.push_back(std::move(m));
  }
  return Status::Ok();
}

Status ParseTools(const Fields& top, const ParseLimits& limits, ChatCompletionRequest* req) {
  std::optional<array> tools;
  DI_RETURN_IF_ERROR(top.Array("tools", &tools));
  if (!tools || tools->size() == 0) return Status::Ok();
  if (tools->size() > limits.max_tools) {
    return InvalidArgument("tools: " + std::to_string(tools->size()) +
                           " tools exceed the limit of " + std::to_string(limits.max_tools));
  }
  size_t i = 0;
  for (element t : *tools) {
    std::string path = Index("tools", i++);
    object o;
    if (t.get_object().get(o) != simdjson::SUCCESS) return Expected(path, "a tool object", t);
    Fields f(o, path);
    std::string type;
    DI_RETURN_IF_ERROR(f.RequiredString("type", &type));
    if (type != "function") {
      return InvalidArgument(f.Path("type") + ": must be 'function', got " + Quoted(type));
    }
    std::optional<Fields> fn;
    DI_RETURN_IF_ERROR(f.Object("function", &fn));
    if (!fn) return InvalidArgument(f.Path("function") + ": required");
    std::string name;
    DI_RETURN_IF_ERROR(fn->RequiredString("name", &name));
    DI_RETURN_IF_ERROR(CheckFunctionName(fn->Path("name"), name));
    if (Contains(req->tool_names, name)) {
      return InvalidArgument(fn->Path("name") + ": duplicate tool name " + Quoted(name));
    }
    std::string description;
    DI_RETURN_IF_ERROR(fn->String("description", &description));
    if (auto params = fn->Get("parameters"); params && !params->is_object()) {
      return Expected(fn->Path("parameters"), "a JSON Schema object", *params);
    }
    bool strict = false;
    DI_RETURN_IF_ERROR(fn->Bool("strict", &strict));
    req->tool_names.push_back(std::move(name));
  }
  // Re-serialized (minified, key order kept): the same tools always render the same prompt.
  req->options.tools_json = simdjson::minify(*top.Get("tools"));
  return Status::Ok();
}

}  // namespace deepinfer::openai_internal
