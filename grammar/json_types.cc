// Per-type keywords of the JSON Schema front end: enum/const, strings, numbers, objects, arrays.
#include <simdjson.h>

#include <cmath>
#include <set>

#include "grammar/json_schema_internal.h"
#include "grammar/regex.h"

namespace deepinfer::grammar::internal {

unsigned TypeNameBits(std::string_view s) {
  if (s == "null") return kNull;
  if (s == "boolean") return kBool;
  if (s == "object") return kObject;
  if (s == "array") return kArray;
  if (s == "string") return kString;
  if (s == "number") return kFraction | kInteger;
  if (s == "integer") return kInteger;
  return 0;
}

unsigned ValueBits(element v) {
  double d;
  switch (v.type()) {
    case simdjson::dom::element_type::NULL_VALUE:
      return kNull;
    case simdjson::dom::element_type::BOOL:
      return kBool;
    case simdjson::dom::element_type::OBJECT:
      return kObject;
    case simdjson::dom::element_type::ARRAY:
      return kArray;
    case simdjson::dom::element_type::STRING:
      return kString;
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
      return kInteger;
    default:
      if (v.get_double().get(d) != simdjson::SUCCESS) return kAll;
      return d == std::floor(d) ? kInteger : kFraction;
  }
}

namespace {

Status TypeMask(element t, const std::string& path, unsigned* mask) {
  std::string_view s;
  array arr;
  *mask = 0;
  if (t.get_string().get(s) == simdjson::SUCCESS) {
    *mask = TypeNameBits(s);
    if (*mask == 0) return InvalidArgument("json_schema: unknown type '" + std::string(s) + "'");
  } else if (t.get_array().get(arr) == simdjson::SUCCESS) {
    for (element x : arr) {
      if (x.get_string().get(s) != simdjson::SUCCESS || TypeNameBits(s) == 0) {
        return InvalidArgument("json_schema: bad entry in type array at " + path);
      }
      *mask |= TypeNameBits(s);
    }
  } else {
    return InvalidArgument("json_schema: type must be a string or an array at " + path);
  }
  return Status::Ok();
}

bool ValueFits(element v, unsigned mask) { return (ValueBits(v) & mask) != 0; }

}  // namespace

bool SchemaCompiler::GetNumber(const Keywords& kw, const char* key, double* v) {
  auto it = kw.single.find(key);
  return it != kw.single.end() && it->second.get_double().get(*v) == simdjson::SUCCESS;
}

bool SchemaCompiler::GetInt(const Keywords& kw, const char* key, int64_t* v) {
  double d;
  if (!GetNumber(kw, key, &d) || d < 0) return false;
  *v = d > 1e9 ? int64_t{1000000000} : static_cast<int64_t>(std::ceil(d));
  return true;
}

Status SchemaCompiler::Literal(element v, Sequence* out) {
  auto lit = [&](const std::string& s) {
    for (const Symbol& x : Grammar::Literal(s)) out->push_back(x);
  };
  std::string_view s;
  array arr;
  object obj;
  if (v.get_string().get(s) == simdjson::SUCCESS) {
    lit(JsonPieces::EncodeString(s));
  } else if (v.get_array().get(arr) == simdjson::SUCCESS) {
    lit("[");
    j_.Ws(out);
    bool first = true;
    for (element x : arr) {
      if (!first) j_.Punct(out, ",");
      first = false;
      DI_RETURN_IF_ERROR(Literal(x, out));
    }
    j_.Ws(out);
    lit("]");
  } else if (v.get_object().get(obj) == simdjson::SUCCESS) {
    // Members in any order (in schema order only beyond kMaxAnyOrder members).
    std::vector<Symbol> members;
    for (auto field : obj) {
      Sequence m = Grammar::Literal(JsonPieces::EncodeString(field.key));
      j_.Punct(&m, ":");
      DI_RETURN_IF_ERROR(Literal(field.value, &m));
      members.push_back(g_.Group(std::move(m), "member"));
    }
    lit("{");
    j_.Ws(out);
    if (members.size() > kMaxAnyOrder) {
      for (size_t i = 0; i < members.size(); ++i) {
        if (i > 0) j_.Punct(out, ",");
        out->push_back(members[i]);
      }
    } else if (!members.empty()) {
      out->push_back(AnyOrder(members));
    }
    j_.Ws(out);
    lit("}");
  } else {
    lit(Minify(v));
  }
  return Status::Ok();
}

Status SchemaCompiler::CompileKeywords(const Keywords& kw, const std::string& path, int depth,
                                       Symbol* out) {
  static const std::set<std::string_view> kKnown = {"type",
                                                    "enum",
                                                    "const",
                                                    "minLength",
                                                    "maxLength",
                                                    "pattern",
                                                    "format",
                                                    "minimum",
                                                    "maximum",
                                                    "exclusiveMinimum",
                                                    "exclusiveMaximum",
                                                    "additionalProperties",
                                                    "items",
                                                    "prefixItems",
                                                    "additionalItems",
                                                    "minItems",
                                                    "maxItems"};
  // Validation keywords without an implementation; anything else unknown is an annotation.
  static const std::set<std::string_view> kUnsupported = {"if",
                                                          "then",
                                                          "else",
                                                          "dependentSchemas",
                                                          "dependencies",
                                                          "unevaluatedProperties",
                                                          "unevaluatedItems",
                                                          "minContains",
                                                          "maxContains",
                                                          "uniqueItems",
                                                          "$dynamicRef",
                                                          "$recursiveRef"};
  for (const auto& [k, v] : kw.single) {
    if (kKnown.count(k) || !kUnsupported.count(k)) continue;
    bool b = true;
    int64_t n = -1;
    if (k == "uniqueItems" && v.get_bool().get(b) == simdjson::SUCCESS && !b) continue;
    // minContains 0 makes `contains` vacuous, 1 is the default (ArraySchema reports the rest).
    if (k == "minContains" && GetInt(kw, k.c_str(), &n) && (n == 0 || n == 1)) {
      continue;
    }
    Unenforced(path, k);
  }
  unsigned mask = kAll;
  auto t = kw.single.find("type");
  if (t != kw.single.end()) DI_RETURN_IF_ERROR(TypeMask(t->second, path, &mask));
  for (element extra : kw.extra_types) {
    unsigned m2;
    DI_RETURN_IF_ERROR(TypeMask(extra, path, &m2));
    mask &= m2;
  }
  auto no = kw.single.find("not");
  if (no != kw.single.end()) {
    bool b;
    if (no->second.get_bool().get(b) == simdjson::SUCCESS) {
      if (b) {  // not: true rejects everything
        *out = g_.Nothing();
        return Status::Ok();
      }
    } else {
      // `not` of a schema with only `type` (or nothing) removes those types; others are reported.
      object sub;
      bool simple = no->second.get_object().get(sub) == simdjson::SUCCESS;
      element nt;
      bool has_type = false;
      for (auto field : sub) {
        if (field.key == "type") {
          nt = field.value;
          has_type = true;
        } else if (!IsAnnotation(field.key) && (IsValidationKeyword(field.key) ||
                                                field.key == "$ref" || field.key == "allOf")) {
          simple = false;
        }
      }
      if (!simple) {
        Unenforced(path, "not");
      } else if (!has_type) {  // not: {} rejects everything
        *out = g_.Nothing();
        return Status::Ok();
      } else {
        unsigned nm;
        DI_RETURN_IF_ERROR(TypeMask(nt, path + "/not", &nm));
        mask &= ~nm;
      }
    }
  }
  std::vector<Sequence> alts;
  auto c = kw.single.find("const");
  auto e = kw.single.find("enum");
  if (c != kw.single.end() || e != kw.single.end()) {
    std::vector<element> values;
    array arr;
    if (e != kw.single.end()) {
      if (e->second.get_array().get(arr) != simdjson::SUCCESS) {
        return InvalidArgument("json_schema: enum must be an array at " + path);
      }
      for (element v : arr) {
        if (c == kw.single.end() || Minify(v) == Minify(c->second)) values.push_back(v);
      }
    } else {
      values.push_back(c->second);
    }
    for (element v : values) {
      if (!ValueFits(v, mask)) continue;
      Sequence seq;
      DI_RETURN_IF_ERROR(Literal(v, &seq));
      alts.push_back(std::move(seq));
    }
    *out = alts.empty() ? g_.Nothing() : g_.Choice(std::move(alts), "enum");
    return Status::Ok();
  }
  Symbol s;
  if (mask & kNull) alts.push_back(Grammar::Literal("null"));
  if (mask & kBool) {
    alts.push_back(Grammar::Literal("true"));
    alts.push_back(Grammar::Literal("false"));
  }
  if (mask & kString) {
    DI_RETURN_IF_ERROR(StringSchema(kw, path, &s));
    alts.push_back({s});
  }
  if ((mask & kFraction) && !(mask & kInteger)) {  // numbers that are not integers
    for (const char* k :
         {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}) {
      if (kw.single.count(k)) Unenforced(path, k, "is not enforced next to 'not' integer");
    }
    alts.push_back({j_.NonIntegerNumber()});
  } else if (mask & (kFraction | kInteger)) {
    DI_RETURN_IF_ERROR(NumberSchema(kw, path, !(mask & kFraction), &s));
    alts.push_back({s});
  }
  if (mask & kObject) {
    DI_RETURN_IF_ERROR(ObjectSchema(kw, path, depth, &s));
    alts.push_back({s});
  }
  if (mask & kArray) {
    DI_RETURN_IF_ERROR(ArraySchema(kw, path, depth, &s));
    alts.push_back({s});
  }
  *out = alts.empty() ? g_.Nothing() : g_.Choice(std::move(alts), "types");
  return Status::Ok();
}

Status SchemaCompiler::StringSchema(const Keywords& kw, const std::string& path, Symbol* out) {
  int64_t min = 0, max = -1;
  GetInt(kw, "minLength", &min);
  GetInt(kw, "maxLength", &max);
  const bool has_len = min > 0 || max >= 0;
  auto pat = kw.single.find("pattern");
  auto fmt = kw.single.find("format");
  std::string_view text;
  if (pat != kw.single.end() && pat->second.get_string().get(text) == simdjson::SUCCESS) {
    RegexOptions opt;
    opt.search = true;
    opt.json_string = true;
    Result<Symbol> r = AddRegex(&g_, text, opt);
    if (r.ok()) {
      if (has_len) Unenforced(path, "minLength/maxLength", "is not enforced next to pattern");
      if (fmt != kw.single.end()) Unenforced(path, "format", "is not enforced next to pattern");
      *out = j_.Quoted(*r);
      return Status::Ok();
    }
    if (o_.strict) return InvalidArgument("json_schema: " + path + ": " + r.status().message());
    Unenforced(path, "pattern", "is not enforced: " + r.status().message());
  }
  if (fmt != kw.single.end() && fmt->second.get_string().get(text) == simdjson::SUCCESS) {
    Result<Symbol> r = j_.FormatContent(text, &notes_);
    if (r.ok()) {
      if (has_len) Unenforced(path, "minLength/maxLength", "is not enforced next to format");
      *out = j_.Quoted(*r);
      return Status::Ok();
    }
    Unenforced(path, "format", "'" + std::string(text) + "' is not supported");
  }
  if (min > kMaxRepeat) {
    Unenforced(path, "minLength", "above " + std::to_string(kMaxRepeat) + " is not enforced");
    min = 0;
  }
  if (max > kMaxRepeat) {
    Unenforced(path, "maxLength", "above " + std::to_string(kMaxRepeat) + " is not enforced");
    max = -1;
  }
  if (max >= 0 && max < min) {
    *out = g_.Nothing();
    return Status::Ok();
  }
  *out = j_.String(static_cast<int>(min), static_cast<int>(max));
  return Status::Ok();
}

Status SchemaCompiler::NumberSchema(const Keywords& kw, const std::string& path, bool integer,
                                    Symbol* out) {
  double v;
  bool has_lo = false, has_hi = false, lo_excl = false, hi_excl = false;
  double lo = 0, hi = 0;  // for integers: inclusive integer bounds
  if (GetNumber(kw, "minimum", &v)) lo = v, has_lo = true;
  if (GetNumber(kw, "exclusiveMinimum", &v) && (!has_lo || v >= lo)) {
    lo = v, has_lo = true, lo_excl = true;
  }
  if (GetNumber(kw, "maximum", &v)) hi = v, has_hi = true;
  if (GetNumber(kw, "exclusiveMaximum", &v) && (!has_hi || v <= hi)) {
    hi = v, has_hi = true, hi_excl = true;
  }
  double q = 0;
  if (GetNumber(kw, "multipleOf", &q) && !(integer && q == 1)) {
    if (has_lo || has_hi) {
      Unenforced(path, "multipleOf", "together with minimum/maximum is not enforced");
    } else {
      Result<Symbol> r = j_.MultipleOf(q, integer);
      if (r.ok()) {
        *out = *r;
        return Status::Ok();
      }
      Unenforced(path, "multipleOf", "is not enforced: " + r.status().message());
    }
  }
  const bool in_range = (!has_lo || std::fabs(lo) <= 1e18) && (!has_hi || std::fabs(hi) <= 1e18);
  if (integer) {
    if (has_lo) lo = lo_excl ? std::floor(lo) + 1 : std::ceil(lo);
    if (has_hi) hi = hi_excl ? std::ceil(hi) - 1 : std::floor(hi);
    if (in_range) {
      *out = j_.IntegerRange(has_lo, static_cast<int64_t>(lo), has_hi, static_cast<int64_t>(hi));
      return Status::Ok();
    }
    Unenforced(path, "minimum/maximum", "beyond 1e18 is not enforced");
    *out = j_.Integer();
    return Status::Ok();
  }
  if (!has_lo && !has_hi) {
    *out = j_.Number();
    return Status::Ok();
  }
  // Exact for decimal bounds (numbers written without exponent).
  JsonPieces::Decimal dlo, dhi;
  if ((has_lo && !JsonPieces::ToDecimal(lo, &dlo)) ||
      (has_hi && !JsonPieces::ToDecimal(hi, &dhi))) {
    Unenforced(path, "minimum/maximum",
               "beyond 1e18 or with over 40 fraction digits is not enforced");
    *out = j_.Number();
    return Status::Ok();
  }
  *out = j_.DecimalRange(has_lo, dlo, lo_excl, has_hi, dhi, hi_excl);
  return Status::Ok();
}

}  // namespace deepinfer::grammar::internal
