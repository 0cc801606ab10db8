#include "engine/tokenizer/utf8.h"

namespace deepinfer {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

// Decodes one sequence at `i`. Returns its length if valid; otherwise 0 and sets *consumed to
// the length of the maximal invalid subpart (at least 1) — or, when the input ends inside a
// sequence that could still be valid, sets *truncated.
size_t Sequence(std::string_view s, size_t i, size_t* consumed, bool* truncated) {
  const unsigned char b = static_cast<unsigned char>(s[i]);
  *truncated = false;
  if (b < 0x80) return 1;
  int need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the first continuation byte
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    *consumed = 1;
    return 0;
  }
  size_t j = i + 1;
  for (int k = 0; k < need; ++k, ++j) {
    if (j >= s.size()) {
      *consumed = j - i;
      *truncated = true;
      return 0;
    }
    const unsigned char c = static_cast<unsigned char>(s[j]);
    if (c < (k == 0 ? lo : 0x80) || c > (k == 0 ? hi : 0xBF)) {
      *consumed = j - i;
      return 0;
    }
  }
  return j - i;
}

}  // namespace

void AppendUtf8Lossy(std::string_view s, std::string* out) {
  out->reserve(out->size() + s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t consumed = 0;
    bool truncated;
    const size_t n = Sequence(s, i, &consumed, &truncated);
    if (n > 0) {
      out->append(s.data() + i, n);
      i += n;
    } else {
      out->append(kReplacement, 3);
      i += consumed;
    }
  }
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t consumed;
    bool truncated;
    const size_t n = Sequence(s, i, &consumed, &truncated);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

size_t Utf8SettledPrefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t consumed = 0;
    bool truncated;
    const size_t n = Sequence(s, i, &consumed, &truncated);
    if (n == 0 && truncated) return i;
    i += n > 0 ? n : consumed;
  }
  return i;
}

}  // namespace deepinfer
