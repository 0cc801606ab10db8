// Arrays of the JSON Schema front end: items, prefixItems (and the draft-7 tuple form),
// minItems/maxItems and contains.
#include <simdjson.h>

#include <algorithm>

#include "grammar/json_schema_internal.h"

namespace deepinfer::grammar::internal {

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
  auto ct = kw.single.find("contains");
  int64_t min_contains = 1;
  GetInt(kw, "minContains", &min_contains);
  if (ct != kw.single.end() && min_contains != 0) {
    if (!prefix.empty() || min > 0 || max >= 0 || min_contains != 1 ||
        kw.single.count("maxContains")) {
      Unenforced(path, "contains",
                 "is enforced only without prefixItems, minItems, maxItems, minContains and "
                 "maxContains");
    } else {
      return ContainsArray(kw, ct->second, rest_allowed, rest, path, depth, out);
    }
  }
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

Status SchemaCompiler::ContainsArray(const Keywords& kw, element contains, bool rest_allowed,
                                     Symbol rest, const std::string& path, int depth, Symbol* out) {
  // Some item matches both `items` and `contains`; the others match `items`:
  // [ (item ,)* hit (, item)* ].
  if (!rest_allowed) {
    *out = g_.Nothing();
    return Status::Ok();
  }
  Parts parts;
  auto it = kw.single.find("items");
  if (it != kw.single.end()) {
    DI_RETURN_IF_ERROR(Expand(it->second, path + "/items", depth + 1, false, &parts));
  }
  DI_RETURN_IF_ERROR(Expand(contains, path + "/contains", depth + 1, false, &parts));
  Symbol hit;
  DI_RETURN_IF_ERROR(CompileParts(parts, path + "/contains", depth + 1, &hit));
  Sequence before = {rest};
  j_.Punct(&before, ",");
  Sequence after;
  j_.Punct(&after, ",");
  after.push_back(rest);
  Sequence a = Grammar::Literal("[");
  j_.Ws(&a);
  a.push_back(g_.Star(g_.Group(std::move(before), "item_before")));
  a.push_back(hit);
  a.push_back(g_.Star(g_.Group(std::move(after), "item_after")));
  j_.Ws(&a);
  a.push_back(Symbol::Bytes(ByteSet::Single(']')));
  *out = g_.Group(std::move(a), "array");
  return Status::Ok();
}

}  // namespace deepinfer::grammar::internal
