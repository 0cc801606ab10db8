// Replies: serializers, ParseReply, round trips, and the error reply built from a failed request.
#include <gtest/gtest.h>

#include <string>

#include "ipc/protocol.h"

namespace deepinfer::ipc {
namespace {

Reply Parsed(const std::string& json) {
  Result<Reply> r = ParseReply(json);
  EXPECT_TRUE(r.ok()) << json << " -> " << r.status().ToString();
  return r.ok() ? *r : Reply(StatusReply{});
}

TEST(ReplyTest, HelloMatchesDaemonMd) {
  HelloReply h;
  h.server = "deepinferd 0.1.0";
  h.model = "DeepSeek-V4";
  h.vocab_size = 129280;
  EXPECT_EQ(ToJson(h), R"({"op":"hello","ok":true,"protocol":1,"server":"deepinferd 0.1.0",)"
                       R"("model":"DeepSeek-V4","vocab_size":129280})");
  HelloReply bad;
  bad.ok = false;
  bad.error = {std::string(kErrVersionMismatch), "client speaks 2, server speaks 1"};
  EXPECT_EQ(ToJson(bad),
            R"({"op":"hello","ok":false,"protocol":1,"error":)"
            R"({"code":"version_mismatch","message":"client speaks 2, server speaks 1"}})");
}

TEST(ReplyTest, OtherRepliesMatchDaemonMd) {
  EXPECT_EQ(ToJson(Accepted{7, 12}), R"({"op":"accepted","id":7,"prompt_tokens":12})");
  EXPECT_EQ(ToJson(ErrorReply{7, {"invalid_argument", "max_tokens: must be >= 1"}}),
            R"({"op":"error","id":7,"error":{"code":"invalid_argument",)"
            R"("message":"max_tokens: must be >= 1"}})");
  EXPECT_EQ(ToJson(ErrorReply{std::nullopt, {"protocol_error", "x"}}),
            R"({"op":"error","error":{"code":"protocol_error","message":"x"}})");
  EXPECT_EQ(ToJson(HealthReply{}), R"({"op":"health","ok":true})");
  EXPECT_EQ(ToJson(HealthReply{false, "draining"}),
            R"({"op":"health","ok":false,"reason":"draining"})");
  EXPECT_EQ(ToJson(ShmOffer{1 << 20, 4096}), R"({"op":"shm","bytes":1048576,"ring_slots":4096})");
  EXPECT_EQ(ToJson(StatusReply{R"({"queue":3,"model":{"name":"v4"}})"}),
            R"({"op":"status","queue":3,"model":{"name":"v4"}})");
  EXPECT_EQ(ToJson(StatusReply{}), R"({"op":"status"})");
  EXPECT_EQ(ToJson(StatusReply{" { } "}), R"({"op":"status"})");
}

TEST(ReplyTest, RoundTrip) {
  HelloReply h;
  h.server = "deepinferd 0.1.0";
  h.model = "m\"odel";
  h.vocab_size = 1000;
  HelloReply bad;
  bad.ok = false;
  bad.protocol = 1;
  bad.error = {"version_mismatch", "no"};
  const std::vector<Reply> replies = {h,
                                      bad,
                                      ShmOffer{123456789012, 8192},
                                      Accepted{18446744073709551615u, 0},
                                      ErrorReply{3, {"overloaded", "queue full"}},
                                      ErrorReply{std::nullopt, {"internal", ""}},
                                      HealthReply{},
                                      HealthReply{false, "cuda error"},
                                      StatusReply{},
                                      StatusReply{R"({"a":[1,2.5,"x"],"b":{"c":null}})"}};
  for (const Reply& r : replies) {
    const std::string json = ToJson(r);
    EXPECT_EQ(Parsed(json), r) << json;
  }
}

TEST(ReplyTest, ParseIsLenientAboutUnknownFieldsAndStrictAboutTypes) {
  Reply r = Parsed(R"({"op":"accepted","id":1,"prompt_tokens":2,"new_field":[1]})");
  EXPECT_EQ(std::get<Accepted>(r), (Accepted{1, 2}));
  r = Parsed(R"({"op":"error","error":{"code":"something_new","message":"m","more":1}})");
  EXPECT_EQ(std::get<ErrorReply>(r).error.code, "something_new");
  // The status reply keeps every member but "op", wherever it appears.
  r = Parsed(R"({"uptime_s": 5, "op": "status", "requests": {"live": 1}})");
  EXPECT_EQ(std::get<StatusReply>(r).fields_json, R"({"uptime_s":5,"requests":{"live":1}})");

  auto err = [](const std::string& json) {
    Result<Reply> r = ParseReply(json);
    EXPECT_FALSE(r.ok()) << json;
    return r.status().message();
  };
  EXPECT_EQ(err(R"({"op":"accepted","id":1})"), "prompt_tokens: required");
  EXPECT_EQ(err(R"({"op":"hello","ok":"yes","protocol":1})"),
            "ok: expected a boolean, got a string");
  EXPECT_EQ(err(R"({"op":"hello","ok":false,"protocol":1})"), "error: required");
  EXPECT_EQ(err(R"({"op":"error","error":{"message":"m"}})"), "error.code: required");
  EXPECT_EQ(err(R"({"op":"shm","bytes":1,"ring_slots":4294967296})"),
            "ring_slots: must be >= 0, got 4294967296");
  EXPECT_EQ(err(R"({"op":"generate","id":1})"), "op: unknown operation \"generate\"");
  EXPECT_EQ(ParseReply("not json").status().code(), ErrorCode::kDataLoss);
}

TEST(ReplyTest, MakeErrorReplyCarriesTheIdWhenReadable) {
  const std::string body = R"({"op":"generate","id":7,"max_tokens":0,"prompt":"x"})";
  Result<Request> req = ParseRequest(body, RequestLimits{});
  ASSERT_FALSE(req.ok());
  ErrorReply e = MakeErrorReply(body, req.status());
  EXPECT_EQ(e.id, 7u);
  EXPECT_EQ(e.error.code, "invalid_argument");
  EXPECT_EQ(e.error.message, "max_tokens: must be >= 1, got 0");
  EXPECT_EQ(ToJson(e), R"({"op":"error","id":7,"error":{"code":"invalid_argument",)"
                       R"("message":"max_tokens: must be >= 1, got 0"}})");

  e = MakeErrorReply(R"({"op":"generate","id":"7"})", InvalidArgument("id: ..."));
  EXPECT_FALSE(e.id.has_value());
  e = MakeErrorReply("[", DataLoss("body: not valid JSON"));
  EXPECT_FALSE(e.id.has_value());
  EXPECT_EQ(e.error.code, "protocol_error");
  EXPECT_EQ(WireErrorCode(NotFound("x")), kErrNotFound);
  EXPECT_EQ(WireErrorCode(Unimplemented("x")), kErrUnsupported);
  EXPECT_EQ(WireErrorCode(Internal("x")), kErrInternal);
  EXPECT_EQ(WireErrorCode(IoError("x")), kErrInternal);
}

TEST(ReplyTest, EscapingKeepsTheJsonValid) {
  ErrorReply e{1,
               {"invalid_argument",
                std::string("ctl \x01\x1f tab\t nl\n quote\" bs\\ ") + "bad utf8 \xff end"}};
  Reply back = Parsed(ToJson(e));
  // Invalid UTF-8 is replaced by U+FFFD on the way out; the rest comes back byte for byte.
  EXPECT_EQ(std::get<ErrorReply>(back).error.message,
            "ctl \x01\x1f tab\t nl\n quote\" bs\\ bad utf8 \xef\xbf\xbd end");
}

}  // namespace
}  // namespace deepinfer::ipc
