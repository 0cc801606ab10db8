// Helpers for the applicators of the JSON Schema front end: when `oneOf` can be enforced exactly
// as `anyOf` (its branches provably exclude each other), and how `allOf` members that carry
// `additionalProperties` or array item keywords combine.
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <set>

#include "grammar/json_schema_internal.h"

namespace deepinfer::grammar::internal {

namespace {

// A `type` name's bits; unknown names are errors elsewhere, so stay conservative here.
unsigned KnownTypeBits(std::string_view s) {
  const unsigned bits = TypeNameBits(s);
  return bits ? bits : kAll;
}

bool IsScalar(element v) {
  const auto t = v.type();
  return t != simdjson::dom::element_type::OBJECT && t != simdjson::dom::element_type::ARRAY;
}

/// Two scalar values that may be equal as JSON Schema values (numbers by value). Errs on "equal".
bool MaybeEqual(element a, element b) {
  if (ValueBits(a) & (kInteger | kFraction) && ValueBits(b) & (kInteger | kFraction)) {
    double x, y;
    if (a.get_double().get(x) != simdjson::SUCCESS || b.get_double().get(y) != simdjson::SUCCESS) {
      return true;
    }
    return x == y;
  }
  return Minify(a) == Minify(b);
}

/// An over-approximation of the instances a conjunction of schemas accepts: the JSON types it
/// allows, and (when `const`/`enum` with scalar values limit it) a finite list of values.
struct Footprint {
  unsigned bits = kAll;
  std::optional<std::vector<element>> values;
};

Footprint FootprintOf(const Parts& parts) {
  Footprint f;
  for (const Part& p : parts) {
    bool b;
    if (p.e.get_bool().get(b) == simdjson::SUCCESS) {
      if (!b) f.bits = 0;
      continue;
    }
    object obj;
    if (p.e.get_object().get(obj) != simdjson::SUCCESS) continue;
    element v;
    std::string_view s;
    array arr;
    if (obj["type"].get(v) == simdjson::SUCCESS) {
      if (v.get_string().get(s) == simdjson::SUCCESS) {
        f.bits &= KnownTypeBits(s);
      } else if (v.get_array().get(arr) == simdjson::SUCCESS) {
        unsigned m = 0;
        for (element x : arr)
          m |= x.get_string().get(s) == simdjson::SUCCESS ? KnownTypeBits(s) : kAll;
        f.bits &= m;
      }
    }
    std::vector<element> values;
    bool have = false;
    if (obj["const"].get(v) == simdjson::SUCCESS) {
      values.push_back(v);
      have = true;
    } else if (obj["enum"].get(v) == simdjson::SUCCESS &&
               v.get_array().get(arr) == simdjson::SUCCESS) {
      for (element x : arr) values.push_back(x);
      have = true;
    }
    if (!have) continue;
    unsigned m = 0;
    for (element x : values) m |= ValueBits(x);
    f.bits &= m;
    const bool scalars = std::all_of(values.begin(), values.end(), IsScalar);
    if (scalars && !f.values) f.values = std::move(values);
  }
  return f;
}

bool Disjoint(const Footprint& a, const Footprint& b) {
  if ((a.bits & b.bits) == 0) return true;
  if (!a.values || !b.values) return false;
  for (element x : *a.values) {
    for (element y : *b.values) {
      if (MaybeEqual(x, y)) return false;
    }
  }
  return true;
}

bool IsTrueSchema(element e) {
  bool b;
  if (e.get_bool().get(b) == simdjson::SUCCESS) return b;
  object obj;
  if (e.get_object().get(obj) != simdjson::SUCCESS) return false;
  for (auto field : obj) {
    if (!IsAnnotation(field.key)) return false;
  }
  return true;
}

}  // namespace

Status SchemaCompiler::ClassifyOneOf(array branches, const Parts& siblings, const std::string& path,
                                     int depth, OneOfKind* kind) {
  size_t trues = 0;
  std::vector<Footprint> prints;
  int i = 0;
  for (element branch : branches) {
    if (IsTrueSchema(branch)) ++trues;
    Parts bp;
    for (const Part& p : siblings) bp.push_back({p.e, true});
    DI_RETURN_IF_ERROR(
        Expand(branch, path + "/oneOf/" + std::to_string(i++), depth + 1, false, &bp));
    prints.push_back(FootprintOf(bp));
  }
  // Two branches accepting everything: every instance matches at least two of them.
  *kind = trues >= 2 ? OneOfKind::kNothing : OneOfKind::kExact;
  for (size_t a = 0; a < prints.size() && *kind == OneOfKind::kExact; ++a) {
    for (size_t b = a + 1; b < prints.size(); ++b) {
      if (!Disjoint(prints[a], prints[b])) {
        *kind = OneOfKind::kNotExact;
        break;
      }
    }
  }
  return Status::Ok();
}

void SchemaCompiler::MergeAdditionalProperties(const std::vector<PartObjectKeys>& members,
                                               Keywords* kw) {
  // additionalProperties of one allOf member applies to the names it does not declare itself,
  // even when another member declares them.
  for (const PartObjectKeys& m : members) {
    if (!m.additional) continue;
    for (auto& [name, parts] : kw->props) {
      if (std::find(m.names.begin(), m.names.end(), name) != m.names.end()) continue;
      parts.push_back({*m.additional, false});
    }
  }
}

bool SchemaCompiler::MergeBound(std::string_view k, element* kept, element other) {
  static const std::set<std::string_view> kLower = {"minimum", "exclusiveMinimum", "minLength",
                                                    "minItems", "minProperties"};
  static const std::set<std::string_view> kUpper = {"maximum", "exclusiveMaximum", "maxLength",
                                                    "maxItems", "maxProperties"};
  double a, b;
  if (kept->get_double().get(a) != simdjson::SUCCESS ||
      other.get_double().get(b) != simdjson::SUCCESS) {
    return false;
  }
  if (kLower.count(k)) {
    if (b > a) *kept = other;
    return true;
  }
  if (kUpper.count(k)) {
    if (b < a) *kept = other;
    return true;
  }
  int64_t x, y;
  if (k != "multipleOf" || kept->get_int64().get(x) != simdjson::SUCCESS ||
      other.get_int64().get(y) != simdjson::SUCCESS || x <= 0 || y <= 0) {
    return false;
  }
  const int64_t g = std::gcd(x, y);
  if (x / g > int64_t{1000000000000000000} / y) return false;
  return Synthesize(std::to_string(x / g * y), kept).ok();
}

Status SchemaCompiler::Synthesize(const std::string& text, element* out) {
  synthesized_.emplace_back();
  if (synthesized_.back().parse(text).get(*out) != simdjson::SUCCESS) {
    return Internal("json_schema: cannot parse a built schema: " + text);
  }
  return Status::Ok();
}

Status SchemaCompiler::ExpandConditional(object obj, const std::string& path, int depth,
                                         Parts* out) {
  // if/then/else: `if` alone (or then/else without `if`) constrains nothing; a boolean `if`
  // picks a branch; otherwise anyOf [allOf [if, then], allOf [not if, else]] (exact as far as
  // `not` is: only `not` of a type-only schema is enforced, the rest is reported).
  element cond, then_e, else_e;
  if (obj["if"].get(cond) != simdjson::SUCCESS) return Status::Ok();
  const bool has_then = obj["then"].get(then_e) == simdjson::SUCCESS;
  const bool has_else = obj["else"].get(else_e) == simdjson::SUCCESS;
  if (!has_then && !has_else) return Status::Ok();
  bool b;
  if (cond.get_bool().get(b) == simdjson::SUCCESS) {
    if (b && has_then) return Expand(then_e, path + "/then", depth + 1, false, out);
    if (!b && has_else) return Expand(else_e, path + "/else", depth + 1, false, out);
    return Status::Ok();
  }
  const std::string c = Minify(cond);
  const std::string text = "{\"anyOf\":[{\"allOf\":[" + c + "," +
                           (has_then ? Minify(then_e) : "true") + "]},{\"allOf\":[{\"not\":" + c +
                           "}," + (has_else ? Minify(else_e) : "true") + "]}]}";
  element e;
  DI_RETURN_IF_ERROR(Synthesize(text, &e));
  return Expand(e, path + "/if", depth + 1, false, out);
}

}  // namespace deepinfer::grammar::internal
