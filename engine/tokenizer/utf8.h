// UTF-8 helpers with the WHATWG decoder's error handling: every maximal invalid subpart becomes
// one U+FFFD, exactly as JavaScript's TextDecoder (the reference tokenizer's decoder) does it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace deepinfer {

/// Appends `bytes` to `out` as valid UTF-8, replacing invalid subparts with U+FFFD.
void AppendUtf8Lossy(std::string_view bytes, std::string* out);
inline std::string Utf8Lossy(std::string_view bytes) {
  std::string s;
  AppendUtf8Lossy(bytes, &s);
  return s;
}
/// True when `bytes` is valid UTF-8 (no surrogates, no overlongs, <= U+10FFFF).
bool IsValidUtf8(std::string_view bytes);
/// Length of the longest prefix after which no decision is pending: bytes past it are the start
/// of a sequence that more input could still complete.
size_t Utf8SettledPrefix(std::string_view bytes);

}  // namespace deepinfer
