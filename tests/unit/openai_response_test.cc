// The output side: chat.completion and chat.completion.chunk objects parsed back with simdjson
// and checked field by field, JSON string escaping, numbers, errors and tool-call ids.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/common/json_writer.h"
#include "engine/tokenizer/openai.h"

namespace deepinfer {
namespace {

using simdjson::dom::element;

// Parses JSON output; the parser must outlive the elements read from it.
class Doc {
 public:
  explicit Doc(const std::string& json) {
    EXPECT_EQ(parser_.parse(json).get(root_), simdjson::SUCCESS) << json;
  }
  // The element at a JSON pointer ("/choices/0/delta/content"), failing the test if missing.
  element At(std::string_view pointer) const {
    element e;
    EXPECT_EQ(root_.at_pointer(pointer).get(e), simdjson::SUCCESS) << pointer;
    return e;
  }
  bool Has(std::string_view pointer) const {
    element e;
    return root_.at_pointer(pointer).get(e) == simdjson::SUCCESS;
  }
  std::string Str(std::string_view pointer) const {
    std::string_view s;
    EXPECT_EQ(At(pointer).get_string().get(s), simdjson::SUCCESS) << pointer;
    return std::string(s);
  }
  int64_t Int(std::string_view pointer) const {
    int64_t v = -1;
    EXPECT_EQ(At(pointer).get_int64().get(v), simdjson::SUCCESS) << pointer;
    return v;
  }
  double Dbl(std::string_view pointer) const {
    double v = 0;
    EXPECT_EQ(At(pointer).get_double().get(v), simdjson::SUCCESS) << pointer;
    return v;
  }
  bool IsNull(std::string_view pointer) const { return Has(pointer) && At(pointer).is_null(); }
  size_t Size(std::string_view pointer) const {
    simdjson::dom::array a;
    EXPECT_EQ(At(pointer).get_array().get(a), simdjson::SUCCESS) << pointer;
    return a.size();
  }

