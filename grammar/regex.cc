#include "grammar/regex.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "grammar/unicode.h"

namespace deepinfer::grammar {

namespace {

constexpr int kMaxRepeat = 1000;
constexpr int kMaxDepth = 200;

const CodeSet& Digits() {
  static const CodeSet s = {{'0', '9'}};
  return s;
}
const CodeSet& Word() {
  static const CodeSet s = Normalize({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
  return s;
}
const CodeSet& Space() {  // ECMA-262 WhiteSpace and LineTerminator
  static const CodeSet s = Normalize({{9, 13},
                                      {' ', ' '},
                                      {0xA0, 0xA0},
                                      {0x1680, 0x1680},
                                      {0x2000, 0x200A},
                                      {0x2028, 0x2029},
                                      {0x202F, 0x202F},
                                      {0x205F, 0x205F},
                                      {0x3000, 0x3000},
                                      {0xFEFF, 0xFEFF}});
  return s;
}

class RegexParser {
 public:
  RegexParser(Grammar* g, std::string_view pattern, const RegexOptions& o)
      : g_(g), src_(pattern), opt_(o) {}

  Result<Symbol> Run() {
    size_t i = 0;
    while (i < src_.size()) {
      uint32_t cp;
      if (!DecodeUtf8(src_, &i, &cp)) return InvalidArgument("regex: pattern is not valid UTF-8");
      cps_.push_back(cp);
    }
    Symbol out;
    DI_RETURN_IF_ERROR(Alternation(0, &out));
    if (pos_ < cps_.size()) return Error("unmatched ')'");
    return out;
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("regex: " + what + " at offset " + std::to_string(pos_) + " of /" +
                           std::string(src_) + "/");
  }
  bool AtEnd() const { return pos_ >= cps_.size(); }
  uint32_t Peek(size_t k = 0) const { return pos_ + k < cps_.size() ? cps_[pos_ + k] : 0; }
  bool Eat(uint32_t c) {
    if (AtEnd() || cps_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  Symbol Class(const CodeSet& set) {
    return opt_.json_string ? JsonCharClass(g_, set) : Utf8Class(g_, set);
  }
  Symbol AnyStar() { return g_->Star(Class({{0, kMaxCodePoint}})); }

  Status Alternation(int depth, Symbol* out) {
    if (depth > kMaxDepth) return Error("groups nested too deeply");
    std::vector<Sequence> alts;
    do {
      Sequence seq;
      const bool top = depth == 0;
      const bool anchored_start = Eat('^');
      if (anchored_start && !top) return Error("anchor ^ inside a group (only at the ends)");
      if (top && opt_.search && !anchored_start) seq.push_back(AnyStar());
      bool anchored_end = false;
      while (!AtEnd() && Peek() != '|' && Peek() != ')') {
        if (Peek() == '$') {
          ++pos_;
          if (!top || (!AtEnd() && Peek() != '|')) return Error("anchor $ not at the end");
          anchored_end = true;
          break;
        }
        Symbol atom;
        DI_RETURN_IF_ERROR(Quantified(depth, &atom));
        seq.push_back(atom);
      }
      if (top && opt_.search && !anchored_end) seq.push_back(AnyStar());
      alts.push_back(std::move(seq));
    } while (Eat('|'));
    *out = g_->Choice(std::move(alts), "regex");
    return Status::Ok();
  }

  // Parses {m}, {m,}, {m,n}; false (position unchanged) when it is not a quantifier.
  bool Braces(int* min, int* max) {
    size_t p = pos_ + 1;
    auto number = [&](int* v) {
      const size_t start = p;
      long long n = 0;
      while (p < cps_.size() && cps_[p] >= '0' && cps_[p] <= '9') {
        n = std::min<long long>(n * 10 + (cps_[p] - '0'), 1LL << 30);
        ++p;
      }
      *v = static_cast<int>(n);
      return p > start;
    };
    if (!number(min)) return false;
    *max = *min;
    if (p < cps_.size() && cps_[p] == ',') {
      ++p;
      if (!number(max)) *max = -1;
    }
    if (p >= cps_.size() || cps_[p] != '}') return false;
    pos_ = p + 1;
    return true;
  }

  Status Quantified(int depth, Symbol* out) {
    Symbol atom;
    DI_RETURN_IF_ERROR(Atom(depth, &atom));
    while (!AtEnd()) {
      const uint32_t c = Peek();
      int min = 0, max = 0;
      if (c == '?') {
        ++pos_;
        atom = g_->Optional(atom);
      } else if (c == '*') {
        ++pos_;
        atom = g_->Star(atom);
      } else if (c == '+') {
        ++pos_;
        atom = g_->Plus(atom);
      } else if (c == '{' && Braces(&min, &max)) {
        if (max >= 0 && max < min) return Error("repetition {m,n} with n < m");
        if (min > kMaxRepeat || max > kMaxRepeat) {
          return Error("repetition count above " + std::to_string(kMaxRepeat));
        }
        atom = g_->Repeat(atom, min, max);
      } else {
        break;
      }
      if (Eat('?')) continue;  // lazy: same language
      if (Peek() == '+') return Error("possessive quantifier");
    }
    *out = atom;
    return Status::Ok();
  }

  Status Atom(int depth, Symbol* out) {
    const uint32_t c = Peek();
    if (c == '(') {
      ++pos_;
      if (Eat('?')) {
        if (Eat(':')) {
        } else if (Peek() == '<' && Peek(1) != '=' && Peek(1) != '!') {
          while (!AtEnd() && Peek() != '>') ++pos_;
          if (!Eat('>')) return Error("unterminated group name");
        } else if (Peek() == '=' || Peek() == '!' || Peek() == '<') {
          return Error("lookaround assertion is not supported");
        } else {
          return Error("group flag or extension (?" + std::string(1, static_cast<char>(Peek())) +
                       " is not supported");
        }
      }
      DI_RETURN_IF_ERROR(Alternation(depth + 1, out));
      if (!Eat(')')) return Error("missing ')'");
      return Status::Ok();
    }
    if (c == '[') {
      ++pos_;
      CodeSet set;
      DI_RETURN_IF_ERROR(ClassBody(&set));
      *out = Class(set);
      return Status::Ok();
    }
    if (c == '.') {
      ++pos_;
      *out = Class(Normalize({{0, 9}, {11, kMaxCodePoint}}));
      return Status::Ok();
    }
    if (c == '*' || c == '+' || c == '?') return Error("nothing to repeat");
    if (c == '^' || c == '$') return Error("anchor not at the start or end of the pattern");
    CodeSet set;
    if (c == '\\') {
      ++pos_;
      DI_RETURN_IF_ERROR(Escape(false, &set));
    } else {
      ++pos_;
      set = {{c, c}};
    }
    *out = Class(Normalize(set));
    return Status::Ok();
  }

  Status Hex(int digits, uint32_t* v) {
    *v = 0;
    for (int k = 0; k < digits; ++k) {
      const uint32_t h = Peek();
      int d = h >= '0' && h <= '9'   ? h - '0'
              : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                     : -1;
      if (d < 0 || AtEnd()) return Error("bad hex escape");
      *v = *v * 16 + d;
      ++pos_;
    }
    return Status::Ok();
  }

  // After a backslash: a class escape or a single character.
  Status Escape(bool in_class, CodeSet* set) {
    if (AtEnd()) return Error("trailing backslash");
    const uint32_t c = cps_[pos_++];
    uint32_t v = 0;
    switch (c) {
      case 'd':
        *set = Digits();
        return Status::Ok();
      case 'D':
        *set = Complement(Digits());
        return Status::Ok();
      case 'w':
        *set = Word();
        return Status::Ok();
      case 'W':
        *set = Complement(Word());
        return Status::Ok();
      case 's':
        *set = Space();
        return Status::Ok();
      case 'S':
        *set = Complement(Space());
        return Status::Ok();
      case 'n':
        v = '\n';
        break;
      case 't':
        v = '\t';
        break;
      case 'r':
        v = '\r';
        break;
      case 'f':
        v = '\f';
        break;
      case 'v':
        v = '\v';
        break;
      case '0':
        v = 0;
        break;
      case 'x':
        DI_RETURN_IF_ERROR(Hex(2, &v));
        break;
      case 'u':
        if (Eat('{')) {
          while (!AtEnd() && Peek() != '}' && v <= kMaxCodePoint) {
            uint32_t d;
            DI_RETURN_IF_ERROR(Hex(1, &d));
            v = v * 16 + d;
          }
          if (!Eat('}') || v > kMaxCodePoint) return Error("bad \\u{...} escape");
        } else {
          DI_RETURN_IF_ERROR(Hex(4, &v));
        }
        break;
      case 'b':
        if (!in_class) return Error("word boundary \\b is not supported");
        v = 8;
        break;
      default:
        if (c >= '1' && c <= '9') return Error("backreference is not supported");
        if (c == 'k') return Error("named backreference is not supported");
        if (c < 0x80 && std::isalnum(static_cast<int>(c))) {
          return Error(std::string("unknown escape \\") + static_cast<char>(c));
        }
        v = c;
    }
    *set = {{v, v}};
    return Status::Ok();
  }

  Status ClassBody(CodeSet* out) {
    const bool negate = Eat('^');
    CodeSet set;
    bool first = true;
    while (true) {
      if (AtEnd()) return Error("missing ']'");
      if (Peek() == ']' && !first) break;
      first = false;
      CodeSet lo_set;
      if (Eat('\\')) {
        DI_RETURN_IF_ERROR(Escape(true, &lo_set));
      } else {
        const uint32_t c = cps_[pos_++];
        lo_set = {{c, c}};
      }
      const bool single = lo_set.size() == 1 && lo_set[0].lo == lo_set[0].hi;
      if (single && Peek() == '-' && Peek(1) != ']' && pos_ + 1 < cps_.size()) {
        ++pos_;
        CodeSet hi_set;
        if (Eat('\\')) {
          DI_RETURN_IF_ERROR(Escape(true, &hi_set));
        } else {
          const uint32_t c = cps_[pos_++];
          hi_set = {{c, c}};
        }
        if (hi_set.size() != 1 || hi_set[0].lo != hi_set[0].hi) {
          return Error("class escape as a range bound");
        }
        if (hi_set[0].lo < lo_set[0].lo) return Error("range out of order in character class");
        set.push_back({lo_set[0].lo, hi_set[0].lo});
      } else {
        set.insert(set.end(), lo_set.begin(), lo_set.end());
      }
    }
    ++pos_;  // ']'
    set = Normalize(std::move(set));
    *out = negate ? Complement(set) : set;
    return Status::Ok();
  }

  Grammar* g_;
  std::string_view src_;
  RegexOptions opt_;
  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
};

}  // namespace

Result<Symbol> AddRegex(Grammar* g, std::string_view pattern, const RegexOptions& options) {
  return RegexParser(g, pattern, options).Run();
}

Result<Grammar> RegexToGrammar(std::string_view pattern, const RegexOptions& options) {
  Grammar g;
  const int32_t root = g.AddRule("root");
  g.set_start(root);
  Result<Symbol> s = AddRegex(&g, pattern, options);
  if (!s.ok()) return s.status();
  g.AddAlternative(root, {*s});
  return g;
}

}  // namespace deepinfer::grammar
