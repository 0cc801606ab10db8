// GBNF front end: the dialect's constructs, and clear errors for malformed grammars.
#include "grammar/ebnf.h"
#include "tests/unit/grammar_test_util.h"

namespace deepinfer::grammar {
namespace {

using testing::Matches;
using testing::MustCompile;

TEST(GrammarEbnfTest, Constructs) {
  const CompiledGrammar g = MustCompile(EbnfToGrammar(R"(
# a comment line
root   ::= greeting ws name ("!" | "?")? tail   # trailing comment
greeting ::= "hi" | "hello"
ws ::= [ \t]+
name ::= [A-Z] [a-z]{1,3}
tail ::= ("\x41" | "\u00e9" | [^a-z\n0-9])*
)"));
  for (const char* ok : {"hi Bob", "hello  Anna!", "hi Abc?AéZ", "hi Ab-"}) {
    EXPECT_TRUE(Matches(g, ok)) << ok;
  }
  for (const char* bad : {"hi bob", "hi Abcde", "hiBob", "hi Bob!!x", "hi Bob\n"}) {
    EXPECT_FALSE(Matches(g, bad)) << bad;
  }
}

TEST(GrammarEbnfTest, RepetitionForms) {
  const CompiledGrammar g =
      MustCompile(EbnfToGrammar("root ::= \"a\"{2} \"b\"{1,} \"c\"{0,2} \"d\"{,1}\n"));
  for (const char* ok : {"aab", "aabbbcc", "aabd", "aabcd"}) EXPECT_TRUE(Matches(g, ok)) << ok;
  for (const char* bad : {"ab", "aaab", "aa", "aabccc", "aabdd"}) {
    EXPECT_FALSE(Matches(g, bad)) << bad;
  }
}

TEST(GrammarEbnfTest, MultiLineAlternativesAndEscapes) {
  const CompiledGrammar g = MustCompile(
      EbnfToGrammar("root ::= item\n  | \"[\" root \"]\"\nitem ::= \"\\\"q\\\"\" | [\\]\\-]\n"));
  for (const char* ok : {"\"q\"", "[[]]]", "-"}) EXPECT_TRUE(Matches(g, ok)) << ok;
  EXPECT_FALSE(Matches(g, "[q]"));
}

TEST(GrammarEbnfTest, ErrorsNameTheConstruct) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"root ::= foo\n", "'foo' is used but not defined"},
      {"start ::= \"a\"\n", "no 'root' rule"},
      {"root ::= \"abc\n", "unterminated string"},
      {"root ::= [abc\n", "missing ']'"},
      {"root ::= (\"a\"\n", "missing ')'"},
      {"root ::= \"a\"{3,1}\n", "n < m"},
      {"root ::= \"a\"{x}\n", "expected a number"},
      {"root ::= [z-a]\n", "out of order"},
      {"root ::= <[123]>\n", "token references"},
      {"root ::= \"a\"\nroot ::= \"b\"\n", "defined twice"},
      {"root = \"a\"\n", "expected '::='"},
      {"root ::= \"\\q\"\n", "unknown escape"},
      {"root ::= \"a\" @\n", "unexpected '@'"},
  };
  for (const auto& [text, what] : bad) {
    Result<Grammar> g = EbnfToGrammar(text);
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_EQ(g.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find(what), std::string::npos)
        << text << " -> " << g.status().message();
  }
  // A grammar whose root can never finish is rejected when compiled.
  Result<Grammar> g = EbnfToGrammar("root ::= \"a\" root\n");
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(CompiledGrammar::Compile(*g).ok());
}

TEST(GrammarEbnfTest, NonproductiveAlternativesArePruned) {
  // `loop` derives no string: the matcher must never allow a prefix that only leads into it.
  const CompiledGrammar g =
      MustCompile(EbnfToGrammar("root ::= \"a\" | \"b\" loop\n"
                                "loop ::= \"x\" loop\n"));
  GrammarMatcher m(g, testing::ByteVocab());
  std::vector<uint32_t> mask(testing::ByteVocab().mask_words());
  m.FillNextTokenBitmask(mask.data());
  EXPECT_TRUE(testing::MaskHas(mask, 'a'));
  EXPECT_FALSE(testing::MaskHas(mask, 'b'));
}

}  // namespace
}  // namespace deepinfer::grammar
