// Writing JSON text: string escaping as JavaScript's JSON.stringify does it (quotes, backslash,
// control characters; non-ASCII left as UTF-8). Invalid UTF-8 is replaced by U+FFFD first.
#pragma once

#include <string>
#include <string_view>

namespace deepinfer {

/// Appends `s` as a quoted JSON string.
void AppendJsonString(std::string* out, std::string_view s);
inline std::string JsonString(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

}  // namespace deepinfer
