// ParseChatCompletionRequest: every field, content parts, tool calls, the thinking extensions,
// and one test per validation error checking that the message names the field's path.
#include "engine/tokenizer/openai.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace deepinfer {
namespace {

ChatCompletionRequest ParseOk(const std::string& body, const ParseLimits& limits = {}) {
  Result<ChatCompletionRequest> r = ParseChatCompletionRequest(body, limits);
  EXPECT_TRUE(r.ok()) << r.status().ToString() << "\n" << body;
  return r.ok() ? std::move(r).value() : ChatCompletionRequest{};
}

// A body with one user message plus `extra` top-level members (`extra` starts with a comma).
std::string WithUser(const std::string& extra) {
  return R"({"model":"m","messages":[{"role":"user","content":"hi"}])" + extra + "}";
}

TEST(OpenAiRequest, EveryFieldOfARealisticRequest) {
  const std::string body = R"({
    "model": "deepseek-v4-flash",
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "developer", "content": "Search first."},
      {"role": "user", "content": "Weather in Paris?", "name": "ann"},
      {"role": "assistant", "content": null, "reasoning_content": "Need the tool.",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "18C"},
      {"role": "user", "content": "Thanks. And tomorrow?"}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
               "strict": true}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "parallel_tool_calls": false,
    "response_format": {"type": "json_schema", "json_schema": {"name": "w", "strict": true,
                        "schema": {"type": "object"}}},
    "thinking": {"type": "enabled"}, "reasoning_effort": "max",
    "stream": true, "stream_options": {"include_usage": true},
    "temperature": 0.6, "top_p": 0.95, "top_k": 40, "min_p": 0.05,
    "repetition_penalty": 1.1, "frequency_penalty": 0.5, "presence_penalty": -0.5,
    "seed": 1234, "logit_bias": {"100": -100, "7": 2.5}, "logprobs": true, "top_logprobs": 5,
    "n": 1, "max_tokens": 100, "max_completion_tokens": 200, "min_tokens": 3,
    "stop": ["\n\n", "END"], "stop_token_ids": [1, 2], "ignore_eos": true, "user": "u-42"
  })";
  ChatCompletionRequest r = ParseOk(body);
  EXPECT_EQ(r.model, "deepseek-v4-flash");
  EXPECT_EQ(r.user, "u-42");
  ASSERT_EQ(r.messages.size(), 6u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].role, "developer");
  EXPECT_EQ(r.messages[2].name, "ann");
  const ChatMessage& a = r.messages[3];
  EXPECT_EQ(a.role, "assistant");
  EXPECT_EQ(a.content, "");
  EXPECT_EQ(a.reasoning_content, "Need the tool.");
  ASSERT_EQ(a.tool_calls.size(), 1u);
  EXPECT_EQ(a.tool_calls[0].id, "call_1");
  EXPECT_EQ(a.tool_calls[0].name, "get_weather");
  EXPECT_EQ(a.tool_calls[0].arguments_json, R"({"city":"Paris"})");
  EXPECT_EQ(r.messages[4].role, "tool");
  EXPECT_EQ(r.messages[4].tool_call_id, "call_1");
  EXPECT_EQ(r.messages[4].name, "get_weather");
  EXPECT_EQ(r.messages[4].content, "18C");

  EXPECT_EQ(r.options.tools_json,
            R"([{"type":"function","function":{"name":"get_weather","description":"d",)"
            R"("parameters":{"type":"object","properties":{"city":{"type":"string"}}},)"
            R"("strict":true}}])");
  EXPECT_EQ(r.tool_names, std::vector<std::string>{"get_weather"});
  EXPECT_EQ(r.tool_choice.kind, ToolChoiceKind::kFunction);
  EXPECT_EQ(r.tool_choice.function_name, "get_weather");
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.response_format.kind, ResponseFormatKind::kJsonSchema);
  EXPECT_EQ(r.response_format.name, "w");
  EXPECT_TRUE(r.response_format.strict);
  EXPECT_EQ(r.response_format.schema_json, R"({"type":"object"})");
  EXPECT_EQ(r.options.response_format_json,
            R"({"type":"json_schema","json_schema":{"name":"w","strict":true,)"
            R"("schema":{"type":"object"}}})");
  EXPECT_TRUE(r.options.thinking);
  EXPECT_EQ(r.options.reasoning_effort, "max");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.stream_options.include_usage);

  const SamplingParams& s = r.sampling;
  EXPECT_FLOAT_EQ(s.temperature, 0.6f);
  EXPECT_FLOAT_EQ(s.top_p, 0.95f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(s.min_p, 0.05f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, 0.5f);
  EXPECT_FLOAT_EQ(s.presence_penalty, -0.5f);
  EXPECT_EQ(s.seed, 1234);
  EXPECT_EQ(s.logit_bias, (std::map<int, float>{{7, 2.5f}, {100, -100.0f}}));
  EXPECT_TRUE(s.logprobs);
  EXPECT_EQ(s.top_logprobs, 5);
  EXPECT_EQ(s.n, 1);
  EXPECT_EQ(s.max_tokens, 200);  // max_completion_tokens wins over max_tokens
  EXPECT_EQ(s.min_tokens, 3);
  EXPECT_EQ(s.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(s.stop_token_ids, (std::vector<int>{1, 2}));
  EXPECT_TRUE(s.ignore_eos);
}

TEST(OpenAiRequest, MinimalRequestGetsDefaults) {
  ChatCompletionRequest r = ParseOk(R"({"messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(r.model, "");
  EXPECT_EQ(r.tool_choice.kind, ToolChoiceKind::kNone);  // no tools
  EXPECT_EQ(r.options.tools_json, "");
  EXPECT_EQ(r.options.response_format_json, "");
  EXPECT_FALSE(r.options.thinking);
  EXPECT_FALSE(r.stream);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.sampling.top_k, -1);
  EXPECT_FALSE(r.sampling.seed.has_value());
  EXPECT_FALSE(r.sampling.max_tokens.has_value());
  EXPECT_TRUE(r.sampling.stop.empty());
}

TEST(OpenAiRequest, NullMeansAbsentAndSingleStopString) {
  ChatCompletionRequest r =
      ParseOk(WithUser(R"(,"temperature":null,"tools":null,"stop":"###","seed":null,"top_k":0)"));
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"###"});
  EXPECT_EQ(r.sampling.top_k, -1);  // 0 means off, stored as -1
}

TEST(OpenAiRequest, ContentPartsAreConcatenated) {
  ChatCompletionRequest r = ParseOk(R"({"messages":[{"role":"user","content":[
      {"type":"text","text":"Hello, "},{"type":"text","text":"world"},{"type":"text","text":"!"}]},
      {"role":"assistant","content":[{"type":"text","text":"Hi."}]}]})");
  EXPECT_EQ(r.messages[0].content, "Hello, world!");
  EXPECT_EQ(r.messages[1].content, "Hi.");
}

