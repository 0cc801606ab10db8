// The V4 output parser: reasoning/content split, DSML tool calls, holding back partial markers,
// malformed input as typed errors, and the chunking property (any split of the same text gives
// the same result).
#include "engine/tokenizer/output_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace deepinfer {
namespace {

const std::string kEos = "<｜end▁of▁sentence｜>";

// A generation with reasoning, content and two tool calls, as the template renders one.
const std::string kToolText =
    "I should look it up.</think>Checking.\n\n<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"get_weather\">\n"
    "<｜DSML｜parameter name=\"city\" string=\"true\">Paris \"FR\"\n\\</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"days\" string=\"false\">[1, 2]</｜DSML｜parameter>\n"
    "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"ping\">\n\n</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>" +
    kEos;

// The whole result, or the error, as one comparable string.
std::string Describe(const Status& st, const ParsedDelta& d) {
  if (!st.ok()) return "error: " + st.message();
  std::string s = "R[" + d.reasoning + "] C[" + d.content + "]";
  for (const ToolCall& c : d.tool_calls) s += " T[" + c.name + " " + c.arguments_json + "]";
  return s;
}

// Parses `text` pushed in the pieces cut at `cuts` (ascending offsets).
std::string ParseChunked(const std::string& text, bool thinking, const std::vector<size_t>& cuts) {
  V4OutputParser parser(thinking);
  ParsedDelta d;
  size_t prev = 0;
  for (size_t cut : cuts) {
    Status st = parser.Push(std::string_view(text).substr(prev, cut - prev), &d);
    if (!st.ok()) return Describe(st, d);
    prev = cut;
  }
  Status st = parser.Push(std::string_view(text).substr(prev), &d);
  if (st.ok()) st = parser.Finish(&d);
  return Describe(st, d);
}

std::string ParseWhole(const std::string& text, bool thinking) {
  return ParseChunked(text, thinking, {});
}

TEST(OutputParser, PlainContent) {
  auto r = ParseV4Output("Hello there." + kEos, false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->content, "Hello there.");
  EXPECT_EQ(r->reasoning, "");
  EXPECT_TRUE(r->saw_eos);
  r = ParseV4Output("No end marker", false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->content, "No end marker");
  EXPECT_FALSE(r->saw_eos);
}

TEST(OutputParser, ThinkingSplitsReasoning) {
  auto r = ParseV4Output("Let me think.</think>Answer: 4." + kEos, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reasoning, "Let me think.");
  EXPECT_EQ(r->content, "Answer: 4.");
  r = ParseV4Output("cut off mid-thought", true);  // generation stopped inside the reasoning
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reasoning, "cut off mid-thought");
  EXPECT_EQ(r->content, "");
  // Without thinking, </think> is ordinary content.
  EXPECT_EQ(ParseWhole("a</think>b", false), "R[] C[a</think>b]");
}

TEST(OutputParser, ToolCalls) {
  auto r = ParseV4Output(kToolText, true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->reasoning, "I should look it up.");
  EXPECT_EQ(r->content, "Checking.");  // the "\n\n" before the block is not content
  ASSERT_EQ(r->tool_calls.size(), 2u);
  EXPECT_EQ(r->tool_calls[0].name, "get_weather");
  EXPECT_EQ(r->tool_calls[0].arguments_json, R"({"city": "Paris \"FR\"\n\\", "days": [1, 2]})");
  EXPECT_EQ(r->tool_calls[1].name, "ping");
  EXPECT_EQ(r->tool_calls[1].arguments_json, "{}");
  EXPECT_TRUE(r->saw_eos);
}

