// The regex front end against PCRE2 (full match) on many strings for many patterns, and the
// errors for what it does not support.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <random>

#include "grammar/regex.h"
#include "grammar/unicode.h"
#include "tests/unit/grammar_test_util.h"

namespace deepinfer::grammar {
namespace {

using testing::Matches;
using testing::MustCompile;

class Pcre {
 public:
  explicit Pcre(const std::string& pattern) {
    int err;
    PCRE2_SIZE off;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &err,
                          &off, nullptr);
    EXPECT_NE(code_, nullptr) << pattern;
    data_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  ~Pcre() {
    pcre2_match_data_free(data_);
    pcre2_code_free(code_);
  }
  bool FullMatch(const std::string& s) {
    return pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, data_,
                       nullptr) >= 0;
  }

 private:
  pcre2_code* code_;
  pcre2_match_data* data_;
};

// Code points the subjects are made of: ASCII of interest, 2-, 3- and 4-byte characters.
const std::vector<uint32_t> kAlphabet = {'a', 'b', 'z',  'A',  '0', '5',  '9',   '_',    '-',
                                         '.', ' ', '\n', '\t', '@', 0xE9, 0x3B1, 0x4E2D, 0x1F600};

std::string Utf8(const std::vector<uint32_t>& cps) {
  std::string s;
  for (uint32_t c : cps) AppendUtf8(c, &s);
  return s;
}

TEST(GrammarRegexTest, AgreesWithPcre2OnFullMatch) {
  const std::vector<std::string> patterns = {
      "abc",
      "a|b|",
      "a*b+",
      "(ab)*",
      "(?:a|b)+c?",
      "[a-z]+",
      "[^a-z]",
      "[^\\n]*",
      "\\d{2,3}",
      "\\D\\w\\W",
      "\\s\\S",
      "a{2}",
      "a{1,}",
      "(a|ab)(c|bcd)?",
      ".",
      ".+",
      "[α-ω]",
      "[^α-ω]",
      "\\u00e9|\\x41",
      "[\\d.-]+",
      "^a.b$",
      "(a|b){0,3}",
      "([a-c]|-)*@",
      "[😀-😂]",
      "中?[0-9_]*",
      "a(?<n>b|c)*",
      "[]a]",
      "[a\\]]+",
      "x*?y",
      "(a*)*",
      "[\\s\\S]",
      "\\.\\*\\+",
      "a{0}b",
      "(|a)+",
      "[-a]",
      "\\t|\\n",
      "[^\\d\\s]+",
      "a{2,}b{0,1}",
      "[A-Za-z_][A-Za-z0-9_]*",
  };
  std::mt19937 rng(7);
  std::vector<std::string> subjects = {""};
  for (uint32_t a : kAlphabet) {
    subjects.push_back(Utf8({a}));
    for (uint32_t b : kAlphabet) {
      subjects.push_back(Utf8({a, b}));
      subjects.push_back(Utf8({a, b, kAlphabet[rng() % kAlphabet.size()]}));
    }
  }
  for (int i = 0; i < 400; ++i) {
    std::vector<uint32_t> cps(4 + rng() % 5);
    for (uint32_t& c : cps) c = kAlphabet[rng() % 10];
    subjects.push_back(Utf8(cps));
  }
  int positives = 0, checks = 0;
  for (const std::string& p : patterns) {
    const CompiledGrammar g = MustCompile(RegexToGrammar(p));
    Pcre oracle(p);
    for (const std::string& s : subjects) {
      const bool want = oracle.FullMatch(s);
      positives += want;
      ++checks;
      ASSERT_EQ(Matches(g, s), want) << "pattern /" << p << "/ subject \"" << s << "\"";
    }
  }
  EXPECT_GT(positives, 2000);
  EXPECT_GT(checks, 20000);
}

TEST(GrammarRegexTest, SearchSemanticsForJsonSchemaPatterns) {
  RegexOptions o;
  o.search = true;
  const CompiledGrammar g = MustCompile(RegexToGrammar("b+c", o));
  EXPECT_TRUE(Matches(g, "abbcd"));
  EXPECT_TRUE(Matches(g, "bc"));
  EXPECT_FALSE(Matches(g, "cb"));
  const CompiledGrammar anchored = MustCompile(RegexToGrammar("^ab|c$", o));
  EXPECT_TRUE(Matches(anchored, "abx"));
  EXPECT_TRUE(Matches(anchored, "xc"));
  EXPECT_FALSE(Matches(anchored, "xab"));
}

TEST(GrammarRegexTest, JsonStringModeMatchesEscapedText) {
  RegexOptions o;
  o.json_string = true;
  const CompiledGrammar g = MustCompile(RegexToGrammar("a\"[\\n/]", o));
  EXPECT_TRUE(Matches(g, "a\\\"\\n"));
  EXPECT_TRUE(Matches(g, "a\\\"/"));
  EXPECT_TRUE(Matches(g, "a\\\"\\/"));
  EXPECT_FALSE(Matches(g, "a\"\\n"));
  EXPECT_FALSE(Matches(g, "a\\\"\n"));
}

TEST(GrammarRegexTest, UnsupportedSyntaxIsAnError) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"(a)\\1", "backreference"}, {"a(?=b)", "lookaround"},    {"a(?!b)", "lookaround"},
      {"(?<=a)b", "lookaround"},   {"\\bfoo", "word boundary"}, {"a^b", "anchor"},
      {"a$b", "anchor"},           {"(^a)", "anchor"},          {"(a", "missing ')'"},
      {"a)", "unmatched"},         {"[a", "missing ']'"},       {"*a", "nothing to repeat"},
      {"a{3,2}", "n < m"},         {"a{5000}", "above"},        {"(?i)a", "flag"},
      {"[z-a]", "out of order"},   {"\\q", "unknown escape"},   {"\\k<n>", "backreference"},
  };
  for (const auto& [p, what] : bad) {
    Result<Grammar> g = RegexToGrammar(p);
    ASSERT_FALSE(g.ok()) << p;
    EXPECT_EQ(g.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find(what), std::string::npos)
        << p << " -> " << g.status().message();
  }
}

TEST(GrammarRegexTest, EmptyLanguageIsAnError) {
  Result<Grammar> g = RegexToGrammar("[^\\s\\S]");
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(CompiledGrammar::Compile(*g).ok());
}

TEST(GrammarRegexTest, Utf8ClassesRejectInvalidUtf8) {
  const CompiledGrammar g = MustCompile(RegexToGrammar(".*"));
  EXPECT_TRUE(Matches(g, "héllo 😀"));
  EXPECT_FALSE(Matches(g, "\xC3"));              // truncated
  EXPECT_FALSE(Matches(g, "\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(Matches(g, "\xC0\xAF"));          // overlong
  EXPECT_FALSE(Matches(g, "\xF4\x90\x80\x80"));  // above U+10FFFF
}

}  // namespace
}  // namespace deepinfer::grammar
