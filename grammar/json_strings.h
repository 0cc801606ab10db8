// Grammar pieces for JSON text: whitespace, string characters and strings (with length bounds),
// numbers, any value, literal values, `format` contents and key exclusion. Used by the JSON
// Schema front end; each piece is built once per grammar and shared.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/status.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

class JsonPieces {
 public:
  JsonPieces(Grammar* g, bool flexible_whitespace) : g_(g), flexible_(flexible_whitespace) {}

  /// Appends the whitespace allowed between JSON tokens (nothing in compact mode).
  void Ws(Sequence* seq);
  /// Appends ws + literal + ws, e.g. Punct(",").
  void Punct(Sequence* seq, std::string_view p);
  /// One character inside a JSON string: an unescaped scalar value, a short escape, \uXXXX of a
  /// non-surrogate or a surrogate pair. `canonical`: only one spelling per code point.
  Symbol Char(bool canonical = false);
  /// A JSON string with min..max characters (max < 0: unbounded).
  Symbol String(int min = 0, int max = -1);
  /// "content" (quotes around a content symbol).
  Symbol Quoted(Symbol content);
  /// Integers; sign: 0 any, 1 non-negative, 2 positive, -1 non-positive, -2 negative.
  Symbol Integer(int sign = 0);
  /// Integers in [lo, hi] exactly (no leading zeros, no "-0"); an absent bound is unbounded.
  /// Bounds must be within +-1e18.
  Symbol IntegerRange(bool has_lo, int64_t lo, bool has_hi, int64_t hi);
  /// Numbers in a range with integer bounds (each optional, inclusive or exclusive), exactly,
  /// written without exponent; no "-0". Bounds must be within +-1e18.
  Symbol NumberRange(bool has_lo, int64_t lo, bool lo_excl, bool has_hi, int64_t hi, bool hi_excl);
  /// Numbers (JSON number syntax); non_negative forbids the minus sign.
  Symbol Number(bool non_negative = false);
  /// Any JSON value / object / array.
  Symbol Value();
  Symbol AnyObject();
  Symbol AnyArray();
  /// The content (between the quotes) of a string of `format`; appends to *warnings when the
  /// format is simplified. InvalidArgument for unknown formats.
  Result<Symbol> FormatContent(std::string_view format, std::vector<std::string>* warnings);
  /// Content of a key: canonical-spelling characters, not equal to any of `names`.
  Symbol KeyContentExcept(const std::vector<std::string>& names);
  /// The JSON encoding of a string (canonical: escapes only `"` `\` and controls).
  static std::string EncodeString(std::string_view utf8);

 private:
  Symbol SameLength(const std::string& a, const std::string& b);
  Symbol NonNegativeRange(int64_t lo, bool has_hi, int64_t hi);
  void Magnitudes(int64_t a, bool a_excl, bool has_b, int64_t b, bool b_excl,
                  std::vector<Sequence>* alts);

  Grammar* g_;
  bool flexible_;
  Symbol ws_{}, char_{}, char_canon_{}, value_{}, object_{}, array_{}, string_{};
  bool have_ws_ = false, have_char_ = false, have_canon_ = false, have_value_ = false;
  bool have_string_ = false;
};

}  // namespace deepinfer::grammar
