#include "grammar/json_schema.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "grammar/json_schema_internal.h"
#include "grammar/json_strings.h"
#include "grammar/regex.h"

namespace deepinfer::grammar {

namespace internal {

bool IsAnnotation(std::string_view k) {
  static const std::set<std::string_view> kKeys = {
      "title",       "description",    "default",      "examples",        "$schema",
      "$id",         "$comment",       "deprecated",   "readOnly",        "writeOnly",
      "$anchor",     "$defs",          "definitions",  "contentEncoding", "contentMediaType",
      "$vocabulary", "$dynamicAnchor", "discriminator"};
  return kKeys.count(k) != 0;
}

bool IsValidationKeyword(std::string_view k) {
  static const std::set<std::string_view> kKeys = {"type",
                                                   "enum",
                                                   "const",
                                                   "properties",
                                                   "required",
                                                   "additionalProperties",
                                                   "items",
                                                   "prefixItems",
                                                   "additionalItems",
                                                   "minItems",
                                                   "maxItems",
                                                   "minLength",
                                                   "maxLength",
                                                   "pattern",
                                                   "format",
                                                   "minimum",
                                                   "maximum",
                                                   "exclusiveMinimum",
                                                   "exclusiveMaximum",
                                                   "anyOf",
                                                   "oneOf",
                                                   "allOf",
                                                   "not",
                                                   "if",
                                                   "then",
                                                   "else",
                                                   "patternProperties",
                                                   "propertyNames",
                                                   "minProperties",
                                                   "maxProperties",
                                                   "dependentRequired",
                                                   "dependentSchemas",
                                                   "dependencies",
                                                   "unevaluatedProperties",
                                                   "unevaluatedItems",
                                                   "contains",
                                                   "minContains",
                                                   "maxContains",
                                                   "uniqueItems",
                                                   "multipleOf",
                                                   "$dynamicRef",
                                                   "$recursiveRef"};
  return kKeys.count(k) != 0;
}

std::string Minify(element e) { return simdjson::minify(e); }

SchemaCompiler::SchemaCompiler(const JsonSchemaOptions& o)
    : o_(o), j_(&g_, o.flexible_whitespace) {}

Result<JsonSchemaGrammar> SchemaCompiler::Run(std::string_view text) {
  simdjson::padded_string padded(text);
  if (parser_.parse(padded).get(root_) != simdjson::SUCCESS) {
    return InvalidArgument("json_schema: the schema is not valid JSON");
  }
  if (aux_parser_.parse(std::string_view(R"({"type":"string"})")).get(string_type_) !=
      simdjson::SUCCESS) {
    return Internal("json_schema: cannot parse the string type");
  }
  const int32_t start = g_.AddRule("root");
  g_.set_start(start);
  Symbol body;
  DI_RETURN_IF_ERROR(Compile(root_, "#", 0, &body));
  Sequence seq;
  j_.Ws(&seq);
  seq.push_back(body);
  j_.Ws(&seq);
  g_.AddAlternative(start, std::move(seq));
  if (o_.strict && !unenforced_.empty()) {
    std::string msg = "json_schema: cannot enforce:";
    for (const std::string& u : unenforced_) msg += " [" + u + "]";
    return InvalidArgument(msg);
  }
  JsonSchemaGrammar out{std::move(g_), std::move(notes_)};
  out.warnings.insert(out.warnings.end(), unenforced_.begin(), unenforced_.end());
  return out;
}

void SchemaCompiler::Unenforced(const std::string& path, std::string_view kw,
                                std::string_view why) {
  unenforced_.push_back(path + ": '" + std::string(kw) + "' " +
                        (why.empty() ? std::string("is not enforced") : std::string(why)));
}

Status SchemaCompiler::Resolve(std::string_view ref, element* out) {
  if (ref.empty() || ref[0] != '#') {
    return InvalidArgument("json_schema: only local $ref ('#...') is supported, got '" +
                           std::string(ref) + "'");
  }
  // A URI fragment: percent-decoded first; JSON pointer unescaping happens in at_pointer.
  std::string pointer;
  for (size_t i = 1; i < ref.size(); ++i) {
    auto hex = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (ref[i] == '%' && i + 2 < ref.size() && hex(ref[i + 1]) >= 0 && hex(ref[i + 2]) >= 0) {
      pointer += static_cast<char>(hex(ref[i + 1]) * 16 + hex(ref[i + 2]));
      i += 2;
    } else {
      pointer += ref[i];
    }
  }
  if (pointer.empty()) {
    *out = root_;
    return Status::Ok();
  }
  if (root_.at_pointer(pointer).get(*out) != simdjson::SUCCESS) {
    return InvalidArgument("json_schema: $ref '" + std::string(ref) + "' does not resolve");
  }
  return Status::Ok();
}

Status SchemaCompiler::Compile(element e, const std::string& path, int depth, Symbol* out) {
  if (depth > kMaxDepth) return InvalidArgument("json_schema: schema nested too deeply at " + path);
  object obj;
  if (e.get_object().get(obj) == simdjson::SUCCESS) {
    std::string_view ref;
    bool only_ref = false;
    for (auto field : obj) {
      if (field.key == "$ref") {
        only_ref = field.value.get_string().get(ref) == simdjson::SUCCESS;
      } else if (IsValidationKeyword(field.key)) {
        only_ref = false;
        ref = {};
        break;
      }
    }
    if (only_ref && !ref.empty()) {
      auto it = ref_rules_.find(std::string(ref));
      if (it != ref_rules_.end()) {
        *out = Symbol::Rule(it->second);
        return Status::Ok();
      }
      element target;
      DI_RETURN_IF_ERROR(Resolve(ref, &target));
      const int32_t rule = g_.AddRule("ref " + std::string(ref));
      ref_rules_[std::string(ref)] = rule;
      Symbol body;
      DI_RETURN_IF_ERROR(Compile(target, std::string(ref), depth + 1, &body));
      g_.AddAlternative(rule, {body});
      *out = Symbol::Rule(rule);
      return Status::Ok();
    }
  }
  Parts parts;
  DI_RETURN_IF_ERROR(Expand(e, path, depth, false, &parts));
  return CompileParts(parts, path, depth, out);
}

Status SchemaCompiler::Expand(element e, const std::string& path, int depth, bool skip_comb,
                              Parts* out) {
  if (depth > kMaxDepth) {
    return InvalidArgument(
        "json_schema: $ref/allOf nested too deeply (recursive $ref next to "
        "other keywords?) at " +
        path);
  }
  out->push_back({e, skip_comb});
  object obj;
  if (e.get_object().get(obj) != simdjson::SUCCESS) {
    bool b;
    if (e.get_bool().get(b) != simdjson::SUCCESS) {
      return InvalidArgument("json_schema: a schema must be an object or a boolean at " + path);
    }
    return Status::Ok();
  }
  element v;
  if (obj["$ref"].get(v) == simdjson::SUCCESS) {
    std::string_view ref;
    if (v.get_string().get(ref) != simdjson::SUCCESS) {
      return InvalidArgument("json_schema: $ref must be a string at " + path);
    }
    element target;
    DI_RETURN_IF_ERROR(Resolve(ref, &target));
    DI_RETURN_IF_ERROR(Expand(target, std::string(ref), depth + 1, false, out));
  }
  array all;
  if (obj["allOf"].get(v) == simdjson::SUCCESS) {
    if (v.get_array().get(all) != simdjson::SUCCESS) {
      return InvalidArgument("json_schema: allOf must be an array at " + path);
    }
    int i = 0;
    for (element sub : all) {
      DI_RETURN_IF_ERROR(
          Expand(sub, path + "/allOf/" + std::to_string(i++), depth + 1, false, out));
    }
  }
  return ExpandConditional(obj, path, depth, out);
}

Status SchemaCompiler::CompileParts(const Parts& parts, const std::string& path, int depth,
                                    Symbol* out) {
  Keywords kw;
  std::vector<PartObjectKeys> members;  // parts with properties/additionalProperties
  std::set<std::string> item_keywords;  // distinct prefixItems/items/additionalItems per part
  for (const Part& p : parts) {
    bool b = true;
    if (p.e.get_bool().get(b) == simdjson::SUCCESS) {
      if (!b) {
        *out = g_.Nothing();
        return Status::Ok();
      }
      continue;
    }
    object obj;
    if (p.e.get_object().get(obj) != simdjson::SUCCESS) continue;
    PartObjectKeys member;
    bool has_member = false;
    std::string items_signature;
    for (auto field : obj) {
      const std::string_view k = field.key;
      if (k == "prefixItems" || k == "items" || k == "additionalItems") {
        items_signature += std::string(k) + "=" + Minify(field.value) + ";";
      } else if (k == "additionalProperties") {
        has_member = true;
        if (!(field.value.get_bool().get(b) == simdjson::SUCCESS && b)) {
          member.additional = field.value;
        }
      } else if (k == "properties") {
        has_member = true;
        object props;
        if (field.value.get_object().get(props) == simdjson::SUCCESS) {
          for (auto prop : props) member.names.push_back(std::string(prop.key));
        }
      }
    }
    if (has_member) members.push_back(std::move(member));
    if (!items_signature.empty()) item_keywords.insert(items_signature);
    for (auto field : obj) {
      const std::string_view k = field.key;
      if (IsAnnotation(k) || k == "$ref" || k == "allOf") continue;
      if (k == "if" || k == "then" || k == "else") continue;  // ExpandConditional
      if (k == "properties") {
        object props;
        if (field.value.get_object().get(props) != simdjson::SUCCESS) {
          return InvalidArgument("json_schema: properties must be an object at " + path);
        }
        for (auto prop : props) {
          auto it = std::find_if(kw.props.begin(), kw.props.end(),
                                 [&](const auto& x) { return x.first == prop.key; });
          if (it == kw.props.end()) {
            kw.props.push_back({std::string(prop.key), {}});
            it = kw.props.end() - 1;
          }
          it->second.push_back({prop.value, false});  // expanded by ObjectSchema
        }
      } else if (k == "required") {
        array req;
        if (field.value.get_array().get(req) != simdjson::SUCCESS) {
          return InvalidArgument("json_schema: required must be an array at " + path);
        }
        for (element r : req) {
          std::string_view name;
          if (r.get_string().get(name) != simdjson::SUCCESS) {
            return InvalidArgument("json_schema: required entries must be strings at " + path);
          }
          kw.required.insert(std::string(name));
        }
      } else if (k == "anyOf" || k == "oneOf") {
        if (p.skip_comb) continue;
        if (kw.comb_set) {  // a conjunct of every branch of the first one
          kw.more_combs.push_back({std::string(k), field.value});
          continue;
        }
        kw.comb_set = true;
        kw.comb = field.value;
        kw.comb_name = std::string(k);
      } else if (IsValidationKeyword(k)) {
        auto [it, inserted] = kw.single.emplace(std::string(k), field.value);
        if (!inserted && Minify(it->second) != Minify(field.value)) {
          if (k == "type") {
            kw.extra_types.push_back(field.value);
          } else if (!MergeBound(k, &it->second, field.value)) {
            Unenforced(path, k, "has conflicting values in allOf (the first is used)");
          }
        }
      }
    }
  }
  if (item_keywords.size() > 1) {
    // Each member's `items` applies after its own prefix only; merging them is not exact.
    Unenforced(path, "prefixItems/items", "from different allOf members are not enforced");
  }
  if (members.size() > 1) MergeAdditionalProperties(members, &kw);
  if (kw.comb_set) {
    array branches;
    if (kw.comb.get_array().get(branches) != simdjson::SUCCESS) {
      return InvalidArgument("json_schema: " + kw.comb_name + " must be an array at " + path);
    }
    if (kw.comb_name == "oneOf") {
      OneOfKind kind;
      DI_RETURN_IF_ERROR(ClassifyOneOf(branches, parts, path, depth, &kind));
      if (kind == OneOfKind::kNothing) {
        *out = g_.Nothing();
        return Status::Ok();
      }
      if (kind == OneOfKind::kNotExact) {
        Unenforced(path, "oneOf",
                   "is enforced only when its branches exclude each other by type or by "
                   "distinct const/enum values");
      }
    }
    std::vector<Sequence> alts;
    int i = 0;
    // Without sibling constraints a branch compiles alone, so `$ref` branches stay rules
    // (recursion); otherwise the siblings are distributed into every branch.
    const bool alone =
        kw.single.empty() && kw.props.empty() && kw.required.empty() && kw.more_combs.empty();
    for (element branch : branches) {
      const std::string bpath0 = path + "/" + kw.comb_name + "/" + std::to_string(i);
      if (alone) {
        ++i;
        Symbol s;
        DI_RETURN_IF_ERROR(Compile(branch, bpath0, depth + 1, &s));
        alts.push_back({s});
        continue;
      }
      Parts bp;
      for (const Part& p : parts) bp.push_back({p.e, true});
      for (const auto& [name, value] : kw.more_combs) {
        element more;
        DI_RETURN_IF_ERROR(Synthesize("{\"" + name + "\":" + Minify(value) + "}", &more));
        bp.push_back({more, false});
      }
      const std::string bpath = path + "/" + kw.comb_name + "/" + std::to_string(i++);
      DI_RETURN_IF_ERROR(Expand(branch, bpath, depth + 1, false, &bp));
      Symbol s;
      DI_RETURN_IF_ERROR(CompileParts(bp, bpath, depth + 1, &s));
      alts.push_back({s});
    }
    if (alts.empty()) return InvalidArgument("json_schema: empty " + kw.comb_name + " at " + path);
    *out = g_.Choice(std::move(alts), kw.comb_name);
    return Status::Ok();
  }
  return CompileKeywords(kw, path, depth, out);
}

}  // namespace internal

Result<JsonSchemaGrammar> JsonSchemaToGrammar(std::string_view schema_json,
                                              const JsonSchemaOptions& options) {
  internal::SchemaCompiler c(options);
  return c.Run(schema_json);
}

Grammar AnyJsonGrammar(bool flexible_whitespace) {
  Grammar g;
  JsonPieces j(&g, flexible_whitespace);
  const int32_t root = g.AddRule("root");
  g.set_start(root);
  Sequence seq;
  j.Ws(&seq);
  seq.push_back(j.Value());
  j.Ws(&seq);
  g.AddAlternative(root, std::move(seq));
  return g;
}

}  // namespace deepinfer::grammar
