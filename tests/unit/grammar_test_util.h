// Helpers for the grammar tests: a byte-level vocabulary and whole-string matching.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"

namespace deepinfer::grammar::testing {

/// Ids 0..255 are the single bytes; id 256 is EOS.
inline const TokenVocabulary& ByteVocab() {
  static const TokenVocabulary* v = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
    tokens.push_back("<eos>");
    return new TokenVocabulary(std::move(tokens), {}, {256});
  }();
  return *v;
}

/// True when the whole of `text` is a string of the grammar.
inline bool Matches(const CompiledGrammar& g, std::string_view text) {
  GrammarMatcher m(g, ByteVocab());
  return m.AcceptBytes(text) && m.CanTerminate();
}

inline CompiledGrammar MustCompile(Result<Grammar> g) {
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) std::abort();
  Result<CompiledGrammar> c = CompiledGrammar::Compile(*g);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) std::abort();
  return std::move(*c);
}

inline bool MaskHas(const std::vector<uint32_t>& mask, int32_t id) {
  return (mask[id >> 5] >> (id & 31)) & 1;
}

/// A JSON Schema with texts it must accept and texts it must reject.
struct SchemaCase {
  const char* schema;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

/// Every schema compiles (strict: with unenforceable keywords refused, so the grammar is exact)
/// and decides its texts as listed.
inline void ExpectSchemasDecide(const std::vector<SchemaCase>& cases, bool strict) {
  for (const SchemaCase& c : cases) {
    JsonSchemaOptions options;
    options.strict = strict;
    auto r = JsonSchemaToGrammar(c.schema, options);
    ASSERT_TRUE(r.ok()) << c.schema << ": " << r.status().ToString();
    const CompiledGrammar g = MustCompile(std::move(r->grammar));
    for (const std::string& t : c.accept) EXPECT_TRUE(Matches(g, t)) << c.schema << "\n  " << t;
    for (const std::string& t : c.reject) EXPECT_FALSE(Matches(g, t)) << c.schema << "\n  " << t;
  }
}

}  // namespace deepinfer::grammar::testing
