// The matcher's token mask against brute force on small vocabularies: token t is allowed iff
// accepting it leaves a state from which some continuation completes the grammar (found by a
// bounded search over bytes). Also rollback, termination and jump-forward.
#include <random>

#include "grammar/ebnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "tests/unit/grammar_test_util.h"

namespace deepinfer::grammar {
namespace {

using testing::MaskHas;
using testing::MustCompile;

struct SmallVocab {
  std::vector<std::string> tokens;
  int32_t eos;
  int32_t special;
};

// The alphabet's single bytes, `n_random` random tokens of 2-4 alphabet bytes, an empty token,
// a special token and EOS.
SmallVocab MakeVocab(const std::string& alphabet, int n_random, uint32_t seed) {
  std::mt19937 rng(seed);
  SmallVocab v;
  for (char c : alphabet) v.tokens.push_back(std::string(1, c));
  for (int i = 0; i < n_random; ++i) {
    std::string t(2 + rng() % 3, ' ');
    for (char& c : t) c = alphabet[rng() % alphabet.size()];
    v.tokens.push_back(t);
  }
  v.tokens.push_back("");
  v.special = static_cast<int32_t>(v.tokens.size());
  v.tokens.push_back("<special>");
  v.eos = static_cast<int32_t>(v.tokens.size());
  v.tokens.push_back("<eos>");
  return v;
}

// Some completion of at most `depth` more bytes exists. `order` lists bytes to try, closers first.
bool Completable(GrammarMatcher* m, const std::string& order, int depth) {
  if (m->CanTerminate()) return true;
  if (depth == 0) return false;
  for (char c : order) {
    if (!m->AcceptBytes(std::string_view(&c, 1))) continue;
    const bool ok = Completable(m, order, depth - 1);
    m->Rollback(1);
    if (ok) return true;
  }
  return false;
}

void CheckAgainstBruteForce(const CompiledGrammar& g, const std::string& alphabet,
                            const std::string& order, uint32_t seed, int walks, int steps,
                            int depth = 10) {
  const SmallVocab sv = MakeVocab(alphabet, 60, seed);
  std::vector<uint8_t> special(sv.tokens.size(), 0);
  special[sv.special] = 1;
  const TokenVocabulary vocab(sv.tokens, special, {sv.eos});
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(vocab.mask_words());
  int allowed_total = 0;
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(g, vocab);
    for (int s = 0; s < steps; ++s) {
      m.FillNextTokenBitmask(mask.data());
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < vocab.size(); ++t) {
        GrammarMatcher probe = m;
        bool want;
        if (t == sv.eos) {
          want = m.CanTerminate();
        } else {
          want = probe.AcceptToken(t) && Completable(&probe, order, depth);
        }
        ASSERT_EQ(MaskHas(mask, t), want)
            << "walk " << w << " step " << s << " token " << t << " \"" << sv.tokens[t] << "\"";
        if (want && t != sv.eos) allowed.push_back(t);
      }
      EXPECT_FALSE(MaskHas(mask, sv.special));
      allowed_total += static_cast<int>(allowed.size());
      if (allowed.empty()) break;
      ASSERT_TRUE(m.AcceptToken(allowed[rng() % allowed.size()]));
    }
  }
  EXPECT_GT(allowed_total, walks * 2);
}

TEST(GrammarMatcherTest, ArithmeticEbnfMatchesBruteForce) {
  const CompiledGrammar g =
      MustCompile(EbnfToGrammar("root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\n"
                                "term ::= [0-9]+ | \"(\" expr \")\"\n"));
  CheckAgainstBruteForce(g, "0123+-()", ")0+-(", 1, 30, 20);
}

TEST(GrammarMatcherTest, RegexMatchesBruteForce) {
  const CompiledGrammar g = MustCompile(RegexToGrammar("(ab|a[0-9]*)+c?"));
  CheckAgainstBruteForce(g, "abc012", "bc0a", 2, 30, 20);
}

TEST(GrammarMatcherTest, TokensSplittingUtf8MatchBruteForce) {
  // α-ω are CE B1..CF 89: tokens over these bytes often end inside a character.
  const CompiledGrammar g = MustCompile(RegexToGrammar("[α-ω]+( [α-ω]+)?"));
  CheckAgainstBruteForce(g, "\xCE\xCF\xB1\xB2\x89\x80 ", "\xB1\xCE\xCF\x89 ", 3, 30, 20);
}

