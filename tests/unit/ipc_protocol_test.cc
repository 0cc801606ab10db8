// ParseRequest: every request type, every field's validation, and request round trips.
#include <gtest/gtest.h>

#include <string>

#include "ipc/protocol.h"

namespace deepinfer::ipc {
namespace {

RequestLimits Limits() {
  RequestLimits l;
  l.vocab_size = 1000;
  l.max_tokens = 4096;
  return l;
}

GenerateRequest Gen(const std::string& json) {
  Result<Request> r = ParseRequest(json, Limits());
  EXPECT_TRUE(r.ok()) << json << " -> " << r.status().ToString();
  if (!r.ok() || !std::holds_alternative<GenerateRequest>(*r)) return {};
  return std::get<GenerateRequest>(*r);
}

// The error message of parsing `json`, which must fail with `code`.
std::string Err(const std::string& json, ErrorCode code = ErrorCode::kInvalidArgument,
                const RequestLimits& limits = Limits()) {
  Result<Request> r = ParseRequest(json, limits);
  EXPECT_FALSE(r.ok()) << json;
  EXPECT_EQ(r.status().code(), code) << json << " -> " << r.status().ToString();
  return r.status().message();
}

std::string G(const std::string& fields) {
  return R"({"op":"generate","id":7,"prompt":"hi")" + (fields.empty() ? "" : "," + fields) + "}";
}

TEST(ParseRequestTest, Hello) {
  auto r = ParseRequest(R"({"op":"hello","protocol":1,"client":"deepinfer 0.1"})", Limits());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::get<Hello>(*r), (Hello{1, "deepinfer 0.1"}));
  // Another version parses (the server answers version_mismatch); the name is optional.
  r = ParseRequest(R"({"op":"hello","protocol":2})", Limits());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::get<Hello>(*r).protocol, 2);
  EXPECT_EQ(Err(R"({"op":"hello"})"), "protocol: required");
  EXPECT_EQ(Err(R"({"op":"hello","protocol":"1"})"), "protocol: expected an integer, got a string");
  RequestLimits l = Limits();
  l.max_client_name_bytes = 3;
  EXPECT_EQ(Err(R"({"op":"hello","protocol":1,"client":"abcd"})", ErrorCode::kInvalidArgument, l),
            "client: longer than 3 bytes (4)");
}

TEST(ParseRequestTest, SmallRequests) {
  auto r = ParseRequest(R"({"op":"cancel","id":18446744073709551615})", Limits());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::get<CancelRequest>(*r).id, 18446744073709551615u);
  EXPECT_TRUE(std::holds_alternative<StatusRequest>(*ParseRequest(R"({"op":"status"})", Limits())));
  EXPECT_TRUE(std::holds_alternative<HealthRequest>(
      *ParseRequest(R"({"x":[1,{}],"op":"health","y":null})", Limits())));
  EXPECT_EQ(Err(R"({"op":"cancel"})"), "id: required");
  EXPECT_EQ(Err(R"({"op":"cancel","id":-1})"), "id: must be >= 0, got -1");
  EXPECT_EQ(Err(R"({"op":"cancel","id":1.5})"), "id: expected an integer, got a fractional number");
}

TEST(ParseRequestTest, BodyThatIsNotAnObjectIsDataLoss) {
  EXPECT_EQ(Err("[1]", ErrorCode::kDataLoss), "body: expected a JSON object, got an array");
  Err("{", ErrorCode::kDataLoss);
  Err("", ErrorCode::kDataLoss);
  Err(R"({"op":"health"} x)", ErrorCode::kDataLoss);
  Err("{\"op\":\"\xff\"}", ErrorCode::kDataLoss);  // invalid UTF-8 is not JSON
}

TEST(ParseRequestTest, OpIsRequiredAndMustBeKnown) {
  EXPECT_EQ(Err("{}"), "op: required");
  EXPECT_EQ(Err(R"({"op":3})"), "op: expected a string, got an integer");
  EXPECT_EQ(Err(R"({"op":"launch"})"), "op: unknown operation \"launch\"");
  EXPECT_EQ(Err(R"({"op":"accepted","id":1})"), "op: unknown operation \"accepted\"");
}