 private:
  simdjson::dom::parser parser_;
  element root_;
};

std::string Quote(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

// What simdjson reads back from the escaped text.
std::string Unquote(const std::string& json) {
  simdjson::dom::parser parser;
  std::string_view s;
  EXPECT_EQ(parser.parse(json).get_string().get(s), simdjson::SUCCESS) << json;
  return std::string(s);
}

TEST(OpenAiJson, EscapesControlCharactersQuotesAndBackslash) {
  const std::string raw("q\"b\\s/\n\t\r\b\f\x01\x1f\x7f end\0z", 20);
  const std::string quoted = Quote(raw);
  EXPECT_EQ(quoted, R"("q\"b\\s/\n\t\r\b\f\u0001\u001f)"
                    "\x7f"
                    R"( end\u0000z")");
  EXPECT_EQ(Unquote(quoted), raw);
}

TEST(OpenAiJson, UnicodePassesThrough) {
  // é € 😀 中 and U+2028 (valid in JSON text; JSON.stringify leaves it too)
  const std::string text = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xE4\xB8\xAD \xE2\x80\xA8";
  EXPECT_EQ(Quote(text), "\"" + text + "\"");
  EXPECT_EQ(Unquote(Quote(text)), text);
}

TEST(OpenAiJson, InvalidUtf8BecomesReplacementCharacters) {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  const std::pair<std::string, std::string> cases[] = {
      {"\x80", r},                           // stray continuation byte
      {"a\xC3", "a" + r},                    // truncated at the end
      {"\xE2\x82x", r + "x"},                // truncated 3-byte sequence: one U+FFFD
      {"\xF0\x9F\x98", r},                   // truncated 4-byte sequence
      {"\xC0\xAF", r + r},                   // overlong '/'
      {"\xE0\x80\xAF", r + r + r},           // overlong, 3 bytes
      {"\xED\xA0\x80", r + r + r},           // a UTF-16 surrogate
      {"\xF4\x90\x80\x80", r + r + r + r},   // above U+10FFFF
      {"\xFF\xFE", r + r},                   // never valid
      {"ok\xC3\xA9\xA9", "ok\xC3\xA9" + r},  // a valid character, then a stray byte
  };
  for (const auto& [in, want] : cases) {
    const std::string quoted = Quote(in);
    EXPECT_EQ(quoted, "\"" + want + "\"") << testing::PrintToString(in);
    EXPECT_EQ(Unquote(quoted), want);  // and simdjson (which validates UTF-8) accepts it
  }
}

TEST(OpenAiJson, RandomBytesAlwaysGiveValidJson) {
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string bytes(rng() % 24, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 2 ? 0x80 + rng() % 0x80 : rng() % 0x100);
    const std::string quoted = Quote(bytes);
    simdjson::dom::parser parser;
    std::string_view s;
    ASSERT_EQ(parser.parse(quoted).get_string().get(s), simdjson::SUCCESS) << quoted;
    if (s.find("\xEF\xBF\xBD") == std::string_view::npos) {
      EXPECT_EQ(s, bytes);  // nothing replaced: the bytes were valid UTF-8 and come back as is
    }
  }
}

TEST(OpenAiJson, NumbersRoundTrip) {
  std::mt19937_64 rng(42);
  std::vector<double> doubles = {0.1,  1.0 / 3, 5e-324, 1.7976931348623157e308, -2.5,
                                 1e21, 0,       2,      33935263963869904896.0, -1e17};
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    if (std::isfinite(d)) doubles.push_back(d);
  }
  for (double d : doubles) {
    std::string s;
    AppendJsonNumber(&s, d);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), d) << s;
    EXPECT_EQ(Doc("[" + s + "]").Dbl("/0"), d) << s;  // simdjson agrees and accepts the text
  }
  std::string f;
  AppendJsonNumber(&f, 0.1f);
  EXPECT_EQ(f, "0.1");  // shortest float text, not 0.10000000149011612
  for (int i = 0; i < 2000; ++i) {
    float v = std::uniform_real_distribution<float>(-30.0f, 0.0f)(rng);
    std::string s;
    AppendJsonNumber(&s, v);
    EXPECT_EQ(std::strtof(s.c_str(), nullptr), v) << s;
  }
  std::string special;
  AppendJsonNumber(&special, std::numeric_limits<double>::infinity());
  AppendJsonNumber(&special, std::nan(""));
  AppendJsonNumber(&special, int64_t{-9007199254740993});
  EXPECT_EQ(special, "nullnull-9007199254740993");
}

ChatCompletion SampleCompletion() {
  ChatCompletion c;
  c.id = "chatcmpl-7";
  c.created = 1700000000;
  c.model = "deepseek-v4-flash";
  c.system_fingerprint = "fp_1";
  c.reasoning_content = "The user wants \"weather\".";
  c.tool_calls = {{"", "get_weather", R"({"city":"Paris"})"},
                  {"call_given", "get_time", R"({"tz":"Europe/Paris","h":[1,2]})"}};
  c.finish_reason = FinishReason::kToolCalls;
  c.usage.prompt_tokens = 120;
  c.usage.completion_tokens = 30;
  c.usage.cached_tokens = 64;
  c.usage.reasoning_tokens = 12;
  return c;
}

