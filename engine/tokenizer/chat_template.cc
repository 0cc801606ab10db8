#include "engine/tokenizer/chat_template.h"

#include <simdjson.h>

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <utility>

#include "engine/tokenizer/v4_format.h"

namespace deepinfer {
namespace {

using v4::kAssistant;
using v4::kBos;
using v4::kDsml;
using v4::kEos;
using v4::kLatestReminder;
using v4::kThinkEnd;
using v4::kThinkStart;
using v4::kUser;

// The literal prompt texts of the official encoder; they must stay byte-exact.
constexpr std::string_view kReasoningEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, "
    "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
    "unchecked.\n\n";

constexpr std::string_view kToolsHead =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools "
    "by writing a \"<｜DSML｜tool_calls>\" block like the following:\n\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE"
    "</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types "
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning "
    "inside <think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";

constexpr std::string_view kToolsTail =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke "
    "tool calls.\n";

constexpr std::string_view kResponseFormatHead =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

constexpr std::string_view kMarkers[] = {kBos,        kEos,      kUser, kAssistant, kLatestReminder,
                                         kThinkStart, kThinkEnd, kDsml};

// Builds the prompt text and records the byte range of every marker written through Marker().
class PromptWriter {
 public:
  void Text(std::string_view s) { out_.text += s; }
  void Marker(std::string_view m) {
    const size_t begin = out_.text.size();
    out_.text += m;
    out_.special_spans.emplace_back(begin, out_.text.size());
  }
  // Literal template text (never user content): each marker inside it becomes a span.
  void Template(std::string_view t) {
    while (!t.empty()) {
      size_t best = std::string_view::npos;
      size_t len = 0;
      for (std::string_view m : kMarkers) {
        const size_t p = t.find(m);
        if (p < best) {
          best = p;
          len = m.size();
        }
      }
      if (best == std::string_view::npos) return Text(t);
      Text(t.substr(0, best));
      Marker(t.substr(best, len));
      t.remove_prefix(best + len);
    }
  }
  // A DSML tag: `before` + ｜DSML｜ + `after`, e.g. "<" ｜DSML｜ "invoke name=\"".
  void Dsml(std::string_view before, std::string_view after) {
    Text(before);
    Marker(kDsml);
    Text(after);
  }
  RenderedPrompt Take() { return std::move(out_); }

 private:
  RenderedPrompt out_;
};

struct Block {
  bool tool_result = false;
  std::string_view text;
  std::string_view tool_call_id;
};

// One message after tool results are merged into user turns.
struct Turn {
  explicit Turn(std::string_view r, const ChatMessage* m = nullptr) : role(r), msg(m) {}
  std::string_view role;
  const ChatMessage* msg;     // null for merged user turns and the inserted system turn
  std::vector<Block> blocks;  // user turns: text and tool-result blocks
  bool tools = false;
  bool response_format = false;
};

bool KnownRole(std::string_view r) {
  return r == "system" || r == "user" || r == "assistant" || r == "tool" || r == "developer" ||
         r == "latest_reminder";
}

// tools_json: an OpenAI tool array; each entry's "function" object becomes one line.
Status RenderToolSchemas(const std::string& json, std::string* lines, bool* any) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(json).get(root) != simdjson::SUCCESS) {
    return InvalidArgument("tools_json is not valid JSON");
  }
  simdjson::dom::array tools;
  if (root.get(tools) != simdjson::SUCCESS) return InvalidArgument("tools_json is not an array");
  size_t i = 0;
  for (simdjson::dom::element tool : tools) {
    simdjson::dom::element fn;
    if (!tool.is_object() || tool["function"].get(fn) != simdjson::SUCCESS || !fn.is_object()) {
      return InvalidArgument("tools_json[" + std::to_string(i) + "] has no \"function\" object");
    }
    if (i++ > 0) lines->push_back('\n');
    v4::AppendPyJson(fn, lines);
  }
  *any = i > 0;
  return Status::Ok();
}

Status RenderResponseFormat(const std::string& json, std::string* out, bool* any) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::dom::object obj;
  if (parser.parse(json).get(root) != simdjson::SUCCESS || root.get(obj) != simdjson::SUCCESS) {
    return InvalidArgument("response_format_json is not a JSON object");
  }
  *any = obj.size() > 0;  // the official encoder skips a falsy (empty) response_format
  if (*any) v4::AppendPyJson(root, out);
  return Status::Ok();
}