TEST(GrammarMatcherTest, JsonSchemaMatchesBruteForce) {
  auto s = JsonSchemaToGrammar(
      R"({"type":"object","properties":{"a":{"type":"integer"},
          "b":{"type":"array","items":{"enum":["x","yy"]},"maxItems":2}},
          "required":["a"],"additionalProperties":false})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const CompiledGrammar g = MustCompile(std::move(s->grammar));
  CheckAgainstBruteForce(g, "{}[]\",:abxy01-", "\"}]0:,axyb{[1-", 4, 30, 20, 16);
}

TEST(GrammarMatcherTest, AnyJsonMatchesBruteForce) {
  const CompiledGrammar g = MustCompile(AnyJsonGrammar());
  CheckAgainstBruteForce(g, "{}[]\",:1.enul\\", "\":]}1,.enul\\{[", 5, 30, 20);
}

// The cached masks (context-independent tokens per top-set key plus a walk below the frontier)
// equal full trie walks in every state of random walks through nested JSON, where one key (e.g.
// inside a string) recurs in many contexts.
TEST(GrammarMatcherTest, MaskCacheGivesTheFullWalksMasks) {
  const CompiledGrammar g = MustCompile(AnyJsonGrammar(/*flexible_whitespace=*/true));
  ASSERT_GT(g.num_dfas(), 0) << "the string and number rules should be DFAs";
  const SmallVocab sv = MakeVocab("{}[]\",:1.-eaE \\u0", 400, 11);
  const TokenVocabulary vocab(sv.tokens, {}, {sv.eos});
  std::mt19937 rng(11);
  std::vector<uint32_t> cached(vocab.mask_words()), full(vocab.mask_words());
  for (int w = 0; w < 40; ++w) {
    GrammarMatcher m(g, vocab);
    for (int s = 0; s < 40; ++s) {
      m.FillNextTokenBitmask(cached.data());
      GrammarMatcher plain = m;
      plain.set_mask_cache_enabled(false);
      plain.FillNextTokenBitmask(full.data());
      ASSERT_EQ(cached, full) << "walk " << w << " step " << s;
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < vocab.size(); ++t) {
        if (MaskHas(full, t) && t != sv.eos) allowed.push_back(t);
      }
      if (allowed.empty()) break;
      ASSERT_TRUE(m.AcceptToken(allowed[rng() % allowed.size()]));
    }
  }
  const MaskCache::Stats stats = g.mask_cache()->stats();
  EXPECT_GT(stats.hits, stats.misses * 4) << "states should recur";
}

TEST(GrammarMatcherTest, RegularRulesBecomeDfas) {
  // The whole regex is one DFA; GBNF recursion stays in the Earley grammar around DFA leaves.
  EXPECT_EQ(MustCompile(RegexToGrammar("[a-z]+@[a-z]+\\.(com|org)")).num_dfas(), 1);
  const CompiledGrammar g =
      MustCompile(EbnfToGrammar("root ::= \"(\" root \")\" | [0-9]+ (\",\" [0-9]+)*\n"));
  EXPECT_GE(g.num_dfas(), 1);
  EXPECT_TRUE(testing::Matches(g, "((12,3))"));
  EXPECT_FALSE(testing::Matches(g, "((12,3)"));
  EXPECT_FALSE(testing::Matches(g, "(,3)"));
}

TEST(GrammarMatcherTest, RollbackRestoresMasks) {
  const CompiledGrammar g = MustCompile(AnyJsonGrammar());
  const SmallVocab sv = MakeVocab("{}[]\",:a1", 40, 9);
  const TokenVocabulary vocab(sv.tokens, {}, {sv.eos});
  GrammarMatcher m(g, vocab);
  std::vector<std::vector<uint32_t>> masks;
  std::mt19937 rng(3);
  std::vector<uint32_t> mask(vocab.mask_words());
  for (int s = 0; s < 15; ++s) {
    m.FillNextTokenBitmask(mask.data());
    masks.push_back(mask);
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < vocab.size(); ++t) {
      if (MaskHas(mask, t) && t != sv.eos && !sv.tokens[t].empty()) allowed.push_back(t);
    }
    if (allowed.empty()) break;
    ASSERT_TRUE(m.AcceptToken(allowed[rng() % allowed.size()]));
  }
  ASSERT_GT(masks.size(), 3u);
  while (m.history_size() > 0) {
    const size_t k = static_cast<size_t>(m.history_size()) - 1;
    m.Rollback(1);
    m.FillNextTokenBitmask(mask.data());
    EXPECT_EQ(mask, masks[k]) << "after rolling back to step " << k;
  }
}

