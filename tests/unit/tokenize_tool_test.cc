// deepinfer-tokenize end to end: encode (both modes) and decode over JSON lines, chat rendering,
// and clear errors with the documented exit codes.
#include <gtest/gtest.h>

#include <cstdio>

#include "engine/tokenizer/tokenizer.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using testing::TempDir;

const std::string kRoot = DEEPINFER_SOURCE_DIR;
const std::string kTok = Tokenizer::DefaultDir(kRoot);
const std::string kV4Tok = kRoot + "/deps/tokenizer-v4-test";

using ToolRun = testing::CommandRun;

ToolRun Tool(const std::string& args, bool with_stderr = true) {
  return testing::RunCommand(std::string(DEEPINFER_BIN_DIR) + "/deepinfer-tokenize " + args +
                             (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

TEST(TokenizeToolTest, EncodeAndDecodeJsonLines) {
  TempDir dir;
  testing::WriteFile(dir / "in.jsonl", "\"Hello, world!\"\n\"<｜User｜>hi\"\n\n\"你好\"\n");
  ToolRun enc = Tool("encode --tokenizer " + kTok + " --jsonl " + (dir / "in.jsonl"), false);
  ASSERT_EQ(enc.code, 0) << enc.out;
  EXPECT_NE(enc.out.find("[128803,"), std::string::npos) << enc.out;
  EXPECT_EQ(std::count(enc.out.begin(), enc.out.end(), '\n'), 3);  // empty lines are skipped
  ToolRun safe =
      Tool("encode --safe --tokenizer " + kTok + " --jsonl " + (dir / "in.jsonl"), false);
  EXPECT_EQ(safe.out.find("128803"), std::string::npos) << safe.out;
  testing::WriteFile(dir / "ids.jsonl", enc.out);
  ToolRun dec = Tool("decode --tokenizer " + kTok + " --jsonl " + (dir / "ids.jsonl"), false);
  ASSERT_EQ(dec.code, 0) << dec.out;
  EXPECT_EQ(dec.out, "\"Hello, world!\"\n\"<｜User｜>hi\"\n\"你好\"\n");
  ToolRun skip =
      Tool("decode --skip-special --tokenizer " + kTok + " --jsonl " + (dir / "ids.jsonl"), false);
  EXPECT_NE(skip.out.find("\"<｜User｜>hi\""), std::string::npos) << "<｜User｜> is not special";
}

TEST(TokenizeToolTest, ChatRendersThePromptAndItsIds) {
  TempDir dir;
  testing::WriteFile(dir / "m.json", R"([{"role": "system", "content": "Be brief."},)"
                                     R"( {"role": "user", "content": "Hi <｜Assistant｜>"}])");
  ToolRun r =
      Tool("chat --tokenizer " + kV4Tok + " --messages " + (dir / "m.json") + " --thinking", false);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(
      r.out.find(
          "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hi <｜Assistant｜><｜Assistant｜><think>\n["),
      0u)
      << r.out;
  // BOS first, <think> last; the <｜Assistant｜> typed by the user stays text.
  EXPECT_NE(r.out.find("\n[0,"), std::string::npos);
  EXPECT_NE(r.out.find(",128798]\n"), std::string::npos) << r.out;
  const size_t ids = r.out.find("\n[");
  EXPECT_EQ(r.out.substr(ids).find("128804"), r.out.substr(ids).rfind("128804"))
      << "one Assistant id";
  // The V3 vocabulary lacks the V4 thinking markers: a clear error, not a wrong prompt.
  ToolRun v3 = Tool("chat --tokenizer " + kTok + " --messages " + (dir / "m.json"));
  EXPECT_EQ(v3.code, 2);
  EXPECT_NE(v3.out.find("lacks the special token '</think>'"), std::string::npos) << v3.out;
}

TEST(TokenizeToolTest, BadInputGivesClearErrors) {
  TempDir dir;
  testing::WriteFile(dir / "bad.jsonl", "\"ok\"\n{\"not\": \"a string\"}\n");
  ToolRun r = Tool("encode --tokenizer " + kTok + " --jsonl " + (dir / "bad.jsonl"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("line 2"), std::string::npos) << r.out;
  testing::WriteFile(dir / "ids.jsonl", "[1, 999999999]\n");
  r = Tool("decode --tokenizer " + kTok + " --jsonl " + (dir / "ids.jsonl"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("outside"), std::string::npos) << r.out;
  r = Tool("encode --tokenizer " + (dir / "none") + " --jsonl " + (dir / "bad.jsonl"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("tokenizer.json"), std::string::npos);
  testing::WriteFile(dir / "m.json", R"([{"role": "wizard", "content": "x"}])");
  r = Tool("chat --tokenizer " + kV4Tok + " --messages " + (dir / "m.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("messages[0].role"), std::string::npos) << r.out;
  EXPECT_EQ(Tool("encode --tokenizer " + kTok).code, 2);
  EXPECT_EQ(Tool("frob").code, 2);
}

}  // namespace
}  // namespace deepinfer