TEST(ParseRequestTest, GenerateDefaults) {
  GenerateRequest g = Gen(G(""));
  EXPECT_EQ(g.id, 7u);
  EXPECT_EQ(g.prompt_kind, PromptKind::kText);
  EXPECT_EQ(g.prompt, "hi");
  EXPECT_FALSE(g.max_tokens.has_value());
  EXPECT_EQ(g.temperature, 1.0);
  EXPECT_EQ(g.top_p, 1.0);
  EXPECT_EQ(g.top_k, -1);
  EXPECT_EQ(g.min_p, 0.0);
  EXPECT_FALSE(g.seed.has_value());
  EXPECT_TRUE(g.stop.empty() && g.stop_ids.empty() && g.response_format_json.empty());
  EXPECT_FALSE(g.logprobs);
  EXPECT_EQ(g.top_logprobs, 0);
  EXPECT_EQ(Gen(G(R"("top_k":null,"seed":null)")), g);  // null is absent
}

TEST(ParseRequestTest, GenerateAllFields) {
  GenerateRequest g = Gen(G(R"("max_tokens":16,"temperature":0,"top_p":0.5,"top_k":40,)"
                            R"("min_p":0.05,"seed":18446744073709551615,"stop":["\n\n","END"],)"
                            R"("stop_ids":[0,999],"response_format":{"type": "json_object"},)"
                            R"("logprobs":true,"top_logprobs":5)"));
  EXPECT_EQ(g.max_tokens, 16);
  EXPECT_EQ(g.temperature, 0.0);
  EXPECT_EQ(g.top_p, 0.5);
  EXPECT_EQ(g.top_k, 40);
  EXPECT_EQ(g.min_p, 0.05);
  EXPECT_EQ(g.seed, 18446744073709551615u);
  EXPECT_EQ(g.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(g.stop_ids, (std::vector<int32_t>{0, 999}));
  EXPECT_EQ(g.response_format_json, R"({"type":"json_object"})");
  EXPECT_TRUE(g.logprobs);
  EXPECT_EQ(g.top_logprobs, 5);
  EXPECT_EQ(Gen(G(R"("top_k":0)")).top_k, -1);
}

TEST(ParseRequestTest, PromptKinds) {
  GenerateRequest m =
      Gen(R"({"op":"generate","id":1,"messages":[ {"role":"user", "content":"é"} ]})");
  EXPECT_EQ(m.prompt_kind, PromptKind::kMessages);
  EXPECT_EQ(m.messages_json, R"([{"role":"user","content":"é"}])");
  GenerateRequest ids = Gen(R"({"op":"generate","id":1,"prompt_ids":[0,5,999]})");
  EXPECT_EQ(ids.prompt_kind, PromptKind::kIds);
  EXPECT_EQ(ids.prompt_ids, (std::vector<int32_t>{0, 5, 999}));

  const std::string h = R"({"op":"generate","id":1,)";
  EXPECT_EQ(Err(R"({"op":"generate","id":1})"),
            "prompt: one of prompt, messages or prompt_ids is required");
  EXPECT_EQ(Err(h + R"("prompt":"a","prompt_ids":[1]})"),
            "prompt: give exactly one of prompt, messages or prompt_ids");
  EXPECT_EQ(Err(h + R"("prompt":"a","messages":[{}]})"),
            "prompt: give exactly one of prompt, messages or prompt_ids");
  EXPECT_EQ(Err(h + R"("prompt":""})"), "prompt: must not be empty");
  EXPECT_EQ(Err(h + R"("prompt":["a"]})"), "prompt: expected a string, got an array");
  EXPECT_EQ(Err(h + R"("messages":[]})"), "messages: must not be empty");
  EXPECT_EQ(Err(h + R"("messages":{}})"), "messages: expected an array, got an object");
  EXPECT_EQ(Err(h + R"("messages":[{},"x"]})"), "messages[1]: expected an object, got a string");
  EXPECT_EQ(Err(h + R"("prompt_ids":[]})"), "prompt_ids: must not be empty");
  EXPECT_EQ(Err(h + R"("prompt_ids":[1,1000]})"), "prompt_ids[1]: must be in [0, 999], got 1000");
  EXPECT_EQ(Err(h + R"("prompt_ids":[-1]})"), "prompt_ids[0]: must be in [0, 999], got -1");
  EXPECT_EQ(Err(h + R"("prompt_ids":[1.0]})"),
            "prompt_ids[0]: expected an integer, got a fractional number");
  EXPECT_EQ(Err(h + R"("prompt_ids":"1"})"), "prompt_ids: expected an array, got a string");
}

TEST(ParseRequestTest, PromptSizeLimits) {
  RequestLimits l = Limits();
  l.max_prompt_bytes = 4;
  l.max_prompt_ids = 2;
  l.max_messages_bytes = 10;
  const std::string h = R"({"op":"generate","id":1,)";
  EXPECT_TRUE(ParseRequest(h + R"("prompt":"abcd"})", l).ok());
  EXPECT_EQ(Err(h + R"("prompt":"abcde"})", ErrorCode::kInvalidArgument, l),
            "prompt: longer than 4 bytes (5)");
  EXPECT_EQ(Err(h + R"("prompt_ids":[1,2,3]})", ErrorCode::kInvalidArgument, l),
            "prompt_ids: at most 2 entries, got 3");
  EXPECT_EQ(Err(h + R"("messages":[{"a": "bcdef"}]})", ErrorCode::kInvalidArgument, l),
            "messages: longer than 10 bytes (15)");
  l.vocab_size = 0;  // no bound on ids
  EXPECT_TRUE(ParseRequest(h + R"("prompt_ids":[2147483647]})", l).ok());
}

TEST(ParseRequestTest, SamplingRanges) {
  EXPECT_EQ(Err(G(R"("max_tokens":0)")), "max_tokens: must be in [1, 4096], got 0");
  EXPECT_EQ(Err(G(R"("max_tokens":4097)")), "max_tokens: must be in [1, 4096], got 4097");
  RequestLimits uncapped = Limits();
  uncapped.max_tokens = 0;
  EXPECT_EQ(Err(G(R"("max_tokens":0)"), ErrorCode::kInvalidArgument, uncapped),
            "max_tokens: must be >= 1, got 0");
  EXPECT_TRUE(ParseRequest(G(R"("max_tokens":9000000000)"), uncapped).ok());
  EXPECT_EQ(Err(G(R"("max_tokens":"16")")), "max_tokens: expected an integer, got a string");
  EXPECT_EQ(Err(G(R"("temperature":2.5)")), "temperature: must be in [0, 2], got 2.5");
  EXPECT_EQ(Err(G(R"("temperature":-0.1)")), "temperature: must be in [0, 2], got -0.1");
  EXPECT_EQ(Gen(G(R"("temperature":2)")).temperature, 2.0);
  EXPECT_EQ(Err(G(R"("temperature":true)")), "temperature: expected a number, got a boolean");
  EXPECT_EQ(Err(G(R"("top_p":0)")), "top_p: must be in (0, 1], got 0");
  EXPECT_EQ(Err(G(R"("top_p":1.01)")), "top_p: must be in (0, 1], got 1.01");
  EXPECT_EQ(Err(G(R"("top_k":-2)")), "top_k: must be >= -1, got -2");
  EXPECT_EQ(Err(G(R"("top_k":2147483648)")), "top_k: must be >= -1, got 2147483648");
  EXPECT_EQ(Err(G(R"("min_p":1.5)")), "min_p: must be in [0, 1], got 1.5");
  EXPECT_EQ(Err(G(R"("seed":-3)")), "seed: must be >= 0, got -3");
  EXPECT_EQ(Err(G(R"("logprobs":1)")), "logprobs: expected a boolean, got an integer");
  EXPECT_EQ(Err(G(R"("top_logprobs":21,"logprobs":true)")),
            "top_logprobs: must be in [0, 20], got 21");
  EXPECT_EQ(Err(G(R"("top_logprobs":2)")), "top_logprobs: requires logprobs to be true");
  EXPECT_EQ(Err(G(R"("response_format":"json")")),
            "response_format: expected an object, got a string");
  EXPECT_EQ(Err(R"({"op":"generate","prompt":"x"})"), "id: required");
}

// The logit processors: penalties in OpenAI's ranges, logit_bias as an object of decimal token
// ids (below the vocabulary, each once, at most max_logit_bias) to biases in [-100, 100].
TEST(ParseRequestTest, LogitProcessors) {
  const GenerateRequest g = Gen(G(R"("repetition_penalty":1.3,"frequency_penalty":-0.5,)"
                                  R"("presence_penalty":2,"logit_bias":{"17":-100,"0":2.5})"));
  EXPECT_EQ(g.repetition_penalty, 1.3);
  EXPECT_EQ(g.frequency_penalty, -0.5);
  EXPECT_EQ(g.presence_penalty, 2.0);
  EXPECT_EQ(g.logit_bias, (std::vector<std::pair<int32_t, double>>{{17, -100.0}, {0, 2.5}}));
  const GenerateRequest plain = Gen(G(""));
  EXPECT_EQ(plain.repetition_penalty, 1.0);
  EXPECT_EQ(plain.frequency_penalty, 0.0);
  EXPECT_EQ(plain.presence_penalty, 0.0);
  EXPECT_TRUE(plain.logit_bias.empty());
  EXPECT_EQ(Err(G(R"("repetition_penalty":0)")), "repetition_penalty: must be in (0, 2], got 0");
  EXPECT_EQ(Err(G(R"("frequency_penalty":2.5)")), "frequency_penalty: must be in [-2, 2], got 2.5");
  EXPECT_EQ(Err(G(R"("presence_penalty":-3)")), "presence_penalty: must be in [-2, 2], got -3");
  EXPECT_EQ(Err(G(R"("logit_bias":[1])")), "logit_bias: expected an object, got an array");
  EXPECT_EQ(Err(G(R"("logit_bias":{"abc":1})")),
            "logit_bias.abc: key must be a token id (a decimal integer string)");
  EXPECT_EQ(Err(G(R"("logit_bias":{"-1":1})")),
            "logit_bias.-1: key must be a token id (a decimal integer string)");
  EXPECT_EQ(Err(G(R"("logit_bias":{"+1":1})")),
            "logit_bias.+1: key must be a token id (a decimal integer string)");
  EXPECT_EQ(Err(G(R"("logit_bias":{"12345678901":1})")),
            "logit_bias.12345678901: key must be a token id (a decimal integer string)");
  EXPECT_EQ(Err(G(R"("logit_bias":{"1000":1})")), "logit_bias.1000: token id must be in [0, 999]");
  EXPECT_EQ(Err(G(R"("logit_bias":{"5":1,"5":2})")), "logit_bias.5: token id given twice");
  EXPECT_EQ(Err(G(R"("logit_bias":{"5":1,"7":1,"005":2})")), "logit_bias.5: token id given twice");
  EXPECT_EQ(Err(G(R"("logit_bias":{"5":101})")), "logit_bias.5: must be in [-100, 100], got 101");
  EXPECT_EQ(Err(G(R"("logit_bias":{"5":"1"})")), "logit_bias.5: expected a number, got a string");
  RequestLimits two = Limits();
  two.max_logit_bias = 2;
  EXPECT_EQ(Err(G(R"("logit_bias":{"1":1,"2":1,"3":1})"), ErrorCode::kInvalidArgument, two),
            "logit_bias: at most 2 entries, got 3");
}

TEST(ParseRequestTest, StopLimits) {
  std::string sixteen, seventeen;
  for (int i = 0; i < 16; ++i)
    sixteen += std::string(i ? "," : "") + "\"s" + std::to_string(i) + "\"";
  seventeen = sixteen + ",\"x\"";
  EXPECT_EQ(Gen(G("\"stop\":[" + sixteen + "]")).stop.size(), 16u);
  EXPECT_EQ(Err(G("\"stop\":[" + seventeen + "]")), "stop: at most 16 entries, got 17");
  EXPECT_EQ(Err(G(R"("stop":"x")")), "stop: expected an array, got a string");
  EXPECT_EQ(Err(G(R"("stop":["a",""])")), "stop[1]: must not be empty");
  EXPECT_EQ(Err(G(R"("stop":[1])")), "stop[0]: expected a string, got an integer");
  EXPECT_EQ(Err(G("\"stop\":[\"" + std::string(257, 'a') + "\"]")),
            "stop[0]: longer than 256 bytes (257)");
  EXPECT_EQ(Err(G(R"("stop_ids":[1000])")), "stop_ids[0]: must be in [0, 999], got 1000");
  std::string ids = "0";
  for (int i = 1; i < 257; ++i) ids += ",1";
  EXPECT_EQ(Err(G("\"stop_ids\":[" + ids + "]")), "stop_ids: at most 256 entries, got 257");
}

TEST(ParseRequestTest, StringsMustBeValidUtf8AfterUnescaping) {
  // A lone surrogate escape cannot become UTF-8: either the JSON parser or the check rejects it.
  Result<Request> r = ParseRequest(G(R"("stop":["\ud800"])"), Limits());
  EXPECT_FALSE(r.ok());
  r = ParseRequest(R"({"op":"generate","id":1,"prompt":"\udc00x"})", Limits());
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(Gen(R"({"op":"generate","id":1,"prompt":"\ud83d\ude00"})").prompt, "\xf0\x9f\x98\x80");
}

TEST(ParseRequestTest, RequestsRoundTrip) {
  GenerateRequest g;
  g.id = 42;
  g.prompt = "line\n\"quoted\" \x01 é";
  g.max_tokens = 100;
  g.temperature = 0.7;
  g.top_p = 0.95;
  g.top_k = 50;
  g.min_p = 0.1;
  g.seed = 123;
  g.stop = {"\n", "</s>"};
  g.stop_ids = {1, 2};
  g.response_format_json = R"({"type":"json_schema","schema":{"type":"object"}})";
  g.logprobs = true;
  g.top_logprobs = 3;
  g.repetition_penalty = 1.1;
  g.frequency_penalty = -0.25;
  g.presence_penalty = 0.5;
  g.logit_bias = {{999, -100.0}, {3, 0.1 + 0.2}};
  GenerateRequest m;
  m.id = 1;
  m.prompt_kind = PromptKind::kMessages;
  m.messages_json = R"([{"role":"user","content":"hi"}])";
  GenerateRequest ids;
  ids.prompt_kind = PromptKind::kIds;
  ids.prompt_ids = {3, 1, 4};
  ids.temperature = 0.1 + 0.2;  // not a short decimal: needs the round-trip form
  for (const Request& req : std::vector<Request>{Hello{1, "cli"}, g, m, ids, CancelRequest{9},
                                                 StatusRequest{}, HealthRequest{}}) {
    const std::string json = ToJson(req);
    Result<Request> back = ParseRequest(json, Limits());
    ASSERT_TRUE(back.ok()) << json << " -> " << back.status().ToString();
    EXPECT_EQ(*back, req) << json;
  }
  EXPECT_EQ(ToJson(CancelRequest{9}), R"({"op":"cancel","id":9})");
  EXPECT_EQ(ToJson(Hello{1, "cli"}), R"({"op":"hello","protocol":1,"client":"cli"})");
}

}  // namespace
}  // namespace deepinfer::ipc
