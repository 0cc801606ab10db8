// A JSON object key naming a token id, as OpenAI's logit_bias writes them: shared by the OpenAI
// request parser (engine/tokenizer/openai_request.cc) and the daemon's protocol (ipc/protocol.cc).
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace deepinfer {

/// The id a key of decimal digits names (at most 10 digits, no sign), else nullopt; the range
/// against the vocabulary is the caller's.
inline std::optional<int64_t> TokenIdKey(std::string_view key) {
  int64_t id = -1;
  const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
  if (key.empty() || key.size() > 10 || key[0] == '-' || ec != std::errc() ||
      end != key.data() + key.size()) {
    return std::nullopt;
  }
  return id;
}

}  // namespace deepinfer