TEST(OpenAiRequest, ToolCallArgumentsForms) {
  ChatCompletionRequest r = ParseOk(R"({"messages":[{"role":"user","content":"x"},
      {"role":"assistant","tool_calls":[
        {"id":"a","type":"function","function":{"name":"f","arguments":""}},
        {"function":{"name":"g","arguments":{"k":[1,2]}}},
        {"id":"c","function":{"name":"mcp.h:x-y","arguments":" {\"q\": \"\\u00e9\"} "}}]},
      {"role":"tool","tool_call_id":"a","content":"1"}]})");
  const auto& calls = r.messages[1].tool_calls;
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].arguments_json, "{}");
  EXPECT_EQ(calls[1].id, "");  // kept empty; ids are the client's business on input
  EXPECT_EQ(calls[1].arguments_json, R"({"k":[1,2]})");
  EXPECT_EQ(calls[2].name, "mcp.h:x-y");
  EXPECT_EQ(calls[2].arguments_json, R"( {"q": "\u00e9"} )");  // the string as sent
}

TEST(OpenAiRequest, UnknownFieldsAreIgnored) {
  ChatCompletionRequest r = ParseOk(R"({"model":"m","metadata":{"a":1},"store":true,
      "service_tier":"auto","frequency":[1],"x-custom":{"deep":[null]},
      "messages":[{"role":"user","content":"hi","extra":1,"tool_calls":"ignored on users"}],
      "tools":[{"type":"function","extra":2,"function":{"name":"f","extra":3}}],
      "response_format":{"type":"json_object","extra":4},"stream_options":{"extra":5}})");
  EXPECT_EQ(r.messages.size(), 1u);
  EXPECT_TRUE(r.messages[0].tool_calls.empty());
  EXPECT_EQ(r.tool_names, std::vector<std::string>{"f"});
  EXPECT_EQ(r.tool_choice.kind, ToolChoiceKind::kAuto);
  EXPECT_EQ(r.response_format.kind, ResponseFormatKind::kJsonObject);
  EXPECT_EQ(r.options.response_format_json, R"({"type":"json_object","extra":4})");
}

