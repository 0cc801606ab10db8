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
  /// A decimal bound: sign, integer part (<= 1e18) and fraction digits without trailing zeros.
  struct Decimal {
    bool neg = false;
    int64_t ip = 0;
    std::string frac;
  };
  /// The exact decimal value of the shortest spelling of v; false beyond +-1e18 or with more
  /// than 40 fraction digits.
  static bool ToDecimal(double v, Decimal* out);
  /// Numbers in a range with decimal bounds (each optional, inclusive or exclusive), exactly,
  /// written without exponent; no "-0".
  Symbol DecimalRange(bool has_lo, const Decimal& lo, bool lo_excl, bool has_hi, const Decimal& hi,
                      bool hi_excl);
  /// Numbers with a nonzero fraction digit, without exponent (never integers).
  Symbol NonIntegerNumber();
  /// Multiples of q (integers only when `integer`), written without exponent. InvalidArgument
  /// when the residue automaton would be too large (q * 10^fraction digits above ~4096).
  Result<Symbol> MultipleOf(double q, bool integer);
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
  // Fraction digit strings: nonempty alternatives, and whether the empty string belongs.
  struct FracLang {
    std::vector<Sequence> alts;
    bool nullable = false;
  };
  Symbol FracSymbol(FracLang l);
  Symbol OptionalFraction(FracLang l);  // "" when nullable, "." and a nonempty member
  FracLang AnyFraction();
  FracLang FracBound(const std::string& f, size_t i, bool lower, bool excl);
  FracLang FracBetween(const std::string& a, bool a_excl, const std::string& b, bool b_excl,
                       size_t i);
  void DecimalMagnitudes(const Decimal& a, bool a_excl, bool has_b, const Decimal& b, bool b_excl,
                         std::vector<Sequence>* alts);

  Grammar* g_;
  bool flexible_;
  Symbol ws_{}, char_{}, char_canon_{}, value_{}, object_{}, array_{}, string_{};
  bool have_ws_ = false, have_char_ = false, have_canon_ = false, have_value_ = false;
  bool have_string_ = false;
};

}  // namespace deepinfer::grammar
