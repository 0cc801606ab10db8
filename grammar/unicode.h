// Code-point sets and their UTF-8 byte automata, shared by the regex and JSON Schema front ends.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace deepinfer::grammar {

struct CodeRange {
  uint32_t lo;
  uint32_t hi;  // inclusive
};
/// Sorted, disjoint, non-adjacent ranges of scalar values (no surrogates) after Normalize().
using CodeSet = std::vector<CodeRange>;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

/// Sorts and merges the ranges and removes the surrogates D800-DFFF.
CodeSet Normalize(CodeSet set);
/// All scalar values not in `set` (which must be normalized).
CodeSet Complement(const CodeSet& set);
/// `a` minus `b` (both normalized).
CodeSet Subtract(const CodeSet& a, const CodeSet& b);
bool Contains(const CodeSet& set, uint32_t cp);

/// A symbol matching exactly the UTF-8 encodings of the code points of `set` (normalized).
Symbol Utf8Class(Grammar* g, const CodeSet& set);
/// A symbol matching the code points of `set` as they may appear inside a JSON string literal:
/// unescaped where JSON allows it, `"` `\` `/` and control characters in their escaped forms.
/// `canonical`: one spelling per code point (no `\/`, lowercase \u00xx), so that distinct
/// code-point strings never share an encoding.
Symbol JsonCharClass(Grammar* g, const CodeSet& set, bool canonical = false);

void AppendUtf8(uint32_t cp, std::string* out);
/// Decodes one code point at *i (advancing it); false on invalid UTF-8.
bool DecodeUtf8(std::string_view s, size_t* i, uint32_t* cp);

}  // namespace deepinfer::grammar