TEST(GrammarMatcherTest, EosTerminatesAndRollsBack) {
  const CompiledGrammar g = MustCompile(RegexToGrammar("ab?"));
  const TokenVocabulary vocab({"a", "b", "<eos>"}, {}, {2});
  GrammarMatcher m(g, vocab);
  EXPECT_FALSE(m.AcceptToken(2));  // cannot terminate yet
  ASSERT_TRUE(m.AcceptToken(0));
  std::vector<uint32_t> mask(1);
  m.FillNextTokenBitmask(mask.data());
  EXPECT_EQ(mask[0], 0b110u);
  ASSERT_TRUE(m.AcceptToken(2));
  EXPECT_TRUE(m.IsTerminated());
  m.FillNextTokenBitmask(mask.data());
  EXPECT_EQ(mask[0], 0u);
  EXPECT_FALSE(m.AcceptToken(1));
  m.Rollback(1);
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_TRUE(m.AcceptToken(1));
  EXPECT_FALSE(m.AcceptToken(0));  // failed accepts change nothing
  EXPECT_TRUE(m.CanTerminate());
  EXPECT_FALSE(m.AcceptToken(-1));
  EXPECT_FALSE(m.AcceptToken(3));
}

TEST(GrammarMatcherTest, JumpForwardReturnsTheForcedBytes) {
  const CompiledGrammar g = MustCompile(RegexToGrammar("abc(d|e)f"));
  const TokenVocabulary& v = testing::ByteVocab();
  GrammarMatcher m(g, v);
  EXPECT_EQ(m.JumpForward(), "abc");
  ASSERT_TRUE(m.AcceptBytes("abcd"));
  EXPECT_EQ(m.JumpForward(), "f");
  ASSERT_TRUE(m.AcceptBytes("f"));
  EXPECT_EQ(m.JumpForward(), "");  // can terminate
  auto s = JsonSchemaToGrammar(
      R"({"type":"object","properties":{"name":{"type":"string"}},"required":["name"],
          "additionalProperties":false})");
  ASSERT_TRUE(s.ok());
  const CompiledGrammar jg = MustCompile(std::move(s->grammar));
  GrammarMatcher jm(jg, v);
  EXPECT_EQ(jm.JumpForward(), "{\"name\":\"");
  EXPECT_EQ(jm.history_size(), 0);  // jump-forward does not consume
  // As tokens: longest match first, each accepted in turn, the bytes exactly the forced text.
  const TokenVocabulary words({"{", "{\"", "name", "na", "\":", "\"", ":", "x"}, {}, {});
  GrammarMatcher wm(jg, words);
  const std::vector<int32_t> ids = wm.JumpForwardTokens();
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 4, 5}));  // {" name ": "
  std::string bytes;
  for (int32_t id : ids) {
    bytes += words.token(id);
    EXPECT_TRUE(wm.AcceptToken(id)) << id;
  }
  EXPECT_EQ(bytes, "{\"name\":\"");
}

TEST(GrammarMatcherTest, LeftAndRightRecursionAndNullableCycles) {
  const CompiledGrammar g = MustCompile(EbnfToGrammar(
      "root ::= l \"|\" r\nl ::= l \"a\" | \"\"\nr ::= \"b\" r | e\ne ::= e e | \"\"\n"));
  for (const char* ok : {"|", "aaa|", "|bbb", "a|b"}) EXPECT_TRUE(testing::Matches(g, ok)) << ok;
  for (const char* bad : {"", "ba|", "|a"}) EXPECT_FALSE(testing::Matches(g, bad)) << bad;
}

}  // namespace
}  // namespace deepinfer::grammar