TEST(OpenAiRequest, ResponseFormatExtensions) {
  ChatCompletionRequest r =
      ParseOk(WithUser(R"(,"response_format":{"type":"regex","regex":"\\d+"})"));
  EXPECT_EQ(r.response_format.kind, ResponseFormatKind::kRegex);
  EXPECT_EQ(r.response_format.pattern, "\\d+");
  EXPECT_EQ(r.options.response_format_json, R"({"type":"regex","regex":"\\d+"})");
  r = ParseOk(WithUser(R"(,"response_format":{"type":"grammar","grammar":"root ::= \"a\""})"));
  EXPECT_EQ(r.response_format.kind, ResponseFormatKind::kGrammar);
  EXPECT_EQ(r.response_format.pattern, "root ::= \"a\"");
  r = ParseOk(WithUser(R"(,"response_format":{"type":"text"})"));
  EXPECT_EQ(r.response_format.kind, ResponseFormatKind::kText);
  EXPECT_EQ(r.options.response_format_json, "");
}

TEST(OpenAiRequest, ToolChoiceForms) {
  const std::string tools = R"(,"tools":[{"type":"function","function":{"name":"f"}}])";
  EXPECT_EQ(ParseOk(WithUser(tools)).tool_choice.kind, ToolChoiceKind::kAuto);
  EXPECT_EQ(ParseOk(WithUser(tools + R"(,"tool_choice":"none")")).tool_choice.kind,
            ToolChoiceKind::kNone);
  EXPECT_EQ(ParseOk(WithUser(tools + R"(,"tool_choice":"required")")).tool_choice.kind,
            ToolChoiceKind::kRequired);
  EXPECT_EQ(ParseOk(WithUser(R"(,"tool_choice":"auto")")).tool_choice.kind,
            ToolChoiceKind::kNone);  // auto without tools
}

struct ThinkingCase {
  std::string extra;
  bool thinking;
  std::string effort;
};

TEST(OpenAiRequest, ThinkingExtensions) {
  const ThinkingCase cases[] = {
      {R"(,"thinking":true)", true, ""},
      {R"(,"thinking":{"type":"disabled"})", false, ""},
      {R"(,"reasoning":true)", true, ""},
      {R"(,"reasoning":{})", true, ""},
      {R"(,"reasoning":{"enabled":false,"effort":"high"})", false, ""},
      {R"(,"reasoning":{"effort":"max"})", true, "max"},
      {R"(,"chat_template_kwargs":{"thinking":true})", true, ""},
      {R"(,"chat_template_kwargs":{"enable_thinking":true,"reasoning_effort":"high"})", true,
       "high"},
      {R"(,"reasoning_effort":"high")", true, "high"},
      {R"(,"reasoning_effort":"medium")", true, ""},
      {R"(,"reasoning_effort":"none")", false, ""},
      {R"(,"reasoning_effort":"none","thinking":true)", true, ""},
      {R"(,"reasoning_effort":"max","thinking":false)", false, ""},
      {R"(,"thinking":true,"chat_template_kwargs":{"thinking":true})", true, ""},
  };
  for (const ThinkingCase& c : cases) {
    ChatCompletionRequest r = ParseOk(WithUser(c.extra));
    EXPECT_EQ(r.options.thinking, c.thinking) << c.extra;
    EXPECT_EQ(r.options.reasoning_effort, c.effort) << c.extra;
  }
}

struct ErrorCase {
  std::string body;
  std::string message;  // the expected message, or its start when it ends with "..."
};

