// Number pieces of the JSON Schema front end: ranges with decimal bounds (exact over numbers
// written without exponent), non-integer numbers, and multipleOf through a residue automaton.
#include <charconv>
#include <cmath>

#include "grammar/json_strings.h"

namespace deepinfer::grammar {

namespace {

Symbol B(const ByteSet& s) { return Symbol::Bytes(s); }
Symbol Digit(char lo, char hi) {
  return B(ByteSet::Range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)));
}

// -1, 0, 1 as magnitude a <, ==, > b.
int Compare(const JsonPieces::Decimal& a, const JsonPieces::Decimal& b) {
  if (a.ip != b.ip) return a.ip < b.ip ? -1 : 1;
  return a.frac < b.frac ? -1 : a.frac > b.frac ? 1 : 0;  // no trailing zeros: lexicographic
}

}  // namespace

bool JsonPieces::ToDecimal(double v, Decimal* out) {
  if (!std::isfinite(v) || std::fabs(v) > 1e18) return false;
  char buf[512];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
  if (r.ec != std::errc()) return false;
  std::string s(buf, r.ptr);
  Decimal d;
  if (!s.empty() && s[0] == '-') {
    d.neg = true;
    s.erase(0, 1);
  }
  const size_t dot = s.find('.');
  const std::string ip = s.substr(0, dot);
  d.frac = dot == std::string::npos ? "" : s.substr(dot + 1);
  while (!d.frac.empty() && d.frac.back() == '0') d.frac.pop_back();
  if (d.frac.size() > 40 || ip.size() > 19) return false;
  d.ip = std::stoll(ip);
  if (d.ip == 0 && d.frac.empty()) d.neg = false;
  *out = d;
  return true;
}

Symbol JsonPieces::FracSymbol(FracLang l) {
  if (l.nullable) l.alts.push_back({});
  return l.alts.empty() ? g_->Nothing() : g_->Choice(std::move(l.alts), "frac_digits");
}

Symbol JsonPieces::OptionalFraction(FracLang l) {
  std::vector<Sequence> alts;
  if (l.nullable) alts.push_back({});
  if (!l.alts.empty()) {
    alts.push_back({B(ByteSet::Single('.')), g_->Choice(std::move(l.alts), "frac_digits")});
  }
  return alts.empty() ? g_->Nothing() : g_->Choice(std::move(alts), "fraction");
}

JsonPieces::FracLang JsonPieces::AnyFraction() {
  return {{{Digit('0', '9'), g_->Star(Digit('0', '9'))}}, true};
}

// Digit strings s (the digits after the point, zero-padded) with s >= f[i..] (lower) or
// s <= f[i..] (upper), strictly when excl. f has no trailing zeros.
JsonPieces::FracLang JsonPieces::FracBound(const std::string& f, size_t i, bool lower, bool excl) {
  const Symbol any = g_->Star(Digit('0', '9'));
  FracLang l;
  if (i >= f.size()) {  // the rest of the bound is zero
    if (lower && !excl) return AnyFraction();
    if (lower) return {{{g_->Star(Digit('0', '0')), Digit('1', '9'), any}}, false};
    if (!excl) return {{{g_->Plus(Digit('0', '0'))}}, true};
    return {{}, false};
  }
  const char d = f[i];
  if (lower && d < '9') l.alts.push_back({Digit(d + 1, '9'), any});
  if (!lower && d > '0') l.alts.push_back({Digit('0', d - 1), any});
  l.alts.push_back({Digit(d, d), FracSymbol(FracBound(f, i + 1, lower, excl))});
  l.nullable = !lower;  // 0 < f[i..], which is nonzero
  return l;
}

