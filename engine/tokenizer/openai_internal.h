// Internal to the OpenAI conversion (openai_request.cc, openai_messages.cc): typed reads from a
// simdjson DOM that name the JSON path of the field in every error.
#pragma once

#include <simdjson.h>

#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "engine/common/status.h"
#include "engine/tokenizer/openai.h"

namespace deepinfer::openai_internal {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

/// "a string", "an array", ... for "expected X, got Y" messages.
inline const char* Describe(element e) {
  switch (e.type()) {
    case element_type::ARRAY:
      return "an array";
    case element_type::OBJECT:
      return "an object";
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE:
      return "a number";
    case element_type::STRING:
      return "a string";
    case element_type::BOOL:
      return "a boolean";
    case element_type::NULL_VALUE:
      return "null";
  }
  return "a value";
}

/// The shortest text that reads back as `v` ("3.5", "2", "1e-05").
inline std::string Num(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

inline std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

inline Status Expected(const std::string& path, std::string_view what, element got) {
  return InvalidArgument(path + ": expected " + std::string(what) + ", got " + Describe(got));
}

inline std::string Member(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

inline std::string Index(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

/// `v` in [lo, hi], or (lo, hi] with lo_open.
inline Status InRange(const std::string& path, double v, double lo, double hi,
                      bool lo_open = false) {
  if ((lo_open ? v > lo : v >= lo) && v <= hi) return Status::Ok();
  return InvalidArgument(path + ": must be in " + (lo_open ? "(" : "[") + Num(lo) + ", " + Num(hi) +
                         "], got " + Num(v));
}

/// An integer, also written as an integral float (2.0); uint64 beyond int64 is out of range.
inline Status ToInteger(element e, const std::string& path, int64_t* out) {
  int64_t i;
  uint64_t u;
  double d;
  if (e.get_int64().get(i) == simdjson::SUCCESS) {
    *out = i;
    return Status::Ok();
  }
  if (e.get_uint64().get(u) == simdjson::SUCCESS) {
    return InvalidArgument(path + ": integer out of range, got " + std::to_string(u));
  }
  if (e.get_double().get(d) == simdjson::SUCCESS) {
    if (d != std::floor(d) || std::fabs(d) >= 9.2e18) {
      return InvalidArgument(path + ": expected an integer, got " + Num(d));
    }
    *out = static_cast<int64_t>(d);
    return Status::Ok();
  }
  return Expected(path, "an integer", e);
}

/// The members of one JSON object, read by key with type checks. A missing member and a null
/// one are the same: absent, and the output is left as it was.
class Fields {
 public:
  Fields(object obj, std::string path) : obj_(obj), path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  std::string Path(std::string_view key) const { return Member(path_, key); }
  object obj() const { return obj_; }

  std::optional<element> Get(std::string_view key) const {
    element e;
    if (obj_.at_key(key).get(e) != simdjson::SUCCESS || e.is_null()) return std::nullopt;
    return e;
  }

  Status String(std::string_view key, std::string* out) const {
    auto e = Get(key);
    if (!e) return Status::Ok();
    std::string_view s;
    if (e->get_string().get(s) != simdjson::SUCCESS) return Expected(Path(key), "a string", *e);
    *out = std::string(s);
    return Status::Ok();
  }

  /// A string that must be present and non-empty.
  Status RequiredString(std::string_view key, std::string* out) const {
    if (!Get(key)) return InvalidArgument(Path(key) + ": required");
    DI_RETURN_IF_ERROR(String(key, out));
    if (out->empty()) return InvalidArgument(Path(key) + ": must not be empty");
    return Status::Ok();
  }

  Status Bool(std::string_view key, bool* out) const {
    auto e = Get(key);
    if (!e) return Status::Ok();
    if (e->get_bool().get(*out) != simdjson::SUCCESS) return Expected(Path(key), "a boolean", *e);
    return Status::Ok();
  }

  Status Number(std::string_view key, std::optional<double>* out) const {
    auto e = Get(key);
    if (!e) return Status::Ok();
    double d;
    if (e->get_double().get(d) != simdjson::SUCCESS) return Expected(Path(key), "a number", *e);
    *out = d;
    return Status::Ok();
  }

  Status Integer(std::string_view key, std::optional<int64_t>* out) const {
    auto e = Get(key);
    if (!e) return Status::Ok();
    int64_t v;
    DI_RETURN_IF_ERROR(ToInteger(*e, Path(key), &v));
    *out = v;
    return Status::Ok();
  }

  Status Object(std::string_view key, std::optional<Fields>* out) const {
    auto e = Get(key);
    if (!e) return Status::Ok();
    object o;
    if (e->get_object().get(o) != simdjson::SUCCESS) return Expected(Path(key), "an object", *e);
    out->emplace(o, Path(key));
    return Status::Ok();
  }

  Status Array(std::string_view key, std::optional<array>* out) const {
    auto e = Get(key);
    if (!e) return Status::Ok();
    array a;
    if (e->get_array().get(a) != simdjson::SUCCESS) return Expected(Path(key), "an array", *e);
    *out = a;
    return Status::Ok();
  }

 private:
  object obj_;
  std::string path_;
};

/// openai_messages.cc: `messages` into req->messages.
Status ParseMessages(const Fields& top, const ParseLimits& limits, ChatCompletionRequest* req);

/// openai_messages.cc: `tools` into req->options.tools_json and req->tool_names.
Status ParseTools(const Fields& top, const ParseLimits& limits, ChatCompletionRequest* req);

}  // namespace deepinfer::openai_internal
