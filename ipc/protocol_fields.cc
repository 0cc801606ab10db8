#include "ipc/protocol_fields.h"

#include <charconv>

#include "engine/tokenizer/utf8.h"

namespace deepinfer::ipc::protocol_internal {

std::string Num(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

const char* TypeName(element e) {
  switch (e.type()) {
    case element_type::ARRAY:
      return "an array";
    case element_type::OBJECT:
      return "an object";
    case element_type::INT64:
    case element_type::UINT64:
      return "an integer";
    case element_type::DOUBLE:
      return "a fractional number";
    case element_type::STRING:
      return "a string";
    case element_type::BOOL:
      return "a boolean";
    case element_type::NULL_VALUE:
      return "null";
  }
  return "?";
}

Status Expected(const std::string& path, std::string_view what, element e) {
  return InvalidArgument(path + ": expected " + std::string(what) + ", got " + TypeName(e));
}

std::string Index(std::string_view name, size_t i) {
  return std::string(name) + "[" + std::to_string(i) + "]";
}

Status IntRangeError(const std::string& path, element e, std::string lo, std::string hi) {
  std::string got = e.type() == element_type::UINT64 ? std::to_string(e.get_uint64().value_unsafe())
                                                     : std::to_string(e.get_int64().value_unsafe());
  if (hi.empty()) return InvalidArgument(path + ": must be >= " + lo + ", got " + got);
  return InvalidArgument(path + ": must be in [" + lo + ", " + hi + "], got " + got);
}

Status CheckString(const std::string& path, std::string_view s, size_t max_bytes) {
  if (s.size() > max_bytes) {
    return InvalidArgument(path + ": longer than " + std::to_string(max_bytes) + " bytes (" +
                           std::to_string(s.size()) + ")");
  }
  if (!IsValidUtf8(s)) return InvalidArgument(path + ": not valid UTF-8");
  return Status::Ok();
}

Result<object> ParseObject(simdjson::dom::parser& parser, std::string_view body) {
  element root;
  auto err = parser.parse(body.data(), body.size()).get(root);
  if (err != simdjson::SUCCESS) {
    return DataLoss(std::string("body: not valid JSON (") + simdjson::error_message(err) + ")");
  }
  object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    return DataLoss(std::string("body: expected a JSON object, got ") + TypeName(root));
  }
  return obj;
}

std::optional<element> Fields::Get(std::string_view key) const {
  element e;
  if (obj_[key].get(e) != simdjson::SUCCESS || e.is_null()) return std::nullopt;
  return e;
}

Status Fields::Required(std::string_view key) const {
  return Get(key) ? Status::Ok() : InvalidArgument(Path(key) + ": required");
}

Status Fields::Number(std::string_view key, double lo, double hi, bool lo_open, double* out) const {
  auto e = Get(key);
  if (!e) return Status::Ok();
  double v;
  if (e->get_double().get(v) != simdjson::SUCCESS) return Expected(Path(key), "a number", *e);
  if (v < lo || v > hi || (lo_open && v == lo)) {
    return InvalidArgument(Path(key) + ": must be in " + (lo_open ? "(" : "[") + Num(lo) + ", " +
                           Num(hi) + "], got " + Num(v));
  }
  *out = v;
  return Status::Ok();
}

Status Fields::Bool(std::string_view key, bool* out) const {
  auto e = Get(key);
  if (e && e->get_bool().get(*out) != simdjson::SUCCESS) {
    return Expected(Path(key), "a boolean", *e);
  }
  return Status::Ok();
}

Status Fields::String(std::string_view key, size_t max_bytes, std::string* out) const {
  auto e = Get(key);
  if (!e) return Status::Ok();
  std::string_view s;
  if (e->get_string().get(s) != simdjson::SUCCESS) return Expected(Path(key), "a string", *e);
  DI_RETURN_IF_ERROR(CheckString(Path(key), s, max_bytes));
  *out = std::string(s);
  return Status::Ok();
}

Status Fields::Object(std::string_view key, std::optional<Fields>* out) const {
  auto e = Get(key);
  if (!e) return Status::Ok();
  object o;
  if (e->get_object().get(o) != simdjson::SUCCESS) return Expected(Path(key), "an object", *e);
  out->emplace(o, Path(key) + ".");
  return Status::Ok();
}

Status Fields::Array(std::string_view key, size_t max_items, std::optional<array>* out) const {
  auto e = Get(key);
  if (!e) return Status::Ok();
  array a;
  if (e->get_array().get(a) != simdjson::SUCCESS) return Expected(Path(key), "an array", *e);
  if (a.size() > max_items) {
    return InvalidArgument(Path(key) + ": at most " + std::to_string(max_items) + " entries, got " +
                           std::to_string(a.size()));
  }
  *out = a;
  return Status::Ok();
}

Status Fields::Raw(std::string_view key, element_type type, size_t max_bytes,
                   std::string* out) const {
  auto e = Get(key);
  if (!e) return Status::Ok();
  if (e->type() != type) {
    return Expected(Path(key), type == element_type::ARRAY ? "an array" : "an object", *e);
  }
  std::string text = simdjson::minify(*e);
  DI_RETURN_IF_ERROR(CheckString(Path(key), text, max_bytes));
  *out = std::move(text);
  return Status::Ok();
}

}  // namespace deepinfer::ipc::protocol_internal
