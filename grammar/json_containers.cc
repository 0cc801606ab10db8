// Objects and arrays of the JSON Schema front end.
#include <simdjson.h>

#include <algorithm>
#include <bit>

#include "grammar/json_schema_internal.h"
#include "grammar/regex.h"

namespace deepinfer::grammar::internal {

Status SchemaCompiler::ObjectSchema(const Keywords& kw, const std::string& path, int depth,
                                    Symbol* out) {
  // Declared properties in schema order, then required names that were not declared.
  std::vector<std::pair<std::string, Symbol>> props;
  std::vector<std::string> names;
  for (const auto& [name, parts] : kw.props) {
    Symbol s;
    const std::string ppath = path + "/properties/" + name;
    if (parts.size() == 1) {
      DI_RETURN_IF_ERROR(Compile(parts[0].e, ppath, depth + 1, &s));
    } else {
      DI_RETURN_IF_ERROR(CompileParts(parts, ppath, depth + 1, &s));
    }
    props.push_back({name, s});
    names.push_back(name);
  }
  // Extra members: additionalProperties (or the default), keys other than the declared ones.
  bool extra = o_.allow_extra_properties;
  Symbol extra_value = j_.Value();
  auto ap = kw.single.find("additionalProperties");
  if (ap != kw.single.end()) {
    bool b;
    if (ap->second.get_bool().get(b) == simdjson::SUCCESS) {
      extra = b;
    } else {
      extra = true;
      DI_RETURN_IF_ERROR(
          Compile(ap->second, path + "/additionalProperties", depth + 1, &extra_value));
    }
  }
  // Required but undeclared names take the additionalProperties schema (none: unsatisfiable).
  for (const std::string& r : kw.required) {
    if (std::find(names.begin(), names.end(), r) != names.end()) continue;
    props.push_back({r, extra ? extra_value : g_.Nothing()});
    names.push_back(r);
  }
  Symbol key;
  bool empty_only = false;
  DI_RETURN_IF_ERROR(ExtraKey(kw, path, depth, names, &extra, &extra_value, &key, &empty_only));
  if (empty_only) {  // propertyNames: false
    int64_t min_props = 0;
    GetInt(kw, "minProperties", &min_props);
    Sequence obj = Grammar::Literal("{");
    j_.Ws(&obj);
    obj.push_back(Symbol::Bytes(ByteSet::Single('}')));
    *out =
        kw.required.empty() && min_props == 0 ? g_.Group(std::move(obj), "object") : g_.Nothing();
    return Status::Ok();
  }
  Symbol extra_member;
  if (extra) {
    Sequence m = {key};
    j_.Punct(&m, ":");
    m.push_back(extra_value);
    extra_member = g_.Group(std::move(m), "extra_member");
  }
  auto comma_then = [&](Symbol s) {
    Sequence seq;
    j_.Punct(&seq, ",");
    seq.push_back(s);
    return seq;
  };
  // min/maxProperties are counted exactly by the any-order construction without extra keys.
  int64_t min_props = 0, max_props = -1;
  GetInt(kw, "minProperties", &min_props);
  GetInt(kw, "maxProperties", &max_props);
  if (props.size() > kMaxAnyOrder || extra) {
    if (min_props > 0) Unenforced(path, "minProperties");
    if (max_props >= 0) Unenforced(path, "maxProperties");
    min_props = 0;
    max_props = -1;
  }
  Symbol first;
  if (props.size() <= kMaxAnyOrder) {
    // Any order: after[S] continues once the members in set S were written (each further member
    // starts with a comma); every declared key at most once, extra keys anywhere.
    const size_t n = props.size(), full = size_t{1} << n;
    std::vector<Symbol> members;
    for (const auto& [name, value] : props) {
      Sequence member = Grammar::Literal(JsonPieces::EncodeString(name));
      j_.Punct(&member, ":");
      member.push_back(value);
      members.push_back(g_.Group(std::move(member), "member"));
    }
    std::vector<int32_t> after(full);
    for (size_t set = 0; set < full; ++set) after[set] = g_.AddRule("after");
    const int32_t first_rule = g_.AddRule("first");
    for (size_t set = 0; set < full; ++set) {
      const int64_t count = std::popcount(set);
      bool complete = count >= min_props;
      for (size_t i = 0; i < n; ++i) {
        if (!(set >> i & 1) && kw.required.count(props[i].first)) complete = false;
      }
      if (max_props >= 0 && count >= max_props) {  // no further member
        if (complete) g_.AddAlternative(after[set], {});
        if (complete && set == 0) g_.AddAlternative(first_rule, {});
        continue;
      }
      if (complete) g_.AddAlternative(after[set], {});
      if (complete && set == 0) g_.AddAlternative(first_rule, {});
      for (size_t i = 0; i < n; ++i) {
        if (set >> i & 1) continue;
        Sequence a = comma_then(members[i]);
        a.push_back(Symbol::Rule(after[set | size_t{1} << i]));
        g_.AddAlternative(after[set], std::move(a));
        if (set == 0) {
          g_.AddAlternative(first_rule, {members[i], Symbol::Rule(after[size_t{1} << i])});
        }
      }
      if (extra) {
        Sequence a = comma_then(extra_member);
        a.push_back(Symbol::Rule(after[set]));
        g_.AddAlternative(after[set], std::move(a));
        if (set == 0) g_.AddAlternative(first_rule, {extra_member, Symbol::Rule(after[0])});
      }
    }
    first = Symbol::Rule(first_rule);
  } else {
    DI_RETURN_IF_ERROR(OrderedMembers(kw, props, extra, extra_member, &first));
  }
  Sequence obj = Grammar::Literal("{");
  j_.Ws(&obj);
  obj.push_back(first);
  j_.Ws(&obj);
  obj.push_back(Symbol::Bytes(ByteSet::Single('}')));
  *out = g_.Group(std::move(obj), "object");
  return Status::Ok();
}

Status SchemaCompiler::ExtraKey(const Keywords& kw, const std::string& path, int depth,
                                const std::vector<std::string>& names, bool* extra,
                                Symbol* extra_value, Symbol* key, bool* empty_only) {
  *key = j_.Quoted(j_.KeyContentExcept(names));
  *empty_only = false;
  bool b;
  bool custom = false;
  auto pn = kw.single.find("propertyNames");
  if (pn != kw.single.end()) {
    if (pn->second.get_bool().get(b) == simdjson::SUCCESS) {
      *empty_only = !b;
    } else if (!names.empty()) {
      // Extra keys would have to satisfy the schema and differ from the declared names.
      Unenforced(path, "propertyNames", "next to declared or required properties is not enforced");
    } else {
      Parts parts;
      DI_RETURN_IF_ERROR(Expand(pn->second, path + "/propertyNames", depth + 1, false, &parts));
      parts.push_back({string_type_, false});
      DI_RETURN_IF_ERROR(CompileParts(parts, path + "/propertyNames", depth + 1, key));
      custom = true;
    }
  }
  auto pp = kw.single.find("patternProperties");
  if (pp == kw.single.end()) return Status::Ok();
  object pats;
  if (pp->second.get_object().get(pats) != simdjson::SUCCESS) {
    return InvalidArgument("json_schema: patternProperties must be an object at " + path);
  }
  bool all_true = true, same = true, have_first = false;
  std::string first;
  element first_schema;
  for (auto field : pats) {
    const std::string m = Minify(field.value);
    if (m != "true" && m != "{}") all_true = false;
    if (!have_first) {
      first = m;
      first_schema = field.value;
      have_first = true;
    } else if (m != first) {
      same = false;
    }
  }
  auto ap = kw.single.find("additionalProperties");
  const bool ap_false =
      ap != kw.single.end() && ap->second.get_bool().get(b) == simdjson::SUCCESS && !b;
  const bool ap_any =
      ap == kw.single.end() || Minify(ap->second) == "true" || Minify(ap->second) == "{}";
  if (!have_first || (all_true && ap_any)) return Status::Ok();  // nothing to enforce
  // Exact only when every extra key must match a pattern and every pattern has one schema (a key
  // matching several patterns needs them all); otherwise keys outside the patterns would need
  // the complement of a regex.
  if (!ap_false || !names.empty() || !same || custom) {
    Unenforced(path, "patternProperties",
               "is enforced only with additionalProperties false, no declared properties, no "
               "propertyNames and one schema for all patterns");
    return Status::Ok();
  }
  std::vector<Sequence> contents;
  for (auto field : pats) {
    RegexOptions opt;
    opt.search = true;
    opt.json_string = true;
    Result<Symbol> r = AddRegex(&g_, field.key, opt);
    if (!r.ok()) {
      if (o_.strict) {
        return InvalidArgument("json_schema: " + path +
                               "/patternProperties: " + r.status().message());
      }
      Unenforced(path, "patternProperties", "is not enforced: " + r.status().message());
      return Status::Ok();
    }
    contents.push_back({*r});
  }
  *key = j_.Quoted(g_.Choice(std::move(contents), "pattern_key"));
  DI_RETURN_IF_ERROR(Compile(first_schema, path + "/patternProperties", depth + 1, extra_value));
  *extra = true;
  return Status::Ok();
}

Symbol SchemaCompiler::AnyOrder(const std::vector<Symbol>& members) {
  const size_t n = members.size(), full = (size_t{1} << n) - 1;
  std::vector<int32_t> after(full + 1);
  for (size_t set = 0; set <= full; ++set) after[set] = g_.AddRule("after");
  std::vector<Sequence> first;
  for (size_t set = 1; set <= full; ++set) {
    if (set == full) g_.AddAlternative(after[set], {});
    for (size_t i = 0; i < n; ++i) {
      if (set >> i & 1) continue;
      Sequence a;
      j_.Punct(&a, ",");
      a.push_back(members[i]);
      a.push_back(Symbol::Rule(after[set | size_t{1} << i]));
      g_.AddAlternative(after[set], std::move(a));
    }
  }
  for (size_t i = 0; i < n; ++i) first.push_back({members[i], Symbol::Rule(after[size_t{1} << i])});
  return g_.Choice(std::move(first), "members");
}

Status SchemaCompiler::OrderedMembers(const Keywords& kw,
                                      const std::vector<std::pair<std::string, Symbol>>& props,
                                      bool extra, Symbol extra_member, Symbol* out) {
  auto comma_then = [&](Symbol s) {
    Sequence seq;
    j_.Punct(&seq, ",");
    seq.push_back(s);
    return seq;
  };
  // After[i]: members i.. when one was already written (each starts with a comma);
  // First[i]: members i.. when none was written yet. Extra keys only after the declared ones.
  Symbol after, first;
  if (extra) {
    after = g_.Star(g_.Group(comma_then(extra_member), "more_extra"));
    first = g_.Optional(g_.Group({extra_member, after}, "extras"));
  } else {
    Sequence empty;
    after = g_.Choice({empty}, "end");
    first = after;
  }
  for (size_t i = props.size(); i-- > 0;) {
    Sequence member = Grammar::Literal(JsonPieces::EncodeString(props[i].first));
    j_.Punct(&member, ":");
    member.push_back(props[i].second);
    const Symbol m = g_.Group(std::move(member), "member");
    const bool required = kw.required.count(props[i].first) != 0;
    Sequence a = comma_then(m);
    a.push_back(after);
    std::vector<Sequence> after_alts = {a}, first_alts = {{m, after}};
    if (!required) {
      after_alts.push_back({after});
      first_alts.push_back({first});
    }
    after = g_.Choice(std::move(after_alts), "after_" + props[i].first);
    first = g_.Choice(std::move(first_alts), "first_" + props[i].first);
  }
  *out = first;
  return Status::Ok();
}

Status SchemaCompiler::ArraySchema(const Keywords& kw, const std::string& path, int depth,
                                   Symbol* out) {
  std::vector<element> prefix;
  array arr;
  bool rest_allowed = true;
  Symbol rest = j_.Value();
  auto take_rest = [&](element v, const std::string& p) -> Status {
    bool b;
    if (v.get_bool().get(b) == simdjson::SUCCESS) {
      rest_allowed = b;
      return Status::Ok();
    }
    return Compile(v, p, depth + 1, &rest);
  };
  auto pi = kw.single.find("prefixItems");
  auto it = kw.single.find("items");
  auto ai = kw.single.find("additionalItems");
  if (pi != kw.single.end() && pi->second.get_array().get(arr) == simdjson::SUCCESS) {
    for (element e : arr) prefix.push_back(e);
    if (it != kw.single.end()) DI_RETURN_IF_ERROR(take_rest(it->second, path + "/items"));
  } else if (it != kw.single.end() && it->second.get_array().get(arr) == simdjson::SUCCESS) {
    for (element e : arr) prefix.push_back(e);  // draft-7 tuple form
    if (ai != kw.single.end()) DI_RETURN_IF_ERROR(take_rest(ai->second, path + "/additionalItems"));
  } else if (it != kw.single.end()) {
    DI_RETURN_IF_ERROR(take_rest(it->second, path + "/items"));
  }
  int64_t min = 0, max = -1;
  GetInt(kw, "minItems", &min);
  GetInt(kw, "maxItems", &max);
  if (min > kMaxRepeat) {
    Unenforced(path, "minItems", "above " + std::to_string(kMaxRepeat) + " is not enforced");
    min = 0;
  }
  if (max > kMaxRepeat) {
    Unenforced(path, "maxItems", "above " + std::to_string(kMaxRepeat) + " is not enforced");
    max = -1;
  }
  size_t k = prefix.size();
  if (max >= 0 && static_cast<size_t>(max) < k) k = static_cast<size_t>(max);
  // Items beyond the prefix: between min_rest and max_rest (-1: unbounded).
  const int64_t min_rest = std::max<int64_t>(0, min - static_cast<int64_t>(k));
  int64_t max_rest = max < 0 ? -1 : max - static_cast<int64_t>(k);
  if (!rest_allowed) max_rest = 0;
  if (max_rest >= 0 && min_rest > max_rest) {
    *out = g_.Nothing();
    return Status::Ok();
  }
  Sequence sep_item;
  j_.Punct(&sep_item, ",");
  sep_item.push_back(rest);
  const Symbol more = g_.Group(std::move(sep_item), "more_items");
  Symbol tail;
  if (max_rest == 0) {
    tail = g_.Choice({Sequence{}}, "no_items");
  } else if (k == 0) {
    const Symbol list =
        g_.Group({rest, g_.Repeat(more, static_cast<int>(std::max<int64_t>(0, min_rest - 1)),
                                  max_rest < 0 ? -1 : static_cast<int>(max_rest - 1))},
                 "items");
    tail = min_rest == 0 ? g_.Optional(list) : list;
  } else {
    tail = g_.Repeat(more, static_cast<int>(min_rest), static_cast<int>(max_rest));
  }
  for (size_t j = k; j-- > 0;) {
    Symbol item;
    DI_RETURN_IF_ERROR(
        Compile(prefix[j], path + "/prefixItems/" + std::to_string(j), depth + 1, &item));
    Sequence seq;
    if (j > 0) j_.Punct(&seq, ",");
    seq.push_back(item);
    seq.push_back(tail);
    std::vector<Sequence> alts = {seq};
    if (static_cast<int64_t>(j) >= min) alts.push_back({});
    tail = g_.Choice(std::move(alts), "prefix");
  }
  Sequence a = Grammar::Literal("[");
  j_.Ws(&a);
  a.push_back(tail);
  j_.Ws(&a);
  a.push_back(Symbol::Bytes(ByteSet::Single(']')));
  *out = g_.Group(std::move(a), "array");
  return Status::Ok();
}

}  // namespace deepinfer::grammar::internal