// The <｜DSML｜parameter> lines of one call. Arguments that are not JSON become one string
// parameter named "arguments", as in the official encoder; "" is taken as {}.
Status WriteDsmlParams(const ToolCall& call, PromptWriter* w) {
  std::string_view args = call.arguments_json;
  if (args.find_first_not_of(" \t\r\n") == std::string_view::npos) return Status::Ok();
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(args.data(), args.size()).get(root) != simdjson::SUCCESS) {
    w->Dsml("<", "parameter name=\"arguments\" string=\"true\">");
    w->Text(args);
    w->Dsml("</", "parameter>");
    return Status::Ok();
  }
  simdjson::dom::object obj;
  if (root.get(obj) != simdjson::SUCCESS) {
    return InvalidArgument("tool call '" + call.name + "': arguments are not a JSON object");
  }
  bool first = true;
  for (const auto& [key, value] : v4::PyObjectItems(obj)) {
    if (!first) w->Text("\n");
    first = false;
    const bool is_string = value.is_string();
    w->Dsml("<", "parameter name=\"");
    w->Text(key);
    w->Text(is_string ? "\" string=\"true\">" : "\" string=\"false\">");
    if (is_string) {
      w->Text(value.get_string().value_unsafe());
    } else {
      std::string json;
      v4::AppendPyJson(value, &json);
      w->Text(json);
    }
    w->Dsml("</", "parameter>");
  }
  return Status::Ok();
}

Status WriteToolCalls(const std::vector<ToolCall>& calls, PromptWriter* w) {
  w->Text("\n\n");
  w->Dsml("<", "tool_calls>\n");
  for (size_t k = 0; k < calls.size(); ++k) {
    if (k > 0) w->Text("\n");
    w->Dsml("<", "invoke name=\"");
    w->Text(calls[k].name);
    w->Text("\">\n");
    DI_RETURN_IF_ERROR(WriteDsmlParams(calls[k], w));
    w->Text("\n");
    w->Dsml("</", "invoke>");
  }
  w->Text("\n");
  w->Dsml("</", "tool_calls>");
  return Status::Ok();
}

// Orders each user turn's tool results like the calls of the latest assistant tool-call turn
// (stable; results with unknown ids rank as the first call), keeping text blocks in place.
void SortToolResults(std::vector<Turn>* turns) {
  std::vector<std::pair<std::string_view, size_t>> order;  // call id -> position
  auto rank = [&order](std::string_view id) -> size_t {
    for (const auto& [k, v] : order) {
      if (k == id) return v;
    }
    return 0;
  };
  for (Turn& t : *turns) {
    if (t.role == "assistant" && t.msg != nullptr && !t.msg->tool_calls.empty()) {
      order.clear();
      for (size_t k = 0; k < t.msg->tool_calls.size(); ++k) {
        const std::string& id = t.msg->tool_calls[k].id;
        if (id.empty()) continue;
        auto it = std::find_if(order.begin(), order.end(), [&](auto& p) { return p.first == id; });
        if (it != order.end()) {
          it->second = k;  // a repeated id keeps its last position, like a Python dict
        } else {
          order.emplace_back(id, k);
        }
      }
    } else if (t.role == "user" && !order.empty()) {
      std::vector<Block> results;
      for (const Block& b : t.blocks) {
        if (b.tool_result) results.push_back(b);
      }
      if (results.size() < 2) continue;
      std::stable_sort(results.begin(), results.end(), [&](const Block& a, const Block& b) {
        return rank(a.tool_call_id) < rank(b.tool_call_id);
      });
      size_t next = 0;
      for (Block& b : t.blocks) {
        if (b.tool_result) b = results[next++];
      }
    }
  }
}

int LastUserIndex(const std::vector<Turn>& turns) {
  for (int i = static_cast<int>(turns.size()) - 1; i >= 0; --i) {
    if (turns[i].role == "user" || turns[i].role == "developer") return i;
  }
  return -1;
}

}  // namespace

std::vector<std::string> V4ChatSpecialTokens() {
  return std::vector<std::string>(std::begin(kMarkers), std::end(kMarkers));
}

