#include "grammar/unicode.h"

#include <algorithm>
#include <cctype>

namespace deepinfer::grammar {

CodeSet Normalize(CodeSet set) {
  CodeSet split;
  for (CodeRange r : set) {
    r.hi = std::min(r.hi, kMaxCodePoint);
    if (r.lo > r.hi) continue;
    if (r.lo < 0xD800 && r.hi > 0xDFFF) {
      split.push_back({r.lo, 0xD7FF});
      split.push_back({0xE000, r.hi});
    } else if (r.lo >= 0xD800 && r.hi <= 0xDFFF) {
      continue;
    } else if (r.lo >= 0xD800 && r.lo <= 0xDFFF) {
      split.push_back({0xE000, r.hi});
    } else if (r.hi >= 0xD800 && r.hi <= 0xDFFF) {
      split.push_back({r.lo, 0xD7FF});
    } else {
      split.push_back(r);
    }
  }
  std::sort(split.begin(), split.end(), [](CodeRange a, CodeRange b) { return a.lo < b.lo; });
  CodeSet out;
  for (CodeRange r : split) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

CodeSet Complement(const CodeSet& set) {
  CodeSet out;
  uint32_t next = 0;
  for (CodeRange r : set) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return Normalize(std::move(out));
}

CodeSet Subtract(const CodeSet& a, const CodeSet& b) {
  CodeSet nb = Complement(b);
  CodeSet out;
  for (CodeRange x : a) {
    for (CodeRange y : nb) {
      const uint32_t lo = std::max(x.lo, y.lo), hi = std::min(x.hi, y.hi);
      if (lo <= hi) out.push_back({lo, hi});
    }
  }
  return Normalize(std::move(out));
}

bool Contains(const CodeSet& set, uint32_t cp) {
  for (CodeRange r : set) {
    if (cp >= r.lo && cp <= r.hi) return true;
  }
  return false;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool DecodeUtf8(std::string_view s, size_t* i, uint32_t* cp) {
  const auto at = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = at(*i);
  int len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
  if (len == 0 || *i + len > s.size()) return false;
  uint32_t c = len == 1 ? b0 : b0 & (0x7F >> len);
  for (int k = 1; k < len; ++k) {
    if ((at(*i + k) & 0xC0) != 0x80) return false;
    c = (c << 6) | (at(*i + k) & 0x3F);
  }
  static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kMin[len] || c > kMaxCodePoint || (c >= 0xD800 && c <= 0xDFFF)) return false;
  *i += len;
  *cp = c;
  return true;
}

namespace {

// Splits [lo, hi] into ranges whose UTF-8 encodings are products of byte ranges.
void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<CodeRange>>* out) {
  std::vector<CodeRange> stack = {{lo, hi}};
  while (!stack.empty()) {
    CodeRange r = stack.back();
    stack.pop_back();
    for (bool again = true; again;) {
      again = false;
      for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {
        if (r.lo <= max && max < r.hi) {
          stack.push_back({max + 1, r.hi});
          r.hi = max;
          again = true;
          break;
        }
      }
      if (again) continue;
      if (r.hi <= 0x7F) {
        out->push_back({{r.lo, r.hi}});
        break;
      }
      for (int i = 1; i < 4 && !again; ++i) {
        const uint32_t m = (1u << (6 * i)) - 1;
        if ((r.lo & ~m) == (r.hi & ~m)) continue;
        if ((r.lo & m) != 0) {
          stack.push_back({(r.lo | m) + 1, r.hi});
          r.hi = r.lo | m;
          again = true;
        } else if ((r.hi & m) != m) {
          stack.push_back({r.hi & ~m, r.hi});
          r.hi = (r.hi & ~m) - 1;
          again = true;
        }
      }
      if (again) continue;
      std::string a, b;
      AppendUtf8(r.lo, &a);
      AppendUtf8(r.hi, &b);
      std::vector<CodeRange> seq;
      for (size_t k = 0; k < a.size(); ++k) {
        seq.push_back({static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k])});
      }
      out->push_back(std::move(seq));
    }
  }
}

}  // namespace

Symbol Utf8Class(Grammar* g, const CodeSet& set) {
  std::vector<std::vector<CodeRange>> seqs;
  for (CodeRange r : set) Utf8Sequences(r.lo, r.hi, &seqs);
  ByteSet ascii;
  std::vector<Sequence> alts;
  for (const auto& seq : seqs) {
    if (seq.size() == 1) {
      ascii.AddRange(static_cast<uint8_t>(seq[0].lo), static_cast<uint8_t>(seq[0].hi));
      continue;
    }
    Sequence s;
    for (CodeRange b : seq) {
      s.push_back(
          Symbol::Bytes(ByteSet::Range(static_cast<uint8_t>(b.lo), static_cast<uint8_t>(b.hi))));
    }
    alts.push_back(std::move(s));
  }
  if (!ascii.Empty()) alts.insert(alts.begin(), Sequence{Symbol::Bytes(ascii)});
  if (alts.empty()) return g->Nothing();
  if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
  return g->Choice(std::move(alts), "class");
}

Symbol JsonCharClass(Grammar* g, const CodeSet& set, bool canonical) {
  const CodeSet needs_escape = Normalize({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
  std::vector<Sequence> alts;
  const CodeSet plain = Subtract(set, needs_escape);
  if (!plain.empty()) alts.push_back({Utf8Class(g, plain)});
  // Escapes share one leading backslash: \" \\ \/ \b \f \n \r \t and \u00XX for controls.
  static const char* kHex = "0123456789abcdef";
  ByteSet short_set;
  ByteSet low_digits[2];  // \u00<hi><lo> for hi = 0, 1
  for (uint32_t cp = 0; cp < 0x80; ++cp) {
    if (!Contains(set, cp)) continue;
    const char short_form = cp == '"'    ? '"'
                            : cp == '\\' ? '\\'
                            : cp == '/'  ? (canonical ? 0 : '/')
                            : cp == 8    ? 'b'
                            : cp == 12   ? 'f'
                            : cp == 10   ? 'n'
                            : cp == 13   ? 'r'
                            : cp == 9    ? 't'
                                         : 0;
    if (short_form != 0) short_set.Add(static_cast<uint8_t>(short_form));
    if (cp < 0x20 && (!canonical || short_form == 0)) {
      low_digits[cp >> 4].Add(static_cast<uint8_t>(kHex[cp & 15]));
      if (!canonical) low_digits[cp >> 4].Add(static_cast<uint8_t>(std::toupper(kHex[cp & 15])));
    }
  }
  std::vector<Sequence> escapes;
  if (!short_set.Empty()) escapes.push_back({Symbol::Bytes(short_set)});
  for (int hi = 0; hi < 2; ++hi) {
    if (low_digits[hi].Empty()) continue;
    Sequence u = Grammar::Literal("u00");
    u.push_back(Symbol::Bytes(ByteSet::Single(static_cast<uint8_t>('0' + hi))));
    u.push_back(Symbol::Bytes(low_digits[hi]));
    escapes.push_back(std::move(u));
  }
  if (!escapes.empty()) {
    alts.push_back({Symbol::Bytes(ByteSet::Single('\\')), g->Choice(std::move(escapes), "escape")});
  }
  if (alts.empty()) return g->Nothing();
  if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
  return g->Choice(std::move(alts), "json_char");
}

}  // namespace deepinfer::grammar