// Digit strings s with a[i..] <(=) s <(=) b[i..], given a[i..] < b[i..].
JsonPieces::FracLang JsonPieces::FracBetween(const std::string& a, bool a_excl,
                                             const std::string& b, bool b_excl, size_t i) {
  const char da = i < a.size() ? a[i] : '0', db = i < b.size() ? b[i] : '0';
  FracLang l;
  l.nullable = i >= a.size() && !a_excl;
  if (da == db) {
    l.alts.push_back({Digit(da, da), FracSymbol(FracBetween(a, a_excl, b, b_excl, i + 1))});
    return l;
  }
  l.alts.push_back({Digit(da, da), FracSymbol(FracBound(a, i + 1, true, a_excl))});
  if (db - da >= 2) l.alts.push_back({Digit(da + 1, db - 1), g_->Star(Digit('0', '9'))});
  l.alts.push_back({Digit(db, db), FracSymbol(FracBound(b, i + 1, false, b_excl))});
  return l;
}

// Unsigned decimals m written without exponent with a <(=) m <(=) b.
void JsonPieces::DecimalMagnitudes(const Decimal& a, bool a_excl, bool has_b, const Decimal& b,
                                   bool b_excl, std::vector<Sequence>* alts) {
  const auto lit = [&](int64_t n) { return g_->Group(Grammar::Literal(std::to_string(n))); };
  if (has_b) {
    const int c = Compare(a, b);
    if (c > 0) return;
    if (c == 0) {
      if (a_excl || b_excl) return;
      FracLang exact;
      if (a.frac.empty()) {
        exact = {{{g_->Plus(Digit('0', '0'))}}, true};
      } else {
        Sequence s = Grammar::Literal(a.frac);
        s.push_back(g_->Star(Digit('0', '0')));
        exact = {{s}, false};
      }
      alts->push_back({lit(a.ip), OptionalFraction(std::move(exact))});
      return;
    }
    if (a.ip == b.ip) {
      alts->push_back(
          {lit(a.ip), OptionalFraction(FracBetween(a.frac, a_excl, b.frac, b_excl, 0))});
      return;
    }
  }
  if (!has_b || a.ip + 1 <= b.ip - 1) {
    alts->push_back({NonNegativeRange(a.ip + 1, has_b, b.ip - 1), OptionalFraction(AnyFraction())});
  }
  alts->push_back({lit(a.ip), OptionalFraction(FracBound(a.frac, 0, true, a_excl))});
  if (has_b) alts->push_back({lit(b.ip), OptionalFraction(FracBound(b.frac, 0, false, b_excl))});
}

Symbol JsonPieces::DecimalRange(bool has_lo, const Decimal& lo, bool lo_excl, bool has_hi,
                                const Decimal& hi, bool hi_excl) {
  const Decimal zero;
  std::vector<Sequence> alts;
  if (!has_lo || lo.neg) {  // x < 0: "-" and a magnitude in (max(0, -hi), -lo]
    std::vector<Sequence> neg;
    if (has_hi && hi.neg) {
      DecimalMagnitudes(hi, hi_excl, has_lo, lo, lo_excl, &neg);
    } else {
      DecimalMagnitudes(zero, true, has_lo, lo, lo_excl, &neg);
    }
    if (!neg.empty()) {
      alts.push_back({B(ByteSet::Single('-')), g_->Choice(std::move(neg), "negative")});
    }
  }
  const bool hi_zero = has_hi && hi.ip == 0 && hi.frac.empty();
  if (!has_hi || (!hi.neg && !hi_zero) || (hi_zero && !hi_excl)) {  // x >= 0
    const bool lo_here = has_lo && !lo.neg;
    DecimalMagnitudes(lo_here ? lo : zero, lo_here && lo_excl, has_hi, hi, hi_excl, &alts);
  }
  return alts.empty() ? g_->Nothing() : g_->Choice(std::move(alts), "number_range");
}

Symbol JsonPieces::NonIntegerNumber() {
  const Symbol any = g_->Star(Digit('0', '9'));
  return g_->Group({g_->Optional(B(ByteSet::Single('-'))), Integer(1), B(ByteSet::Single('.')), any,
                    Digit('1', '9'), any},
                   "non_integer");
}

