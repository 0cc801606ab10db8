#include "grammar/ebnf.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "grammar/unicode.h"

namespace deepinfer::grammar {

namespace {

constexpr int kMaxRepeat = 1000;
constexpr int kMaxDepth = 200;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

class EbnfParser {
 public:
  explicit EbnfParser(std::string_view src) : src_(src) {}

  Result<Grammar> Run(std::string_view root) {
    SkipSpace();
    while (!AtEnd()) {
      const std::string name = Name();
      if (name.empty()) return Error("expected a rule name");
      SkipSpace();
      if (src_.substr(pos_, 3) != "::=") return Error("expected '::=' after '" + name + "'");
      pos_ += 3;
      const int32_t r = RuleId(name);
      if (!defined_.insert(r).second) return Error("rule '" + name + "' is defined twice");
      Symbol body;
      DI_RETURN_IF_ERROR(Alternation(0, &body));
      g_.AddAlternative(r, {body});
      SkipSpace();
    }
    for (const auto& [name, id] : ids_) {
      if (!defined_.count(id))
        return InvalidArgument("ebnf: rule '" + name + "' is used but not defined");
    }
    auto it = ids_.find(std::string(root));
    if (it == ids_.end()) return InvalidArgument("ebnf: no '" + std::string(root) + "' rule");
    g_.set_start(it->second);
    return std::move(g_);
  }

 private:
  Status Error(const std::string& what) const {
    int line = 1;
    for (size_t i = 0; i < pos_ && i < src_.size(); ++i) line += src_[i] == '\n';
    return InvalidArgument("ebnf: " + what + " (line " + std::to_string(line) + ")");
  }
  bool AtEnd() const { return pos_ >= src_.size(); }
  char Peek(size_t k = 0) const { return pos_ + k < src_.size() ? src_[pos_ + k] : '\0'; }