TEST(OpenAiRequest, EachValidationErrorNamesThePath) {
  const std::string tools = R"(,"tools":[{"type":"function","function":{"name":"f"}}])";
  const ErrorCase cases[] = {
      {"", "body: invalid JSON..."},
      {"[1]", "body: expected a JSON object, got an array"},
      {"{}", "messages: required"},
      {R"({"messages":[]})", "messages: must not be empty"},
      {R"({"messages":{}})", "messages: expected an array, got an object"},
      {R"({"messages":[1]})", "messages[0]: expected a message object, got a number"},
      {R"({"messages":[{"content":"x"}]})", "messages[0].role: required"},
      {R"({"messages":[{"role":"bot","content":"x"}]})", "messages[0].role: must be one of..."},
      {R"({"messages":[{"role":"user"}]})", "messages[0].content: required for role 'user'"},
      {R"({"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},
          {"role":"user","content":7}]})",
       "messages[2].content: expected a string or an array of content parts, got a number"},
      {R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},
          {"type":"image_url","image_url":{"url":"http://x"}}]}]})",
       "messages[0].content[1]: content part type 'image_url' is not supported (text only)"},
      {R"({"messages":[{"role":"user","content":[{"type":"blob"}]}]})",
       "messages[0].content[0].type: unknown content part type 'blob'"},
      {R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})",
       "messages[0].content[0].text: required"},
      {R"({"messages":[{"role":"tool","content":"x"}]})", "messages[0].tool_call_id: required"},
      {R"({"messages":[{"role":"assistant","tool_calls":[{"type":"fn","function":{"name":"f"}}]}]})",
       "messages[0].tool_calls[0].type: must be 'function', got 'fn'"},
      {R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"[1]"}}]}]})",
       "messages[0].tool_calls[0].function.arguments: must be a JSON object encoded as a string"},
      {R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"a\"b"}}]}]})",
       "messages[0].tool_calls[0].function.name: 'a\"b' has characters outside [A-Za-z0-9_.:-]"},
      {R"({"messages":[{"role":"assistant","reasoning_content":1}]})",
       "messages[0].reasoning_content: expected a string, got a number"},
      {WithUser(R"(,"tools":[{"function":{"name":"f"}}])"), "tools[0].type: required"},
      {WithUser(R"(,"tools":[{"type":"function"}])"), "tools[0].function: required"},
      {WithUser(R"(,"tools":[{"type":"function","function":{"name":""}}])"),
       "tools[0].function.name: must not be empty"},
      {WithUser(R"(,"tools":0)"), "tools: expected an array, got a number"},
      {WithUser(R"(,"tools":[{"type":"function","function":{"name":"f"}},)"
                R"({"type":"function","function":{"name":"f"}}])"),
       "tools[1].function.name: duplicate tool name 'f'"},
      {WithUser(R"(,"tools":[{"type":"function","function":{"name":"f","parameters":[]}}])"),
       "tools[0].function.parameters: expected a JSON Schema object, got an array"},
      {WithUser(R"(,"tool_choice":"required")"), "tool_choice: 'required' needs tools"},
      {WithUser(tools + R"(,"tool_choice":"sometimes")"), "tool_choice: must be 'auto',..."},
      {WithUser(tools + R"(,"tool_choice":{"type":"function","function":{"name":"g"}})"),
       "tool_choice.function.name: no tool named 'g' in tools"},
      {WithUser(R"(,"response_format":{"type":"xml"})"), "response_format.type: must be one of..."},
      {WithUser(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x"}})"),
       "response_format.json_schema.schema: required"},
      {WithUser(R"(,"response_format":{"type":"regex"})"), "response_format.regex: required"},
      {WithUser(R"(,"thinking":"yes")"), "thinking: expected a boolean or an object, got a string"},
      {WithUser(R"(,"thinking":{"type":"on"})"), "thinking.type: must be 'enabled' or..."},
      {WithUser(R"(,"thinking":true,"chat_template_kwargs":{"thinking":false})"),
       "chat_template_kwargs.thinking: conflicts with thinking"},
      {WithUser(R"(,"reasoning_effort":"extreme")"), "reasoning_effort: must be one of..."},
      {WithUser(R"(,"reasoning":{"effort":"high"},"reasoning_effort":"max")"),
       "reasoning_effort: conflicts with reasoning.effort"},
      {WithUser(R"(,"temperature":3.5)"), "temperature: must be in [0, 2], got 3.5"},
      {WithUser(R"(,"temperature":"hot")"), "temperature: expected a number, got a string"},
      {WithUser(R"(,"top_p":0)"), "top_p: must be in (0, 1], got 0"},
      {WithUser(R"(,"top_k":-2)"), "top_k: must be in [-1, 2147483647], got -2"},
      {WithUser(R"(,"top_k":1.5)"), "top_k: expected an integer, got 1.5"},
      {WithUser(R"(,"min_p":1.5)"), "min_p: must be in [0, 1], got 1.5"},
      {WithUser(R"(,"repetition_penalty":0)"), "repetition_penalty: must be in (0, 2], got 0"},
      {WithUser(R"(,"frequency_penalty":-2.5)"), "frequency_penalty: must be in [-2, 2], got -2.5"},
      {WithUser(R"(,"presence_penalty":2.01)"), "presence_penalty: must be in [-2, 2], got 2.01"},
      {WithUser(R"(,"seed":18446744073709551615)"),
       "seed: integer out of range, got 18446744073709551615"},
      {WithUser(R"(,"max_tokens":0)"), "max_tokens: must be at least 1, got 0"},
      {WithUser(R"(,"max_completion_tokens":-1)"),
       "max_completion_tokens: must be at least 1, got -1"},
      {WithUser(R"(,"max_tokens":5,"min_tokens":6)"),
       "min_tokens: must not exceed max_tokens (5), got 6"},
      {WithUser(R"(,"n":2)"), "n: only n = 1 is supported, got 2"},
      {WithUser(R"(,"logprobs":1)"), "logprobs: expected a boolean, got a number"},
      {WithUser(R"(,"logprobs":true,"top_logprobs":21)"),
       "top_logprobs: must be in [0, 20], got 21"},
      {WithUser(R"(,"top_logprobs":2)"), "top_logprobs: requires logprobs to be true"},
      {WithUser(R"(,"logit_bias":{"abc":1})"),
       "logit_bias.abc: key must be a token id (a decimal integer string)"},
      {WithUser(R"(,"logit_bias":{"-5":1})"), "logit_bias.-5: key must be a token id..."},
      {WithUser(R"(,"logit_bias":{"12":101})"), "logit_bias.12: must be in [-100, 100], got 101"},
      {WithUser(R"(,"logit_bias":{"12":"x"})"), "logit_bias.12: expected a number, got a string"},
      {WithUser(R"(,"stop":7)"), "stop: expected a string or an array of strings, got a number"},
      {WithUser(R"(,"stop":["a",""])"), "stop[1]: must not be empty"},
      {WithUser(R"(,"stop":["a",3])"), "stop[1]: expected a string, got a number"},
      {WithUser(R"(,"stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15",)"
                R"("16","17"])"),
       "stop: at most 16 stop strings, got 17"},
      {WithUser(R"(,"stop_token_ids":[1,-1])"),
       "stop_token_ids[1]: token id -1 is outside [0, 2147483647)"},
      {WithUser(R"(,"stream":"yes")"), "stream: expected a boolean, got a string"},
      {WithUser(R"(,"stream_options":{"include_usage":1})"),
       "stream_options.include_usage: expected a boolean, got a number"},
      {R"({"model":5,"messages":[{"role":"user","content":"x"}]})",
       "model: expected a string, got a number"},
  };
  for (const ErrorCase& c : cases) {
    Result<ChatCompletionRequest> r = ParseChatCompletionRequest(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << c.body;
    const std::string& msg = r.status().message();
    if (c.message.ends_with("...")) {
      EXPECT_TRUE(msg.starts_with(c.message.substr(0, c.message.size() - 3)))
          << msg << "\nexpected start: " << c.message;
    } else {
      EXPECT_EQ(msg, c.message) << c.body;
    }
  }
}

