// Internals of the JSON Schema front end, shared by json_schema.cc (references, allOf merging,
// anyOf/oneOf) and json_types.cc (per-type keywords). Not part of the public API.
#pragma once

#include <simdjson.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/json_strings.h"

namespace deepinfer::grammar::internal {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

/// One schema of a conjunction (allOf members and $ref targets are flattened into a list).
struct Part {
  element e;
  bool skip_comb;  // its anyOf/oneOf was already distributed
};
using Parts = std::vector<Part>;

/// The merged keywords of a conjunction.
struct Keywords {
  std::vector<std::pair<std::string, Parts>> props;  // in first-seen order
  std::set<std::string> required;
  std::map<std::string, element> single;  // every other keyword (first value)
  std::vector<element> extra_types;       // further `type` values to intersect
  bool comb_set = false;
  element comb;
  std::string comb_name;
};

bool IsAnnotation(std::string_view k);
/// A keyword that constrains instances (handled or reported); others are annotations.
bool IsValidationKeyword(std::string_view k);
std::string Minify(element e);

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const JsonSchemaOptions& o);
  Result<JsonSchemaGrammar> Run(std::string_view text);

 private:
  static constexpr int kMaxDepth = 128;
  static constexpr int kMaxRepeat = 2000;
  // Objects with at most this many declared properties accept them in any order (2^n rules);
  // larger ones only in schema order.
  static constexpr size_t kMaxAnyOrder = 6;

  Status Compile(element e, const std::string& path, int depth, Symbol* out);
  Status Expand(element e, const std::string& path, int depth, bool skip_comb, Parts* out);
  Status CompileParts(const Parts& parts, const std::string& path, int depth, Symbol* out);
  Status Resolve(std::string_view ref, element* out);
  void Unenforced(const std::string& path, std::string_view kw, std::string_view why = "");

  // json_types.cc
  Status CompileKeywords(const Keywords& kw, const std::string& path, int depth, Symbol* out);
  Status StringSchema(const Keywords& kw, const std::string& path, Symbol* out);
  Status NumberSchema(const Keywords& kw, const std::string& path, bool integer, Symbol* out);
  Status ObjectSchema(const Keywords& kw, const std::string& path, int depth, Symbol* out);
  Status OrderedMembers(const Keywords& kw,
                        const std::vector<std::pair<std::string, Symbol>>& props, bool extra,
                        Symbol extra_member, Symbol* out);
  Status ArraySchema(const Keywords& kw, const std::string& path, int depth, Symbol* out);
  Status Literal(element v, Sequence* out);
  /// Every member exactly once, in any order, separated by commas (2^n rules).
  Symbol AnyOrder(const std::vector<Symbol>& members);
  /// The key of extra members under propertyNames / patternProperties (false: the default).
  Status ExtraKey(const Keywords& kw, const std::string& path, int depth,
                  const std::vector<std::string>& names, bool* extra, Symbol* extra_value,
                  Symbol* key, bool* empty_only);
  bool GetInt(const Keywords& kw, const char* key, int64_t* v);
  bool GetNumber(const Keywords& kw, const char* key, double* v);

  JsonSchemaOptions o_;
  Grammar g_;
  JsonPieces j_;
  simdjson::dom::parser parser_;
  element root_;
  simdjson::dom::parser aux_parser_;
  element string_type_;  // {"type":"string"}, intersected with propertyNames
  std::map<std::string, int32_t> ref_rules_;
  std::vector<std::string> unenforced_;
  std::vector<std::string> notes_;
};

}  // namespace deepinfer::grammar::internal
