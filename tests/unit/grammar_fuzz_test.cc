// Bad and random input for the three front ends: random and mutated patterns, grammars and
// schemas must compile or fail with InvalidArgument, never crash or hang; what compiles must
// match without trouble.
#include <random>

#include "grammar/ebnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "tests/unit/grammar_test_util.h"

namespace deepinfer::grammar {
namespace {

std::string Random(std::mt19937* rng, const std::string& alphabet, size_t max_len) {
  std::string s((*rng)() % (max_len + 1), ' ');
  for (char& c : s) c = alphabet[(*rng)() % alphabet.size()];
  return s;
}

std::string Mutate(std::mt19937* rng, std::string s, const std::string& alphabet) {
  const int edits = 1 + static_cast<int>((*rng)() % 3);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const size_t at = (*rng)() % s.size();
    switch ((*rng)() % 3) {
      case 0:
        s.erase(at, 1);
        break;
      case 1:
        s.insert(at, 1, alphabet[(*rng)() % alphabet.size()]);
        break;
      default:
        s[at] = alphabet[(*rng)() % alphabet.size()];
    }
  }
  return s;
}

// Compiles (when the front end accepted it) and runs a few strings through the matcher.
void Exercise(Result<Grammar> g, std::mt19937* rng, const std::string& alphabet) {
  if (!g.ok()) {
    EXPECT_EQ(g.status().code(), ErrorCode::kInvalidArgument) << g.status().ToString();
    return;
  }
  Result<CompiledGrammar> c = CompiledGrammar::Compile(*g);
  if (!c.ok()) return;
  GrammarMatcher m(*c, testing::ByteVocab());
  std::vector<uint32_t> mask(testing::ByteVocab().mask_words());
  for (int i = 0; i < 3; ++i) {
    m.AcceptBytes(Random(rng, alphabet, 6));
    m.FillNextTokenBitmask(mask.data());
    m.JumpForward();
  }
}

TEST(GrammarFuzzTest, Regex) {
  std::mt19937 rng(1);
  const std::string alphabet = "()[]{}|*+?.^$\\-,:=!<>0123456789abdswDSWuxk\xCE\xB1 ";
  const std::vector<std::string> seeds = {"^(a|b)*[c-e]{2,5}$", "(?:\\d+\\.)?\\w{1,3}",
                                          "[^\\s\"]+@\\u00e9\\x41", "(a(b(c)?)*)+"};
  for (int i = 0; i < 4000; ++i) {
    const std::string p =
        i % 2 ? Random(&rng, alphabet, 16) : Mutate(&rng, seeds[i % seeds.size()], alphabet);
    Exercise(RegexToGrammar(p), &rng, "abcde01 .\n");
  }
}

TEST(GrammarFuzzTest, Ebnf) {
  std::mt19937 rng(2);
  const std::string alphabet = "root::=|()[]^-*+?{},019\"\\xu#\n ab.<>";
  const std::vector<std::string> seeds = {
      "root ::= a (\"x\" | [a-c]+)* b?\na ::= \"q\"{1,3}\nb ::= [^\\n] # c\n",
      "root ::= \"[\" (root (\",\" root)*)? \"]\" | [0-9]+\n"};
  for (int i = 0; i < 4000; ++i) {
    const std::string text =
        i % 3 == 0 ? Random(&rng, alphabet, 30) : Mutate(&rng, seeds[i % seeds.size()], alphabet);
    Exercise(EbnfToGrammar(text), &rng, "[],0123abcxq\n");
  }
}

TEST(GrammarFuzzTest, JsonSchema) {
  std::mt19937 rng(3);
  const std::string alphabet = "{}[]\":,0123456789-.etruflsnaby$#/";
  const std::vector<std::string> seeds = {
      R"({"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":50},
          "b":{"type":"array","items":{"$ref":"#/$defs/s"},"minItems":1}},"required":["a"],
          "$defs":{"s":{"type":"string","maxLength":3,"pattern":"^[a-c]+$"}}})",
      R"({"anyOf":[{"const":[1,{"x":null}]},{"allOf":[{"type":"number"},{"minimum":0}]}]})",
      R"({"type":"array","prefixItems":[{"enum":["a","b"]},{"type":"boolean"}],"items":false})"};
  for (int i = 0; i < 3000; ++i) {
    const std::string text = Mutate(&rng, seeds[i % seeds.size()], alphabet);
    JsonSchemaOptions o;
    o.strict = i % 2 == 0;
    o.flexible_whitespace = i % 3 == 0;
    Result<JsonSchemaGrammar> r = JsonSchemaToGrammar(text, o);
    Exercise(r.ok() ? Result<Grammar>(std::move(r->grammar)) : Result<Grammar>(r.status()), &rng,
             "{}[]\":,01ab-");
  }
}

TEST(GrammarFuzzTest, PathologicalInputsFailCleanly) {
  EXPECT_FALSE(RegexToGrammar(std::string(5000, '(')).ok());
  EXPECT_FALSE(EbnfToGrammar("root ::= " + std::string(5000, '(')).ok());
  std::string deep;
  for (int i = 0; i < 500; ++i) deep += R"({"type":"array","items":)";
  deep += "true" + std::string(500, '}');
  EXPECT_FALSE(JsonSchemaToGrammar(deep).ok());
  // Nested repetitions stay linear in size, but are so ambiguous that Earley sets explode: the
  // matcher refuses the step instead of hanging.
  const CompiledGrammar g = testing::MustCompile(RegexToGrammar("((a{0,100}){0,100}){0,100}"));
  GrammarMatcher m(g, testing::ByteVocab());
  bool all = true;
  for (int i = 0; i < 300 && all; ++i) all = m.AcceptBytes("a");
  EXPECT_TRUE(all || m.ResourceExhausted());
  const CompiledGrammar small = testing::MustCompile(RegexToGrammar("((a{0,3}){0,3}){0,3}"));
  EXPECT_TRUE(testing::Matches(small, std::string(27, 'a')));
  EXPECT_FALSE(testing::Matches(small, std::string(28, 'a')));
}

}  // namespace
}  // namespace deepinfer::grammar