// x is a multiple of q = Q / 10^k exactly when x * 10^k is an integer multiple of Q: the integer
// digits and the first k fraction digits (zero-padded) form a multiple of Q and any further
// fraction digits are zeros. State (r, j): residue r mod Q after j fraction digits.
Result<Symbol> JsonPieces::MultipleOf(double q, bool integer) {
  Decimal d;
  if (!(q > 0) || !ToDecimal(q, &d) || d.neg) {
    return InvalidArgument("multipleOf " + std::to_string(q) + " is out of range");
  }
  const size_t k = d.frac.size();
  uint64_t modulus = static_cast<uint64_t>(d.ip);
  for (char c : d.frac) {
    if (modulus > 100000) break;
    modulus = modulus * 10 + static_cast<uint64_t>(c - '0');
  }
  if (modulus == 0 || modulus * (k + 1) > 4096) {
    return InvalidArgument("multipleOf " + std::to_string(q) + " needs too many states");
  }
  const int64_t m = static_cast<int64_t>(modulus);
  const auto accepting = [&](int64_t r, size_t j) {  // pad the missing fraction digits with 0
    for (size_t t = j; t < k; ++t) r = r * 10 % m;
    return r == 0;
  };
  // frac[j][r]: fraction digits after j of them, residue r; frac_ne: the same, nonempty.
  std::vector<std::vector<int32_t>> frac(k + 1, std::vector<int32_t>(m)), frac_ne = frac;
  std::vector<int32_t> int_rule(m);
  if (!integer) {
    for (size_t j = 0; j <= k; ++j) {
      for (int64_t r = 0; r < m; ++r) {
        frac[j][r] = g_->AddRule("mult_frac");
        frac_ne[j][r] = g_->AddRule("mult_frac1");
      }
    }
    for (size_t j = 0; j <= k; ++j) {
      for (int64_t r = 0; r < m; ++r) {
        if (j == k) {
          if (r == 0) {
            g_->AddAlternative(frac_ne[j][r], {Digit('0', '0'), Symbol::Rule(frac[j][r])});
          }
        } else {
          for (char c = '0'; c <= '9'; ++c) {
            const int64_t next = (r * 10 + (c - '0')) % m;
            g_->AddAlternative(frac_ne[j][r], {Digit(c, c), Symbol::Rule(frac[j + 1][next])});
          }
        }
        g_->AddAlternative(frac[j][r], {Symbol::Rule(frac_ne[j][r])});
        if (accepting(r, j)) g_->AddAlternative(frac[j][r], {});
      }
    }
  }
  for (int64_t r = 0; r < m; ++r) int_rule[r] = g_->AddRule("mult_int");
  const auto tail = [&](int32_t rule, int64_t r) {  // the end of the integer part at residue r
    if (accepting(r, 0)) g_->AddAlternative(rule, {});
    if (!integer) {
      g_->AddAlternative(rule, {B(ByteSet::Single('.')), Symbol::Rule(frac_ne[0][r])});
    }
  };
  for (int64_t r = 0; r < m; ++r) {
    for (char c = '0'; c <= '9'; ++c) {
      g_->AddAlternative(int_rule[r],
                         {Digit(c, c), Symbol::Rule(int_rule[(r * 10 + (c - '0')) % m])});
    }
    tail(int_rule[r], r);
  }
  const int32_t zero_tail = g_->AddRule("mult_zero");
  tail(zero_tail, 0);
  std::vector<Sequence> body = {{Digit('0', '0'), Symbol::Rule(zero_tail)}};
  for (char c = '1'; c <= '9'; ++c) {
    body.push_back({Digit(c, c), Symbol::Rule(int_rule[(c - '0') % m])});
  }
  const Symbol magnitude = g_->Choice(std::move(body), "multiple");
  return g_->Group({g_->Optional(B(ByteSet::Single('-'))), magnitude}, "multiple_of");
}

}  // namespace deepinfer::grammar