  void SkipSpace() {
    while (!AtEnd()) {
      if (Peek() == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else if (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }
  std::string Name() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return std::string(src_.substr(start, pos_ - start));
  }
  int32_t RuleId(const std::string& name) {
    auto [it, inserted] = ids_.emplace(name, 0);
    if (inserted) {
      it->second = g_.AddRule(name);
    }
    return it->second;
  }
  // True when the next tokens are `name ::=` (the start of the next rule).
  bool AtRuleStart() const {
    size_t p = pos_;
    while (p < src_.size() && IsNameChar(src_[p])) ++p;
    if (p == pos_) return false;
    while (p < src_.size() &&
           (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\n' || src_[p] == '\r')) {
      ++p;
    }
    return src_.substr(p, 3) == "::=";
  }

  Status Alternation(int depth, Symbol* out) {
    if (depth > kMaxDepth) return Error("groups nested too deeply");
    std::vector<Sequence> alts;
    do {
      Sequence seq;
      while (true) {
        SkipSpace();
        if (AtEnd() || Peek() == '|' || Peek() == ')' || AtRuleStart()) break;
        Symbol s;
        DI_RETURN_IF_ERROR(Quantified(depth, &s));
        seq.push_back(s);
      }
      alts.push_back(std::move(seq));
    } while (Peek() == '|' && ++pos_);
    *out = g_.Choice(std::move(alts), "alt");
    return Status::Ok();
  }

  Status Int(int* v) {
    const size_t start = pos_;
    long long n = 0;
    while (Peek() >= '0' && Peek() <= '9')
      n = std::min<long long>(n * 10 + (src_[pos_++] - '0'), 1LL << 30);
    *v = static_cast<int>(n);
    return pos_ > start ? Status::Ok() : Error("expected a number in {m,n}");
  }

  Status Quantified(int depth, Symbol* out) {
    DI_RETURN_IF_ERROR(Atom(depth, out));
    while (true) {
      const char c = Peek();
      if (c == '?') {
        *out = g_.Optional(*out);
      } else if (c == '*') {
        *out = g_.Star(*out);
      } else if (c == '+') {
        *out = g_.Plus(*out);
      } else if (c == '{') {
        ++pos_;
        int min = 0, max = 0;
        SkipSpace();
        if (Peek() != ',') DI_RETURN_IF_ERROR(Int(&min));  // {,n} means {0,n}
        max = min;
        SkipSpace();
        if (Peek() == ',') {
          ++pos_;
          SkipSpace();
          if (Peek() == '}') {
            max = -1;
          } else {
            DI_RETURN_IF_ERROR(Int(&max));
          }
          SkipSpace();
        }
        if (Peek() != '}') return Error("expected '}' in repetition");
        if (max >= 0 && max < min) return Error("repetition {m,n} with n < m");
        if (min > kMaxRepeat || max > kMaxRepeat) {
          return Error("repetition count above " + std::to_string(kMaxRepeat));
        }
        *out = g_.Repeat(*out, min, max);
      } else {
        return Status::Ok();
      }
      ++pos_;
    }
  }

  Status Hex(int digits, uint32_t* v) {
    *v = 0;
    for (int k = 0; k < digits; ++k) {
      const char h = Peek();
      int d = h >= '0' && h <= '9'   ? h - '0'
              : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                     : -1;
      if (d < 0) return Error("bad hex escape");
      *v = *v * 16 + d;
      ++pos_;
    }
    return Status::Ok();
  }

  // One (possibly escaped) code point of a literal or class.
  Status Char(uint32_t* cp) {
    if (AtEnd()) return Error("unterminated literal or class");
    if (Peek() != '\\') {
      if (!DecodeUtf8(src_, &pos_, cp)) return Error("invalid UTF-8");
      return Status::Ok();
    }
    ++pos_;
    const char c = Peek();
    ++pos_;
    switch (c) {
      case 'n':
        *cp = '\n';
        return Status::Ok();
      case 't':
        *cp = '\t';
        return Status::Ok();
      case 'r':
        *cp = '\r';
        return Status::Ok();
      case 'f':
        *cp = '\f';
        return Status::Ok();
      case 'v':
        *cp = '\v';
        return Status::Ok();
      case 'b':
        *cp = '\b';
        return Status::Ok();
      case '0':
        *cp = 0;
        return Status::Ok();
      case 'x':
        return Hex(2, cp);
      case 'u':
        return Hex(4, cp);
      case 'U':
        return Hex(8, cp);
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
        *cp = static_cast<uint8_t>(c);
        return Status::Ok();
      default:
        --pos_;
        return Error(std::string("unknown escape \\") + c);
    }
  }

  Status Atom(int depth, Symbol* out) {
    const char c = Peek();
    if (c == '(') {
      ++pos_;
      DI_RETURN_IF_ERROR(Alternation(depth + 1, out));
      if (Peek() != ')') return Error("missing ')'");
      ++pos_;
      return Status::Ok();
    }
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (Peek() != '"') {
        if (AtEnd() || Peek() == '\n') return Error("unterminated string literal");
        uint32_t cp;
        DI_RETURN_IF_ERROR(Char(&cp));
        if (cp > kMaxCodePoint) return Error("code point out of range");
        AppendUtf8(cp, &bytes);  // escapes name code points, as in llama.cpp
      }
      ++pos_;
      *out = g_.Group(Grammar::Literal(bytes), "literal");
      return Status::Ok();
    }
    if (c == '[') {
      ++pos_;
      const bool negate = Peek() == '^' && ++pos_;
      CodeSet set;
      while (Peek() != ']') {
        if (AtEnd()) return Error("missing ']'");
        uint32_t lo, hi;
        DI_RETURN_IF_ERROR(Char(&lo));
        hi = lo;
        if (Peek() == '-' && Peek(1) != ']') {
          ++pos_;
          DI_RETURN_IF_ERROR(Char(&hi));
          if (hi < lo) return Error("range out of order in character class");
        }
        set.push_back({lo, hi});
      }
      ++pos_;
      set = Normalize(std::move(set));
      *out = Utf8Class(&g_, negate ? Complement(set) : set);
      return Status::Ok();
    }
    if (c == '.') {
      ++pos_;
      *out = Utf8Class(&g_, Normalize({{0, kMaxCodePoint}}));
      return Status::Ok();
    }
    if (c == '<' || c == '!') return Error("token references <...> are not supported");
    if (IsNameChar(c)) {
      *out = Symbol::Rule(RuleId(Name()));
      return Status::Ok();
    }
    return Error(std::string("unexpected '") + c + "'");
  }

  std::string_view src_;
  size_t pos_ = 0;
  Grammar g_;
  std::map<std::string, int32_t> ids_;
  std::set<int32_t> defined_;  // rule ids that have a definition
};

}  // namespace

Result<Grammar> EbnfToGrammar(std::string_view text, std::string_view root) {
  return EbnfParser(text).Run(root);
}

}  // namespace deepinfer::grammar