Result<RenderedPrompt> RenderV4Chat(const std::vector<ChatMessage>& messages,
                                    const ChatOptions& options) {
  const std::string& effort = options.reasoning_effort;
  if (effort != "" && effort != "high" && effort != "max") {
    return InvalidArgument("reasoning_effort must be \"\", \"high\" or \"max\", got \"" + effort +
                           "\"");
  }
  if (effort == "max" && !options.thinking) {
    return InvalidArgument("reasoning_effort \"max\" needs thinking mode");
  }
  std::string tool_schemas, response_format;
  bool has_tools = false, has_response_format = false;
  if (!options.tools_json.empty()) {
    DI_RETURN_IF_ERROR(RenderToolSchemas(options.tools_json, &tool_schemas, &has_tools));
  }
  if (!options.response_format_json.empty()) {
    DI_RETURN_IF_ERROR(
        RenderResponseFormat(options.response_format_json, &response_format, &has_response_format));
  }

  // Validate, and merge tool results (and consecutive user messages) into user turns.
  std::vector<Turn> turns;
  if ((has_tools || has_response_format) && (messages.empty() || messages[0].role != "system")) {
    turns.emplace_back("system");
  }
  bool calls_open = false;  // the last non-tool message was an assistant turn with tool calls
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string where = "message " + std::to_string(i) + ": ";
    if (!KnownRole(m.role)) return InvalidArgument(where + "unknown role '" + m.role + "'");
    if (m.role == "tool" && !calls_open) {
      return InvalidArgument(where + "tool result without a preceding assistant tool call");
    }
    if (m.role == "developer" && m.content.empty()) {
      return InvalidArgument(where + "developer message has no content");
    }
    if (m.role == "assistant") {
      for (const ToolCall& call : m.tool_calls) {
        if (call.name.empty()) return InvalidArgument(where + "tool call without a name");
      }
    }
    if (m.role != "tool") calls_open = m.role == "assistant" && !m.tool_calls.empty();
    if (m.role == "tool" || m.role == "user") {
      Block block{m.role == "tool", m.content, m.tool_call_id};
      if (turns.empty() || turns.back().role != "user") turns.emplace_back("user");
      turns.back().blocks.push_back(block);
    } else {
      turns.emplace_back(m.role, &m);
    }
  }
  if (!turns.empty() && turns[0].role == "system") {
    turns[0].tools = has_tools;
    turns[0].response_format = has_response_format;
  }
  SortToolResults(&turns);

  // Old reasoning is dropped unless any message carries tools; in thinking mode the drop also
  // removes developer turns before the last user turn.
  const bool drop = options.drop_old_reasoning && !has_tools;
  if (options.thinking && drop) {
    const int last_user = LastUserIndex(turns);
    std::vector<Turn> kept;
    for (int i = 0; i < static_cast<int>(turns.size()); ++i) {
      if (turns[i].role != "developer" || i >= last_user) kept.push_back(std::move(turns[i]));
    }
    turns = std::move(kept);
  }

  PromptWriter w;
  w.Marker(kBos);
  const int last_user = LastUserIndex(turns);
  const int n = static_cast<int>(turns.size());
  for (int i = 0; i < n; ++i) {
    const Turn& t = turns[i];
    if (i == 0 && options.thinking && effort == "max") w.Text(kReasoningEffortMax);
    if (t.role == "system") {
      if (t.msg != nullptr) w.Text(t.msg->content);
      if (t.tools) {
        w.Text("\n\n");
        w.Template(kToolsHead);
        w.Text(tool_schemas);
        w.Text(kToolsTail);
      }
      if (t.response_format) {
        w.Text("\n\n");
        w.Text(kResponseFormatHead);
        w.Text(response_format);
      }
    } else if (t.role == "developer") {
      w.Marker(kUser);
      w.Text(t.msg->content);
    } else if (t.role == "user") {
      w.Marker(kUser);
      for (size_t k = 0; k < t.blocks.size(); ++k) {
        if (k > 0) w.Text("\n\n");
        if (t.blocks[k].tool_result) w.Text("<tool_result>");
        w.Text(t.blocks[k].text);
        if (t.blocks[k].tool_result) w.Text("</tool_result>");
      }
    } else if (t.role == "latest_reminder") {
      w.Marker(kLatestReminder);
      w.Text(t.msg->content);
    } else {  // assistant
      if (options.thinking && (!drop || i > last_user)) {
        w.Text(t.msg->reasoning_content);
        w.Marker(kThinkEnd);
      }
      w.Text(t.msg->content);
      if (!t.msg->tool_calls.empty()) DI_RETURN_IF_ERROR(WriteToolCalls(t.msg->tool_calls, &w));
      w.Marker(kEos);
    }

    // The transition into the assistant turn follows a user/developer turn when an assistant
    // (or latest_reminder) turn comes next, or when it is the last turn.
    const bool last = i + 1 == n;
    if (!last && turns[i + 1].role != "assistant" && turns[i + 1].role != "latest_reminder") {
      continue;
    }
    if (last && !options.add_generation_prompt) continue;
    if (t.role == "user" || t.role == "developer") {
      w.Marker(kAssistant);
      w.Marker(options.thinking && (!drop || i >= last_user) ? kThinkStart : kThinkEnd);
    }
  }
  return w.Take();
}

}  // namespace deepinfer