TEST(OpenAiRequest, LimitsAreConfigurable) {
  ParseLimits limits;
  limits.max_messages = 2;
  limits.vocab_size = 1000;
  limits.max_tokens = 4096;
  limits.max_stop = 1;
  auto error = [&](const std::string& body) {
    Result<ChatCompletionRequest> r = ParseChatCompletionRequest(body, limits);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(error(WithUser(R"(,"logit_bias":{"999":1})")), "ok");
  EXPECT_EQ(error(WithUser(R"(,"logit_bias":{"1000":1})")),
            "logit_bias.1000: token id 1000 is outside [0, 1000)");
  EXPECT_EQ(error(WithUser(R"(,"max_tokens":4097)")), "max_tokens: must be in [1, 4096], got 4097");
  EXPECT_EQ(error(WithUser(R"(,"stop":["a","b"])")), "stop: at most 1 stop strings, got 2");
  const std::string three = R"({"messages":[{"role":"user","content":"a"},)"
                            R"({"role":"assistant","content":"b"},{"role":"user","content":"c"}]})";
  EXPECT_EQ(error(three), "messages: 3 messages exceed the limit of 2");
  limits.max_body_bytes = 16;
  EXPECT_EQ(error(WithUser("")),
            "body: " + std::to_string(WithUser("").size()) + " bytes exceed the limit of 16");
}

}  // namespace
}  // namespace deepinfer