TEST(OpenAiResponse, CompletionFieldByField) {
  const ChatCompletion c = SampleCompletion();
  Doc d(ChatCompletionResponseJson(c));
  EXPECT_EQ(d.Str("/id"), "chatcmpl-7");
  EXPECT_EQ(d.Str("/object"), "chat.completion");
  EXPECT_EQ(d.Int("/created"), 1700000000);
  EXPECT_EQ(d.Str("/model"), "deepseek-v4-flash");
  EXPECT_EQ(d.Str("/system_fingerprint"), "fp_1");
  EXPECT_EQ(d.Size("/choices"), 1u);
  EXPECT_EQ(d.Int("/choices/0/index"), 0);
  EXPECT_EQ(d.Str("/choices/0/message/role"), "assistant");
  EXPECT_TRUE(d.IsNull("/choices/0/message/content"));  // tool calls and no text
  EXPECT_EQ(d.Str("/choices/0/message/reasoning_content"), c.reasoning_content);
  EXPECT_EQ(d.Size("/choices/0/message/tool_calls"), 2u);
  EXPECT_EQ(d.Str("/choices/0/message/tool_calls/0/id"), MakeToolCallId("chatcmpl-7", 0));
  EXPECT_EQ(d.Str("/choices/0/message/tool_calls/0/type"), "function");
  EXPECT_EQ(d.Str("/choices/0/message/tool_calls/0/function/name"), "get_weather");
  EXPECT_EQ(d.Str("/choices/0/message/tool_calls/0/function/arguments"), R"({"city":"Paris"})");
  EXPECT_EQ(d.Str("/choices/0/message/tool_calls/1/id"), "call_given");
  EXPECT_TRUE(d.IsNull("/choices/0/logprobs"));
  EXPECT_EQ(d.Str("/choices/0/finish_reason"), "tool_calls");
  EXPECT_EQ(d.Int("/usage/prompt_tokens"), 120);
  EXPECT_EQ(d.Int("/usage/completion_tokens"), 30);
  EXPECT_EQ(d.Int("/usage/total_tokens"), 150);
  EXPECT_EQ(d.Int("/usage/prompt_tokens_details/cached_tokens"), 64);
  EXPECT_EQ(d.Int("/usage/completion_tokens_details/reasoning_tokens"), 12);
}

TEST(OpenAiResponse, PlainTextAnswerOmitsOptionalFields) {
  ChatCompletion c;
  c.id = "chatcmpl-1";
  c.content = "Hello \"you\"\n\xF0\x9F\x91\x8B";
  c.finish_reason = FinishReason::kLength;
  Doc d(ChatCompletionResponseJson(c));
  EXPECT_EQ(d.Str("/choices/0/message/content"), c.content);
  EXPECT_FALSE(d.Has("/choices/0/message/reasoning_content"));
  EXPECT_FALSE(d.Has("/choices/0/message/tool_calls"));
  EXPECT_FALSE(d.Has("/system_fingerprint"));
  EXPECT_FALSE(d.Has("/usage/prompt_tokens_details"));
  EXPECT_EQ(d.Str("/choices/0/finish_reason"), "length");
}

TEST(OpenAiResponse, ToolCallsRoundTripThroughARequest) {
  const ChatCompletion c = SampleCompletion();
  Doc d(ChatCompletionResponseJson(c));
  const std::string message = simdjson::minify(d.At("/choices/0/message"));
  const std::string body = R"({"messages":[{"role":"user","content":"q"},)" + message +
                           R"(,{"role":"tool","tool_call_id":"x","content":"18C"}]})";
  Result<ChatCompletionRequest> r = ParseChatCompletionRequest(body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ChatMessage& m = r->messages[1];
  EXPECT_EQ(m.role, "assistant");
  EXPECT_EQ(m.content, "");
  EXPECT_EQ(m.reasoning_content, c.reasoning_content);
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].id, MakeToolCallId(c.id, 0));
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(m.tool_calls[i].name, c.tool_calls[i].name);
    EXPECT_EQ(m.tool_calls[i].arguments_json, c.tool_calls[i].arguments_json);
  }
  EXPECT_EQ(m.tool_calls[1].id, "call_given");
}

