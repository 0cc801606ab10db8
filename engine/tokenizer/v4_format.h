// Shared pieces of the DeepSeek-V4 text protocol: the marker strings and JSON text written the
// way the official Python encoder (`encoding_dsv4.py`, json.dumps(ensure_ascii=False)) writes it,
// so prompts match the training format byte for byte. Internal to engine/tokenizer/.
#pragma once

#include <simdjson.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deepinfer::v4 {

// Markers: each is one special token of the V4 vocabulary.
inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kLatestReminder = "<｜latest_reminder｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kDsml = "｜DSML｜";

// DSML tags (plain text around the ｜DSML｜ marker).
inline constexpr std::string_view kToolCallsOpen = "<｜DSML｜tool_calls>";
inline constexpr std::string_view kToolCallsClose = "</｜DSML｜tool_calls>";
inline constexpr std::string_view kInvokeOpen = "<｜DSML｜invoke";
inline constexpr std::string_view kInvokeClose = "</｜DSML｜invoke>";
inline constexpr std::string_view kParamOpen = "<｜DSML｜parameter";
inline constexpr std::string_view kParamClose = "</｜DSML｜parameter>";
inline constexpr std::string_view kDsmlTagStart = "<｜DSML｜";

/// Appends `s` as a JSON string literal the way Python's json.dumps(ensure_ascii=False) does:
/// only '"', '\\' and control characters are escaped; other bytes pass through.
inline void AppendPyJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

/// Python's repr(float): shortest round-trip digits, exponent form outside 1e-4 <= |x| < 1e16.
inline std::string PyFloatRepr(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view s(buf, static_cast<size_t>(res.ptr - buf));
  std::string out;
  if (s.front() == '-') {
    out.push_back('-');
    s.remove_prefix(1);
  }
  const size_t e = s.find('e');
  std::string digits;
  for (char c : s.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  int exp = 0;
  std::from_chars(s.data() + e + 1 + (s[e + 1] == '+' ? 1 : 0), s.data() + s.size(), exp);
  const int decpt = exp + 1;  // value = 0.DIGITS * 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (decpt >= n) {
      out += digits + std::string(static_cast<size_t>(decpt - n), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt)) + "." +
             digits.substr(static_cast<size_t>(decpt));
    }
  } else {
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return out;
}

/// An object's members in Python dict order: a repeated key keeps its first position and takes
/// the last value, as json.loads does.
inline std::vector<std::pair<std::string_view, simdjson::dom::element>> PyObjectItems(
    simdjson::dom::object obj) {
  std::vector<std::pair<std::string_view, simdjson::dom::element>> items;
  for (auto field : obj) {
    bool replaced = false;
    for (auto& item : items) {
      if (item.first == field.key) {
        item.second = field.value;
        replaced = true;
        break;
      }
    }
    if (!replaced) items.emplace_back(field.key, field.value);
  }
  return items;
}

/// Appends `e` serialized like Python's json.dumps(json.loads(text), ensure_ascii=False):
/// separators ", " and ": ", key order kept, floats as repr().
inline void AppendPyJson(simdjson::dom::element e, std::string* out) {
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT: {
      simdjson::dom::object obj;
      if (e.get(obj) != simdjson::SUCCESS) return;
      out->push_back('{');
      bool first = true;
      for (const auto& [key, value] : PyObjectItems(obj)) {
        if (!first) *out += ", ";
        first = false;
        AppendPyJsonString(key, out);
        *out += ": ";
        AppendPyJson(value, out);
      }
      out->push_back('}');
      return;
    }
    case simdjson::dom::element_type::ARRAY: {
      simdjson::dom::array arr;
      if (e.get(arr) != simdjson::SUCCESS) return;
      out->push_back('[');
      bool first = true;
      for (simdjson::dom::element item : arr) {
        if (!first) *out += ", ";
        first = false;
        AppendPyJson(item, out);
      }
      out->push_back(']');
      return;
    }
    case simdjson::dom::element_type::STRING:
      AppendPyJsonString(e.get_string().value_unsafe(), out);
      return;
    case simdjson::dom::element_type::INT64:
      *out += std::to_string(e.get_int64().value_unsafe());
      return;
    case simdjson::dom::element_type::UINT64:
      *out += std::to_string(e.get_uint64().value_unsafe());
      return;
    case simdjson::dom::element_type::DOUBLE:
      *out += PyFloatRepr(e.get_double().value_unsafe());
      return;
    case simdjson::dom::element_type::BOOL:
      *out += e.get_bool().value_unsafe() ? "true" : "false";
      return;
    case simdjson::dom::element_type::NULL_VALUE:
      *out += "null";
      return;
  }
}

}  // namespace deepinfer::v4
