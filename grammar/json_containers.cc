// Objects of the JSON Schema front end (arrays: json_arrays.cc).
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
      Parts expanded;
      for (const Part& p : parts) {
        DI_RETURN_IF_ERROR(Expand(p.e, ppath, depth + 1, false, &expanded));
      }
      DI_RETURN_IF_ERROR(CompileParts(expanded, ppath, depth + 1, &s));
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
  // dependentRequired: name -> names that must then be present too.
  std::vector<std::pair<std::string, std::vector<std::string>>> deps;
  DI_RETURN_IF_ERROR(DependentRequired(kw, path, &deps));
  // Required but undeclared names (and those of dependentRequired) take the
  // additionalProperties schema (none: they cannot appear).
  std::vector<std::string> implied(kw.required.begin(), kw.required.end());
  for (const auto& [name, needed] : deps) {
    implied.push_back(name);
    implied.insert(implied.end(), needed.begin(), needed.end());
  }
  for (const std::string& r : implied) {
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
  // min/maxProperties are counted exactly by the any-order construction: its states are (set of
  // declared members written, members written so far including extra keys, saturated at cap).
  int64_t min_props = 0, max_props = -1;
  GetInt(kw, "minProperties", &min_props);
  GetInt(kw, "maxProperties", &max_props);
  int64_t cap = std::max<int64_t>({0, min_props, max_props});
  const size_t n = props.size();
  if (n > kMaxAnyOrder && !deps.empty()) {
    Unenforced(path, "dependentRequired", "is enforced only for up to 6 named properties");
  }
  if (n > kMaxAnyOrder || cap > kMaxPropertyCount ||
      (n <= kMaxAnyOrder && (size_t{1} << n) * static_cast<size_t>(cap + 1) > kMaxObjectStates)) {
    if (min_props > 0) Unenforced(path, "minProperties");
    if (max_props >= 0) Unenforced(path, "maxProperties");
    min_props = 0;
    max_props = -1;
    cap = 0;
  }
  Symbol first;
  if (n <= kMaxAnyOrder) {
    // Any order: after[S, c] continues once the members in set S and c members in all were
    // written (each further member starts with a comma); every declared key at most once, extra
    // keys anywhere.
    const size_t full = size_t{1} << n, counts = static_cast<size_t>(cap + 1);
    std::vector<Symbol> members;
    for (const auto& [name, value] : props) {
      Sequence member = Grammar::Literal(JsonPieces::EncodeString(name));
      j_.Punct(&member, ":");
      member.push_back(value);
      members.push_back(g_.Group(std::move(member), "member"));
    }
    std::vector<int32_t> after(full * counts);
    for (int32_t& r : after) r = g_.AddRule("after");
    auto state = [&](size_t set, int64_t c) {
      return Symbol::Rule(after[set * counts + static_cast<size_t>(std::min(c, cap))]);
    };
    const int32_t first_rule = g_.AddRule("first");
    for (size_t set = 0; set < full; ++set) {
      for (int64_t c = 0; c <= cap; ++c) {
        const int32_t rule = after[set * counts + static_cast<size_t>(c)];
        bool complete = c >= min_props;
        auto in_set = [&](const std::string& name) {
          for (size_t i = 0; i < n; ++i) {
            if (props[i].first == name) return (set >> i & 1) != 0;
          }
          return false;
        };
        for (size_t i = 0; i < n; ++i) {
          if (!(set >> i & 1) && kw.required.count(props[i].first)) complete = false;
        }
        for (const auto& [name, needed] : deps) {
          if (!in_set(name)) continue;
          for (const std::string& d : needed) complete = complete && in_set(d);
        }
        const bool start = set == 0 && c == 0;
        if (complete) g_.AddAlternative(rule, {});
        if (complete && start) g_.AddAlternative(first_rule, {});
        if (max_props >= 0 && c >= max_props) continue;  // no further member
        for (size_t i = 0; i < n; ++i) {
          if (set >> i & 1) continue;
          Sequence a = comma_then(members[i]);
          a.push_back(state(set | size_t{1} << i, c + 1));
          g_.AddAlternative(rule, std::move(a));
          if (start) g_.AddAlternative(first_rule, {members[i], state(size_t{1} << i, 1)});
        }
        if (extra) {
          Sequence a = comma_then(extra_member);
          a.push_back(state(set, c + 1));
          g_.AddAlternative(rule, std::move(a));
          if (start) g_.AddAlternative(first_rule, {extra_member, state(0, 1)});
        }
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

Status SchemaCompiler::DependentRequired(
    const Keywords& kw, const std::string& path,
    std::vector<std::pair<std::string, std::vector<std::string>>>* deps) {
  auto dr = kw.single.find("dependentRequired");
  if (dr == kw.single.end()) return Status::Ok();
  object map;
  if (dr->second.get_object().get(map) != simdjson::SUCCESS) {
    return InvalidArgument("json_schema: dependentRequired must be an object at " + path);
  }
  for (auto field : map) {
    array names;
    if (field.value.get_array().get(names) != simdjson::SUCCESS) {
      return InvalidArgument("json_schema: dependentRequired values must be arrays at " + path);
    }
    std::vector<std::string> needed;
    for (element x : names) {
      std::string_view name;
      if (x.get_string().get(name) != simdjson::SUCCESS) {
        return InvalidArgument("json_schema: dependentRequired names must be strings at " + path);
      }
      needed.push_back(std::string(name));
    }
    if (!needed.empty()) deps->push_back({std::string(field.key), std::move(needed)});
  }
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
  // Not enforced (strict mode refuses the schema): lenient mode lets any extra key through
  // with any value, since keys matching a pattern are allowed — rejecting them would make valid
  // documents impossible to produce, which is worse than a warning.
  auto lenient_any_extra = [&] {
    *extra = true;
    *extra_value = j_.Value();
  };
  if (!ap_false || !names.empty() || !same || custom) {
    Unenforced(path, "patternProperties",
               "is enforced only with additionalProperties false, no declared properties, no "
               "propertyNames and one schema for all patterns");
    lenient_any_extra();
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
      lenient_any_extra();
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

}  // namespace deepinfer::grammar::internal