TEST(OpenAiResponse, LogprobsWithPartialBytesAndMinusInfinity) {
  ChatCompletion c;
  c.content = "\xE2\x82";
  c.logprobs = std::vector<TokenLogprob>{
      {"\xE2\x82", -std::numeric_limits<float>::infinity(), {{"\xE2\x82", -0.25f}, {"a", -3.5f}}}};
  Doc d(ChatCompletionResponseJson(c));
  EXPECT_EQ(d.Str("/choices/0/logprobs/content/0/token"), "\xEF\xBF\xBD");
  EXPECT_EQ(d.Dbl("/choices/0/logprobs/content/0/logprob"), -9999.0);
  EXPECT_EQ(d.Size("/choices/0/logprobs/content/0/bytes"), 2u);
  EXPECT_EQ(d.Int("/choices/0/logprobs/content/0/bytes/0"), 0xE2);
  EXPECT_EQ(d.Int("/choices/0/logprobs/content/0/bytes/1"), 0x82);
  EXPECT_EQ(d.Dbl("/choices/0/logprobs/content/0/top_logprobs/0/logprob"), -0.25);
  EXPECT_EQ(d.Str("/choices/0/logprobs/content/0/top_logprobs/1/token"), "a");
  EXPECT_EQ(d.Int("/choices/0/logprobs/content/0/top_logprobs/1/bytes/0"), 'a');
}

