#include "engine/tokenizer/deepseek_splitter.h"

#include <cstdint>
#include <string>

namespace deepinfer {
namespace {

struct JsCategory {
  const char* name;
  const uint32_t (*ranges)[2];
  size_t n;
};
#include "engine/tokenizer/js_unicode_tables.inc"

enum Flag : uint8_t { kL = 1, kM = 2, kN = 4, kP = 8, kS = 16, kSpace = 32, kCjk = 64 };

// One byte of flags per code point, from the same Unicode tables as the reference.
const std::vector<uint8_t>& Flags() {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> f(0x110000, 0);
    const std::pair<const char*, uint8_t> cats[] = {
        {"L", kL}, {"M", kM}, {"N", kN}, {"P", kP}, {"S", kS}};
    for (const auto& [name, flag] : cats) {
      for (const auto& c : kJsCategories) {
        if (std::string_view(c.name) != name) continue;
        for (size_t i = 0; i < c.n; ++i) {
          for (uint32_t cp = c.ranges[i][0]; cp <= c.ranges[i][1]; ++cp) f[cp] |= flag;
        }
      }
    }
    for (uint32_t cp : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u,
                        0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu}) {
      f[cp] |= kSpace;
    }
    for (uint32_t cp = 0x2000; cp <= 0x200A; ++cp) f[cp] |= kSpace;
    for (auto [a, b] : {std::pair{0x4E00u, 0x9FA5u}, {0x3040u, 0x309Fu}, {0x30A0u, 0x30FFu}}) {
      for (uint32_t cp = a; cp <= b; ++cp) f[cp] |= kCjk;
    }
    return f;
  }();
  return table;
}

constexpr const char* kDeepSeekPatterns[3] = {
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};

bool AsciiAlpha(uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
bool AsciiPunct(uint32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}
bool CrLf(uint32_t c) { return c == '\r' || c == '\n'; }

// The decoded text: code points and the byte offset of each (plus one past the end).
struct Decoded {
  std::vector<uint32_t> cp;
  std::vector<uint32_t> off;
};

void Decode(std::string_view s, Decoded* d) {
  d->cp.clear();
  d->off.clear();
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    uint32_t c;
    int len;
    if (b < 0x80)
      c = b, len = 1;
    else if (b < 0xE0)
      c = b & 0x1F, len = 2;
    else if (b < 0xF0)
      c = b & 0x0F, len = 3;
    else
      c = b & 0x07, len = 4;
    for (int k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    d->cp.push_back(c);
    d->off.push_back(static_cast<uint32_t>(i));
    i += len;
  }
  d->off.push_back(static_cast<uint32_t>(s.size()));
}

// The leftmost-match scan every Split pass performs over each piece [b, e) (code point
// indices): matches and the gaps between them become pieces.
template <typename Matcher>
void Pass(const std::vector<std::pair<uint32_t, uint32_t>>& in,
          std::vector<std::pair<uint32_t, uint32_t>>* out, Matcher match) {
  out->clear();
  for (auto [b, e] : in) {
    uint32_t pos = b, last = b;
    while (pos < e) {
      const uint32_t len = match(pos, e);
      if (len == 0) {
        ++pos;
        continue;
      }
      if (pos > last) out->emplace_back(last, pos);
      out->emplace_back(pos, pos + len);
      pos += len;
      last = pos;
    }
    if (last < e) out->emplace_back(last, e);
  }
}

}  // namespace

bool IsDeepSeekPattern(const std::vector<std::string>& patterns) {
  if (patterns.size() != 3) return false;
  for (int i = 0; i < 3; ++i) {
    if (patterns[i] != kDeepSeekPatterns[i]) return false;
  }
  return true;
}

void DeepSeekSplit(std::string_view text, std::vector<Span>* out) {
  if (text.empty()) return;
  const std::vector<uint8_t>& F = Flags();
  thread_local Decoded d;
  thread_local std::vector<std::pair<uint32_t, uint32_t>> a, b;
  Decode(text, &d);
  const std::vector<uint32_t>& cp = d.cp;
  auto has = [&](uint32_t i, uint8_t flags) { return (F[cp[i]] & flags) != 0; };
  a.assign(1, {0, static_cast<uint32_t>(cp.size())});
  // \p{N}{1,3}
  Pass(a, &b, [&](uint32_t i, uint32_t e) {
    uint32_t k = i;
    while (k < e && k - i < 3 && has(k, kN)) ++k;
    return k - i;
  });
  // [一-龥぀-ゟ゠-ヿ]+
  Pass(b, &a, [&](uint32_t i, uint32_t e) {
    uint32_t k = i;
    while (k < e && has(k, kCjk)) ++k;
    return k - i;
  });
  Pass(a, &b, [&](uint32_t i, uint32_t e) -> uint32_t {
    const uint32_t c = cp[i];
    // [ASCII punctuation][A-Za-z]+
    if (AsciiPunct(c) && i + 1 < e && AsciiAlpha(cp[i + 1])) {
      uint32_t k = i + 1;
      while (k < e && AsciiAlpha(cp[k])) ++k;
      return k - i;
    }
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
    auto letters_from = [&](uint32_t k) {
      while (k < e && has(k, kL | kM)) ++k;
      return k;
    };
    if (!CrLf(c) && !has(i, kL | kP | kS) && i + 1 < e && has(i + 1, kL | kM)) {
      return letters_from(i + 1) - i;
    }
    if (has(i, kL | kM)) return letters_from(i) - i;
    // ' '?[\p{P}\p{S}]+[\r\n]*
    uint32_t k = i + (c == ' ' ? 1 : 0);
    if (k < e && has(k, kP | kS)) {
      while (k < e && has(k, kP | kS)) ++k;
      while (k < e && CrLf(cp[k])) ++k;
      return k - i;
    }
    if (!has(i, kSpace)) return 0;
    uint32_t j = i;
    while (j < e && has(j, kSpace)) ++j;
    // \s*[\r\n]+ : the whitespace run up to and including its last CR or LF
    for (uint32_t m = j; m > i; --m) {
      if (CrLf(cp[m - 1])) return m - i;
    }
    // \s+(?!\S) : the run, leaving its last character when something follows
    if (j == e) return j - i;
    if (j - i >= 2) return j - 1 - i;
    return j - i;  // \s+
  });
  for (auto [s, e] : b) out->push_back({d.off[s], d.off[e]});
}

}  // namespace deepinfer
