// Internal to ipc/: typed reads of JSON members for the protocol parsers, with errors that name
// the field ("stop[3]: expected a string, got an integer").
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "engine/common/status.h"

namespace deepinfer::ipc::protocol_internal {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

/// Shortest round-trip decimal text of a double.
std::string Num(double v);
/// "an array", "an integer", "a string", ... for error messages.
const char* TypeName(element e);
Status Expected(const std::string& path, std::string_view what, element e);
std::string Index(std::string_view name, size_t i);
/// Length limit and UTF-8 validity of a string field.
Status CheckString(const std::string& path, std::string_view s, size_t max_bytes);
/// Parses `body` into `parser`; its top-level object, or kDataLoss when it is none.
Result<object> ParseObject(simdjson::dom::parser& parser, std::string_view body);
Status IntRangeError(const std::string& path, element e, std::string lo, std::string hi);

/// An integer element in [lo, hi]; fractional numbers are not integers.
template <typename T>
Status ToInt(element e, const std::string& path, T lo, T hi, T* out) {
  static_assert(std::is_same_v<T, uint64_t> || std::is_same_v<T, int64_t> ||
                std::is_same_v<T, int32_t> || std::is_same_v<T, uint32_t>);
  const element_type t = e.type();
  bool ok = false;
  if (t == element_type::UINT64) {  // above INT64_MAX
    const uint64_t u = e.get_uint64().value_unsafe();
    ok = std::is_same_v<T, uint64_t> && u <= static_cast<uint64_t>(hi);
    if (ok) *out = static_cast<T>(u);
  } else if (t == element_type::INT64) {
    const int64_t v = e.get_int64().value_unsafe();
    ok = v >= static_cast<int64_t>(lo) &&
         (std::is_same_v<T, uint64_t> || v <= static_cast<int64_t>(hi));
    if (ok) *out = static_cast<T>(v);
  } else {
    return Expected(path, "an integer", e);
  }
  if (ok) return Status::Ok();
  return IntRangeError(path, e, std::to_string(lo),
                       hi == std::numeric_limits<T>::max() ? "" : std::to_string(hi));
}

/// The members of one JSON object, read by name. Absent and null members read as absent; the
/// first of duplicate keys wins.
class Fields {
 public:
  Fields(object obj, std::string prefix) : obj_(obj), prefix_(std::move(prefix)) {}

  std::string Path(std::string_view key) const { return prefix_ + std::string(key); }
  std::optional<element> Get(std::string_view key) const;
  Status Required(std::string_view key) const;

  template <typename T>
  Status Int(std::string_view key, T lo, T hi, std::optional<T>* out) const {
    auto e = Get(key);
    if (!e) return Status::Ok();
    T v;
    DI_RETURN_IF_ERROR(ToInt<T>(*e, Path(key), lo, hi, &v));
    *out = v;
    return Status::Ok();
  }
  template <typename T>
  Status RequiredInt(std::string_view key, T lo, T hi, T* out) const {
    auto e = Get(key);
    if (!e) return Required(key);
    return ToInt<T>(*e, Path(key), lo, hi, out);
  }
  /// A number in [lo, hi], or (lo, hi] when lo_open.
  Status Number(std::string_view key, double lo, double hi, bool lo_open, double* out) const;
  Status Bool(std::string_view key, bool* out) const;
  Status String(std::string_view key, size_t max_bytes, std::string* out) const;
  Status Object(std::string_view key, std::optional<Fields>* out) const;
  Status Array(std::string_view key, size_t max_items, std::optional<array>* out) const;
  /// A JSON array or object as minified text, at most max_bytes long.
  Status Raw(std::string_view key, element_type type, size_t max_bytes, std::string* out) const;

  object obj() const { return obj_; }

 private:
  object obj_;
  std::string prefix_;
};

}  // namespace deepinfer::ipc::protocol_internal
