// The V4 chat template against prompts written out by hand from the official encoder's format
// (encoding_dsv4.py), plus special-span bookkeeping, errors and the render -> parse round trip.
#include "engine/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/tokenizer/output_parser.h"

namespace deepinfer {
namespace {

ChatMessage Msg(std::string role, std::string content, std::string reasoning = "") {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  m.reasoning_content = std::move(reasoning);
  return m;
}

ChatMessage ToolResult(std::string id, std::string content) {
  ChatMessage m = Msg("tool", std::move(content));
  m.tool_call_id = std::move(id);
  return m;
}

ToolCall Call(std::string id, std::string name, std::string args) {
  return ToolCall{std::move(id), std::move(name), std::move(args)};
}

std::string Render(const std::vector<ChatMessage>& msgs, const ChatOptions& opts) {
  auto r = RenderV4Chat(msgs, opts);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->text : "";
}

// The marker strings covered by special_spans, in order.
std::vector<std::string> SpanTexts(const RenderedPrompt& p) {
  std::vector<std::string> out;
  for (auto [b, e] : p.special_spans) out.push_back(p.text.substr(b, e - b));
  return out;
}

ChatOptions Thinking() {
  ChatOptions o;
  o.thinking = true;
  return o;
}

const char kToolsJson[] =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "Get the weather",)"
    R"( "parameters": {"type":"object","properties":{"city":{"type":"string"},)"
    R"("days":{"type":"integer"}},"required":["city"]}}}])";

// The official tools block for kToolsJson (note the schema re-serialized with ", " and ": ").
const char kToolsBlock[] =
    "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can "
    "invoke tools by writing a \"<｜DSML｜tool_calls>\" block like the following:\n\n"
    "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE"
    "</｜DSML｜parameter>\n...\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"$TOOL_NAME2\">\n...\n"
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>\n\nString parameters should be specified as is and "
    "set `string=\"true\"`. For all other types (numbers, booleans, arrays, objects), pass the "
    "value in JSON format and set `string=\"false\"`.\n\nIf thinking_mode is enabled (triggered "
    "by <think>), you MUST output your complete reasoning inside <think>...</think> BEFORE any "
    "tool calls or final response.\n\nOtherwise, output directly after </think> with tool calls "
    "or final response.\n\n### Available Tool Schemas\n\n"
    "{\"name\": \"get_weather\", \"description\": \"Get the weather\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": "
    "{\"type\": \"integer\"}}, \"required\": [\"city\"]}}\n\nYou MUST strictly follow the above "
    "defined tool name and parameter schemas to invoke tool calls.\n";

TEST(ChatTemplate, SingleTurnNonThinking) {
  EXPECT_EQ(Render({Msg("system", "You are helpful."), Msg("user", "Hi")}, ChatOptions()),
            "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜></think>");
}

TEST(ChatTemplate, SingleTurnThinking) {
  EXPECT_EQ(Render({Msg("user", "Hi")}, Thinking()),
            "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜><think>");
}

TEST(ChatTemplate, MultiTurnThinkingDropsOldReasoning) {
  std::vector<ChatMessage> msgs = {Msg("user", "q1"), Msg("assistant", "a1", "r1"),
                                   Msg("user", "q2")};
  EXPECT_EQ(Render(msgs, Thinking()),
            "<｜begin▁of▁sentence｜><｜User｜>q1<｜Assistant｜></think>a1<｜end▁of▁sentence｜>"
            "<｜User｜>q2<｜Assistant｜><think>");
  ChatOptions keep = Thinking();
  keep.drop_old_reasoning = false;
  EXPECT_EQ(Render(msgs, keep),
            "<｜begin▁of▁sentence｜><｜User｜>q1<｜Assistant｜><think>r1</think>a1"
            "<｜end▁of▁sentence｜><｜User｜>q2<｜Assistant｜><think>");
  // Non-thinking: reasoning is never rendered.
  EXPECT_EQ(Render(msgs, ChatOptions()),
            "<｜begin▁of▁sentence｜><｜User｜>q1<｜Assistant｜></think>a1<｜end▁of▁sentence｜>"
            "<｜User｜>q2<｜Assistant｜></think>");
}

TEST(ChatTemplate, ToolsToolCallToolResultFinalAnswer) {
  ChatMessage call = Msg("assistant", "", "need weather");
  call.tool_calls = {Call("c1", "get_weather", R"({"city": "Paris", "days": 2})")};
  std::vector<ChatMessage> msgs = {Msg("system", "sys"), Msg("user", "Weather in Paris?"), call,
                                   ToolResult("c1", "sunny")};
  ChatOptions opts = Thinking();
  opts.tools_json = kToolsJson;
  const std::string head = std::string("<｜begin▁of▁sentence｜>sys\n\n") + kToolsBlock +
                           "<｜User｜>Weather in Paris?<｜Assistant｜><think>need weather</think>"
                           "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
                           "<｜DSML｜parameter name=\"city\" string=\"true\">Paris"
                           "</｜DSML｜parameter>\n"
                           "<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>"
                           "\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>"
                           "<｜User｜><tool_result>sunny</tool_result><｜Assistant｜><think>";
  // With tools nothing is dropped: the tool-call turn keeps its reasoning.
  EXPECT_EQ(Render(msgs, opts), head);
  msgs.push_back(Msg("assistant", "Sunny in Paris.", "got it"));
  EXPECT_EQ(Render(msgs, opts), head + "got it</think>Sunny in Paris.<｜end▁of▁sentence｜>");
}

TEST(ChatTemplate, ToolsWithoutSystemMessageGetAnEmptySystemTurn) {
  ChatOptions opts;
  opts.tools_json = kToolsJson;
  EXPECT_EQ(Render({Msg("user", "Hi")}, opts), std::string("<｜begin▁of▁sentence｜>\n\n") +
                                                   kToolsBlock +
                                                   "<｜User｜>Hi<｜Assistant｜></think>");
  opts.tools_json = "[]";  // an empty tool list renders nothing
  EXPECT_EQ(Render({Msg("user", "Hi")}, opts),
            "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>");
}

TEST(ChatTemplate, ToolResultsFollowCallOrderAndMergeWithUserText) {
  ChatMessage call = Msg("assistant", "");
  call.tool_calls = {Call("a", "f", "{}"), Call("b", "g", R"({"x": [1, 2.50, 1E5, 1e16]})")};
  std::vector<ChatMessage> msgs = {Msg("user", "go"), call, ToolResult("b", "B"),
                                   ToolResult("a", "A"), Msg("user", "and now?")};
  EXPECT_EQ(Render(msgs, ChatOptions()),
            "<｜begin▁of▁sentence｜><｜User｜>go<｜Assistant｜></think>\n\n<｜DSML｜tool_calls>\n"
            "<｜DSML｜invoke name=\"f\">\n\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"g\">\n"
            "<｜DSML｜parameter name=\"x\" string=\"false\">[1, 2.5, 100000.0, 1e+16]"
            "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>"
            "<｜User｜><tool_result>A</tool_result>\n\n<tool_result>B</tool_result>\n\nand now?"
            "<｜Assistant｜></think>");
}

TEST(ChatTemplate, ToolCallArgumentsRendering) {
  ChatMessage call = Msg("assistant", "ok");
  call.tool_calls = {
      Call("", "f", "{\"s\": \"é \\\"q\\\"\\n\", \"o\": {\"k\": \"v\\t\"}, \"b\": false}"),
      Call("", "g", "not json")};
  EXPECT_EQ(Render({Msg("user", "u"), call}, ChatOptions()),
            "<｜begin▁of▁sentence｜><｜User｜>u<｜Assistant｜></think>ok\n\n<｜DSML｜tool_calls>\n"
            "<｜DSML｜invoke name=\"f\">\n"
            "<｜DSML｜parameter name=\"s\" string=\"true\">é \"q\"\n</｜DSML｜parameter>\n"
            "<｜DSML｜parameter name=\"o\" string=\"false\">{\"k\": \"v\\t\"}</｜DSML｜parameter>\n"
            "<｜DSML｜parameter name=\"b\" string=\"false\">false</｜DSML｜parameter>\n"
            "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"g\">\n"
            "<｜DSML｜parameter name=\"arguments\" string=\"true\">not json</｜DSML｜parameter>\n"
            "</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>");
}

const char kEffortMax[] =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST be very thorough "
    "in your thinking and comprehensively decompose the problem to resolve the root cause, "
    "rigorously stress-testing your logic against all potential paths, edge cases, and "
    "adversarial scenarios.\nExplicitly write out your entire deliberation process, documenting "
    "every intermediate step, considered alternative, and rejected hypothesis to ensure "
    "absolutely no assumption is left unchecked.\n\n";

TEST(ChatTemplate, ReasoningEffort) {
  ChatOptions opts = Thinking();
  opts.reasoning_effort = "max";
  EXPECT_EQ(
      Render({Msg("system", "S"), Msg("user", "Hi")}, opts),
      std::string("<｜begin▁of▁sentence｜>") + kEffortMax + "S<｜User｜>Hi<｜Assistant｜><think>");
  opts.reasoning_effort = "high";  // the official encoder adds no text for "high"
  EXPECT_EQ(Render({Msg("user", "Hi")}, opts),
            "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜><think>");
}

TEST(ChatTemplate, DeveloperRole) {
  std::vector<ChatMessage> msgs = {Msg("system", "s"), Msg("developer", "d"), Msg("user", "u")};
  EXPECT_EQ(Render(msgs, ChatOptions()),
            "<｜begin▁of▁sentence｜>s<｜User｜>d<｜User｜>u<｜Assistant｜></think>");
  // Thinking with dropping removes developer turns before the last user turn.
  EXPECT_EQ(Render(msgs, Thinking()), "<｜begin▁of▁sentence｜>s<｜User｜>u<｜Assistant｜><think>");
  EXPECT_EQ(Render({Msg("developer", "d")}, Thinking()),
            "<｜begin▁of▁sentence｜><｜User｜>d<｜Assistant｜><think>");
}

TEST(ChatTemplate, LatestReminder) {
  EXPECT_EQ(
      Render({Msg("system", "s"), Msg("latest_reminder", "Today is Monday."), Msg("user", "u")},
             ChatOptions()),
      "<｜begin▁of▁sentence｜>s<｜latest_reminder｜>Today is Monday.<｜User｜>u"
      "<｜Assistant｜></think>");
}

TEST(ChatTemplate, ResponseFormat) {
  ChatOptions opts;
  opts.response_format_json = R"({"type":"json_object","n":1.0})";
  const std::string rf =
      "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
      "{\"type\": \"json_object\", \"n\": 1.0}";
  EXPECT_EQ(Render({Msg("system", "s"), Msg("user", "u")}, opts),
            "<｜begin▁of▁sentence｜>s" + rf + "<｜User｜>u<｜Assistant｜></think>");
  EXPECT_EQ(Render({Msg("user", "u")}, opts),
            "<｜begin▁of▁sentence｜>" + rf + "<｜User｜>u<｜Assistant｜></think>");
  opts.tools_json = kToolsJson;  // tools first, then the response format
  EXPECT_EQ(Render({Msg("system", "s"), Msg("user", "u")}, opts),
            std::string("<｜begin▁of▁sentence｜>s\n\n") + kToolsBlock + rf +
                "<｜User｜>u<｜Assistant｜></think>");
}

TEST(ChatTemplate, NoGenerationPrompt) {
  ChatOptions opts;
  opts.add_generation_prompt = false;
  EXPECT_EQ(Render({Msg("user", "u")}, opts), "<｜begin▁of▁sentence｜><｜User｜>u");
}

TEST(ChatTemplate, SpansCoverExactlyTheMarkers) {
  auto r = RenderV4Chat({Msg("user", "a<｜User｜>b</think><think>｜DSML｜")}, Thinking());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(SpanTexts(*r), (std::vector<std::string>{"<｜begin▁of▁sentence｜>", "<｜User｜>",
                                                     "<｜Assistant｜>", "<think>"}));
  // The <｜User｜> marker span sits right after BOS, not inside the content.
  EXPECT_EQ(r->special_spans[1].first, std::string("<｜begin▁of▁sentence｜>").size());
}

TEST(ChatTemplate, SpansInToolsBlockAndToolCalls) {
  ChatMessage call = Msg("assistant", "", "r");
  call.tool_calls = {Call("c", "f", R"({"k": "v"})")};
  ChatOptions opts = Thinking();
  opts.tools_json = kToolsJson;
  auto r = RenderV4Chat({Msg("user", "u"), call}, opts);
  ASSERT_TRUE(r.ok());
  std::vector<std::string> want = {"<｜begin▁of▁sentence｜>"};
  for (int i = 0; i < 9; ++i) want.push_back("｜DSML｜");  // the format example
  for (const char* m : {"<think>", "<think>", "</think>", "</think>", "<｜User｜>",
                        "<｜Assistant｜>", "<think>", "</think>"}) {
    want.push_back(m);
  }
  for (int i = 0; i < 6; ++i) want.push_back("｜DSML｜");  // the call
  want.push_back("<｜end▁of▁sentence｜>");
  EXPECT_EQ(SpanTexts(*r), want);
  size_t prev_end = 0;
  for (auto [b, e] : r->special_spans) {
    EXPECT_LE(prev_end, b);
    EXPECT_LT(b, e);
    prev_end = e;
  }
}

TEST(ChatTemplate, SpecialTokenList) {
  std::vector<std::string> want = {"<｜begin▁of▁sentence｜>",
                                   "<｜end▁of▁sentence｜>",
                                   "<｜User｜>",
                                   "<｜Assistant｜>",
                                   "<｜latest_reminder｜>",
                                   "<think>",
                                   "</think>",
                                   "｜DSML｜"};
  EXPECT_EQ(V4ChatSpecialTokens(), want);
}

void ExpectInvalid(const std::vector<ChatMessage>& msgs, const ChatOptions& opts,
                   const std::string& needle) {
  auto r = RenderV4Chat(msgs, opts);
  ASSERT_FALSE(r.ok()) << needle;
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(ChatTemplate, Errors) {
  ExpectInvalid({Msg("wizard", "x")}, ChatOptions(), "unknown role");
  ExpectInvalid({Msg("user", "x"), ToolResult("c", "r")}, ChatOptions(), "tool result");
  ExpectInvalid({ToolResult("c", "r")}, ChatOptions(), "tool result");
  ExpectInvalid({Msg("developer", "")}, ChatOptions(), "developer");
  ChatMessage bad_call = Msg("assistant", "");
  bad_call.tool_calls = {Call("c", "f", "[1, 2]")};
  ExpectInvalid({Msg("user", "u"), bad_call}, ChatOptions(), "not a JSON object");
  bad_call.tool_calls = {Call("c", "", "{}")};
  ExpectInvalid({Msg("user", "u"), bad_call}, ChatOptions(), "without a name");
  ChatOptions opts;
  opts.tools_json = "[{";
  ExpectInvalid({Msg("user", "u")}, opts, "tools_json");
  opts.tools_json = R"({"type": "function"})";
  ExpectInvalid({Msg("user", "u")}, opts, "not an array");
  opts.tools_json = R"([{"type": "function"}])";
  ExpectInvalid({Msg("user", "u")}, opts, "function");
  opts = ChatOptions();
  opts.response_format_json = "[]";
  ExpectInvalid({Msg("user", "u")}, opts, "response_format");
  opts = Thinking();
  opts.reasoning_effort = "low";
  ExpectInvalid({Msg("user", "u")}, opts, "reasoning_effort");
  opts.thinking = false;
  opts.reasoning_effort = "max";
  ExpectInvalid({Msg("user", "u")}, opts, "thinking");
}

TEST(ChatTemplate, RoundTripToolCalls) {
  ChatMessage call = Msg("assistant", "Let me check.", "thinking about it");
  call.tool_calls = {Call("", "get_weather", R"({"city": "Paris \"FR\"\n", "days": 2})"),
                     Call("", "search", R"({"q": "x", "filters": {"a": [1, true, null]}})"),
                     Call("", "ping", "{}")};
  for (bool thinking : {false, true}) {
    ChatOptions opts;
    opts.thinking = thinking;
    auto r = RenderV4Chat({Msg("user", "u"), call}, opts);
    ASSERT_TRUE(r.ok());
    const std::string opener = thinking ? "<｜Assistant｜><think>" : "<｜Assistant｜></think>";
    const std::string generated = r->text.substr(r->text.find(opener) + opener.size());
    auto parsed = ParseV4Output(generated, thinking);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(parsed->content, "Let me check.");
    EXPECT_EQ(parsed->reasoning, thinking ? "thinking about it" : "");
    EXPECT_TRUE(parsed->saw_eos);
    ASSERT_EQ(parsed->tool_calls.size(), call.tool_calls.size());
    for (size_t i = 0; i < call.tool_calls.size(); ++i) {
      EXPECT_EQ(parsed->tool_calls[i].name, call.tool_calls[i].name);
      EXPECT_EQ(parsed->tool_calls[i].arguments_json, call.tool_calls[i].arguments_json);
    }
  }
}

}  // namespace
}  // namespace deepinfer
