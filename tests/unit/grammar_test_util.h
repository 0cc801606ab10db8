// Helpers for the grammar tests: a byte-level vocabulary and whole-string matching.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
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

}  // namespace deepinfer::grammar::testing