TEST(OutputParser, StringParametersAreEscapedAsJson) {
  const std::string text =
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
      "<｜DSML｜parameter name=\"s\" string=\"true\">é\t\x01/</｜DSML｜parameter>"
      "\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  EXPECT_EQ(ParseWhole(text, false), "R[] C[] T[f {\"s\": \"é\\t\\u0001/\"}]");
}

TEST(OutputParser, CompletedCallsAreEmittedBeforeTheBlockEnds) {
  V4OutputParser parser(true);
  ParsedDelta d;
  const size_t second = kToolText.find("<｜DSML｜invoke name=\"ping\"");
  ASSERT_TRUE(parser.Push(kToolText.substr(0, second), &d).ok());
  EXPECT_EQ(d.reasoning, "I should look it up.");
  EXPECT_EQ(d.content, "Checking.");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  ASSERT_TRUE(parser.Push(kToolText.substr(second), &d).ok());
  ASSERT_TRUE(parser.Finish(&d).ok());
  EXPECT_EQ(d.tool_calls.size(), 2u);
  EXPECT_TRUE(parser.saw_eos());
}

TEST(OutputParser, HoldsBackPartialMarkers) {
  V4OutputParser parser(true);
  ParsedDelta d;
  ASSERT_TRUE(parser.Push("abc</thi", &d).ok());
  EXPECT_EQ(d.reasoning, "abc");
  ASSERT_TRUE(parser.Push("nk>Hello\n", &d).ok());
  EXPECT_EQ(d.content, "Hello");  // the newline may open a tool-call block: held
  ASSERT_TRUE(parser.Push("\n<｜DSML｜tool_", &d).ok());
  EXPECT_EQ(d.content, "Hello");
  ASSERT_TRUE(parser.Push("c", &d).ok());
  EXPECT_EQ(d.content, "Hello");
  ASSERT_TRUE(parser.Finish(&d).ok());  // an unfinished marker at the end is plain text
  EXPECT_EQ(d.content, "Hello\n\n<｜DSML｜tool_c");
  EXPECT_TRUE(d.tool_calls.empty());

  V4OutputParser eos(false);
  ParsedDelta e;
  ASSERT_TRUE(eos.Push("Bye<｜end▁of", &e).ok());
  EXPECT_EQ(e.content, "Bye");
  ASSERT_TRUE(eos.Push("▁sentence｜>", &e).ok());
  EXPECT_TRUE(eos.saw_eos());
  EXPECT_EQ(e.content, "Bye");
}

void ExpectError(const std::string& text, bool thinking, const std::string& needle) {
  auto r = ParseV4Output(text, thinking);
  ASSERT_FALSE(r.ok()) << text;
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

std::string Block(const std::string& inside) {
  return "\n\n<｜DSML｜tool_calls>\n" + inside + "\n</｜DSML｜tool_calls>";
}

TEST(OutputParser, MalformedInputIsAnError) {
  const std::string p = "<｜DSML｜parameter name=\"a\" string=\"true\">x</｜DSML｜parameter>";
  ExpectError("\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n", false, "unterminated");
  ExpectError("\n\n<｜DSML｜tool_calls>\n", false, "unterminated");
  ExpectError(Block("<｜DSML｜invoke>\n</｜DSML｜invoke>"), false, "without a tool name");
  ExpectError(Block("<｜DSML｜invoke name=\"\">\n</｜DSML｜invoke>"), false, "without a tool name");
  ExpectError(Block("<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"false\">"
                    "{bad</｜DSML｜parameter>\n</｜DSML｜invoke>"),
              false, "not valid JSON");
  ExpectError(Block("<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x"
                    "\n</｜DSML｜invoke>"),
              false, "not closed");
  ExpectError(Block("<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x"
                    "\n" +
                    p + "\n</｜DSML｜invoke>"),
              false, "not closed");
  ExpectError(Block("<｜DSML｜invoke name=\"f\">\n" + p + "\n" + p + "\n</｜DSML｜invoke>"), false,
              "given twice");
  ExpectError(Block("<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\">x"
                    "</｜DSML｜parameter>\n</｜DSML｜invoke>"),
              false, "string=");
  ExpectError(Block("<｜DSML｜invoke name=\"f\">\n<｜DSML｜bogus/>\n</｜DSML｜invoke>"), false,
              "unexpected text");
  ExpectError(Block("<｜DSML｜invoke name=\"f\">\n"), false, "not closed before the end");
  ExpectError(Block("<｜DSML｜call name=\"f\">"), false, "unexpected text in the DSML");
  ExpectError("Hi <｜DSML｜function_calls>", false, "unexpected DSML tag");
  ExpectError(Block("") + "trailing", false, "after the tool-call block");
  ExpectError("done" + kEos + "more", false, "after the end-of-sentence");
}

TEST(OutputParser, ErrorsAreSticky) {
  V4OutputParser parser(false);
  ParsedDelta d;
  EXPECT_FALSE(parser.Push("x <｜DSML｜nope>", &d).ok());
  Status again = parser.Push("more", &d);
  EXPECT_EQ(again.code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(parser.Finish(&d).ok());
}

std::vector<std::pair<std::string, bool>> Corpus() {
  std::vector<std::pair<std::string, bool>> texts = {
      {kToolText, true},
      {kToolText.substr(kToolText.find("</think>") + 8), false},
      {kToolText.substr(0, kToolText.size() - kEos.size()), true},
      {"Think\n\n</think>\n\nAnswer\n\n\n" + kEos, true},
      {"a\n\nb\n<｜end▁of▁sen\n\n<｜DSML｜tool_\n" + kEos, false},
      {"x</thi", true},
      {"tail <｜DSML｜tool_calls", false},
      {"cut\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">", false},
      {"bad <｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" "
       "string=\"false\">nope</｜DSML｜parameter>\n</｜DSML｜invoke>",
       false},
      {"<｜DSML｜tool_calls></｜DSML｜tool_calls>   \n" + kEos, true},
      {"r</think>c" + kEos + "x", true},
  };
  return texts;
}

TEST(OutputParser, EverySplitPointGivesTheSameResult) {
  for (const auto& [text, thinking] : Corpus()) {
    const std::string whole = ParseWhole(text, thinking);
    for (size_t i = 0; i <= text.size(); ++i) {
      ASSERT_EQ(ParseChunked(text, thinking, {i}), whole) << "split at " << i << " of " << text;
    }
    for (size_t i = 0; i <= text.size(); i += 7) {
      for (size_t j = i; j <= text.size(); j += 5) {
        ASSERT_EQ(ParseChunked(text, thinking, {i, j}), whole) << i << "," << j << " " << text;
      }
    }
  }
}

TEST(OutputParser, ByteAndRandomChunksGiveTheSameResult) {
  std::mt19937 rng(1234);
  for (const auto& [text, thinking] : Corpus()) {
    const std::string whole = ParseWhole(text, thinking);
    std::vector<size_t> bytes;
    for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
    ASSERT_EQ(ParseChunked(text, thinking, bytes), whole) << text;
    for (int round = 0; round < 50; ++round) {
      std::vector<size_t> cuts;
      for (size_t at = rng() % 12; at < text.size(); at += 1 + rng() % 12) cuts.push_back(at);
      ASSERT_EQ(ParseChunked(text, thinking, cuts), whole) << text;
    }
  }
}

TEST(OutputParser, MutatedInputNeverCrashesAndStaysChunkInvariant) {
  std::mt19937 rng(99);
  const std::vector<std::string> inserts = {"",  "x",         "\n",       "\"",
                                            ">", "<｜DSML｜", "</think>", kEos};
  for (int round = 0; round < 300; ++round) {
    std::string text = kToolText;
    for (int k = 0; k < 2; ++k) {
      const size_t at = rng() % text.size();
      text = text.substr(0, at) + inserts[rng() % inserts.size()] +
             text.substr(std::min(text.size(), at + rng() % 3));
    }
    const bool thinking = rng() % 2 == 0;
    const std::string whole = ParseWhole(text, thinking);
    std::vector<size_t> cuts;
    for (size_t at = rng() % 6; at < text.size(); at += 1 + rng() % 6) cuts.push_back(at);
    ASSERT_EQ(ParseChunked(text, thinking, cuts), whole) << text;
  }
}

}  // namespace
}  // namespace deepinfer