TEST(OpenAiResponse, StreamingChunkSequence) {
  CompletionChunk base;
  base.id = "chatcmpl-9";
  base.created = 1700000001;
  base.model = "m";
  std::vector<CompletionChunk> chunks(8, base);
  chunks[0].role = true;
  chunks[1].reasoning_content = "Think.";
  chunks[2].content = "Hel";
  chunks[3].content = "lo\n";
  chunks[4].tool_calls = {{0, "", "get_weather", R"({"ci)"}};
  chunks[5].tool_calls = {{0, "", "", R"(ty":"Paris"})"}, {1, "call_b", "f", ""}};
  chunks[6].finish_reason = FinishReason::kToolCalls;
  chunks[6].usage = Usage{10, 7, std::nullopt, std::nullopt};
  chunks[7].usage_only = true;
  chunks[7].usage = Usage{10, 7, 4, std::nullopt};

  std::string content, arguments;
  for (size_t i = 0; i < chunks.size(); ++i) {
    SCOPED_TRACE(i);
    Doc d(ChatCompletionChunkJson(chunks[i]));
    EXPECT_EQ(d.Str("/id"), "chatcmpl-9");
    EXPECT_EQ(d.Str("/object"), "chat.completion.chunk");
    EXPECT_EQ(d.Int("/created"), 1700000001);
    EXPECT_EQ(d.Str("/model"), "m");
    if (i == 7) {
      EXPECT_EQ(d.Size("/choices"), 0u);
      EXPECT_EQ(d.Int("/usage/total_tokens"), 17);
      EXPECT_EQ(d.Int("/usage/prompt_tokens_details/cached_tokens"), 4);
      continue;
    }
    EXPECT_EQ(d.Size("/choices"), 1u);
    EXPECT_EQ(d.Int("/choices/0/index"), 0);
    EXPECT_EQ(d.Has("/choices/0/delta/role"), i == 0);
    if (d.Has("/choices/0/delta/content")) content += d.Str("/choices/0/delta/content");
    EXPECT_EQ(d.Has("/choices/0/delta/reasoning_content"), i == 1);
    EXPECT_EQ(d.Has("/choices/0/delta/tool_calls"), i == 4 || i == 5);
    EXPECT_EQ(d.IsNull("/choices/0/finish_reason"), i != 6);
    EXPECT_EQ(d.Has("/usage"), i == 6);
  }
  EXPECT_EQ(content, "Hello\n");

  Doc role(ChatCompletionChunkJson(chunks[0]));
  EXPECT_EQ(role.Str("/choices/0/delta/role"), "assistant");
  EXPECT_EQ(role.Str("/choices/0/delta/content"), "");
  EXPECT_EQ(Doc(ChatCompletionChunkJson(chunks[1])).Str("/choices/0/delta/reasoning_content"),
            "Think.");
  Doc first(ChatCompletionChunkJson(chunks[4]));
  EXPECT_EQ(first.Int("/choices/0/delta/tool_calls/0/index"), 0);
  EXPECT_EQ(first.Str("/choices/0/delta/tool_calls/0/id"), MakeToolCallId("chatcmpl-9", 0));
  EXPECT_EQ(first.Str("/choices/0/delta/tool_calls/0/type"), "function");
  EXPECT_EQ(first.Str("/choices/0/delta/tool_calls/0/function/name"), "get_weather");
  arguments += first.Str("/choices/0/delta/tool_calls/0/function/arguments");
  Doc more(ChatCompletionChunkJson(chunks[5]));
  EXPECT_FALSE(more.Has("/choices/0/delta/tool_calls/0/id"));
  EXPECT_FALSE(more.Has("/choices/0/delta/tool_calls/0/type"));
  EXPECT_FALSE(more.Has("/choices/0/delta/tool_calls/0/function/name"));
  arguments += more.Str("/choices/0/delta/tool_calls/0/function/arguments");
  EXPECT_EQ(arguments, R"({"city":"Paris"})");
  EXPECT_EQ(more.Int("/choices/0/delta/tool_calls/1/index"), 1);
  EXPECT_EQ(more.Str("/choices/0/delta/tool_calls/1/id"), "call_b");
  EXPECT_EQ(more.Str("/choices/0/delta/tool_calls/1/function/arguments"), "");
  Doc last(ChatCompletionChunkJson(chunks[6]));
  EXPECT_EQ(last.Str("/choices/0/finish_reason"), "tool_calls");
  EXPECT_EQ(last.Int("/usage/prompt_tokens"), 10);
  EXPECT_EQ(last.Int("/usage/completion_tokens"), 7);
  EXPECT_EQ(last.Int("/usage/total_tokens"), 17);
  EXPECT_FALSE(last.Has("/usage/prompt_tokens_details"));
  EXPECT_EQ(SseEvent("{}"), "data: {}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(OpenAiResponse, FinishReasonNames) {
  EXPECT_EQ(FinishReasonName(FinishReason::kNone), nullptr);
  EXPECT_STREQ(FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_STREQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_STREQ(FinishReasonName(FinishReason::kToolCalls), "tool_calls");
  EXPECT_STREQ(FinishReasonName(FinishReason::kContentFilter), "content_filter");
  EXPECT_STREQ(FinishReasonName(FinishReason::kError), "error");
  EXPECT_STREQ(FinishReasonName(FinishReason::kAbort), "abort");
}

TEST(OpenAiResponse, ErrorObjects) {
  Doc bad(ErrorResponseJson(InvalidArgument("messages[2].content: expected a string, got 1")));
  EXPECT_EQ(bad.Str("/error/message"), "messages[2].content: expected a string, got 1");
  EXPECT_EQ(bad.Str("/error/type"), "invalid_request_error");
  EXPECT_EQ(bad.Str("/error/param"), "messages[2].content");
  EXPECT_EQ(bad.Str("/error/code"), "invalid_argument");
  Doc body(ErrorResponseJson(InvalidArgument("body: invalid JSON (x)")));
  EXPECT_TRUE(body.IsNull("/error/param"));
  Doc internal(ErrorResponseJson(Internal("step failed: \"oops\"")));
  EXPECT_EQ(internal.Str("/error/type"), "server_error");
  EXPECT_TRUE(internal.IsNull("/error/param"));
  EXPECT_EQ(internal.Str("/error/message"), "step failed: \"oops\"");
}

TEST(OpenAiResponse, ToolCallIdsAreDeterministicAndDistinct) {
  const std::string id = MakeToolCallId("chatcmpl-1", 0);
  EXPECT_EQ(id.size(), 29u);
  EXPECT_TRUE(id.starts_with("call_"));
  EXPECT_EQ(id, MakeToolCallId("chatcmpl-1", 0));
  EXPECT_NE(id, MakeToolCallId("chatcmpl-1", 1));
  EXPECT_NE(id, MakeToolCallId("chatcmpl-2", 0));
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef", 5), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
