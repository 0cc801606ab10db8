// Internals of the JSON Schema front end, shared by json_schema.cc (references, allOf merging,
// anyOf/oneOf) and json_types.cc (per-type keywords). Not part of the public API.
#pragma once

#include <simdjson.h>

#include <deque>
#include <map>
#include <optional>
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
  // Declared properties in first-seen order, each with its schemas (not expanded yet).
  std::vector<std::pair<std::string, Parts>> props;
  std::set<std::string> required;
  std::map<std::string, element> single;  // every other keyword (first value)
  std::vector<element> extra_types;       // further `type` values to intersect
  bool comb_set = false;
  element comb;
  std::string comb_name;
  std::vector<std::pair<std::string, element>> more_combs;  // further anyOf/oneOf (conjuncts)
};

/// The keys an allOf member declares in `properties`, and its `additionalProperties` (unless
/// absent or `true`).
struct PartObjectKeys {
  std::vector<std::string> names;
  std::optional<element> additional;
};

/// How `oneOf` compiles: as `anyOf` when its branches provably exclude each other (by JSON type
/// or by distinct scalar `const`/`enum` values), nothing when two branches accept everything.
enum class OneOfKind { kExact, kNothing, kNotExact };

/// JSON value kinds as bits, for `type` keywords and enum/const values (a number without a
/// fraction is kInteger, any other number kFraction).
enum JsonTypeBit : unsigned {
  kNull = 1,
  kBool = 2,
  kObject = 4,
  kArray = 8,
  kString = 16,
  kFraction = 32,
  kInteger = 64,
  kAll = 127,
};
/// The bits of a `type` name ("number" is kFraction | kInteger); 0 for an unknown name.
unsigned TypeNameBits(std::string_view name);
/// The bit of a JSON value (all bits when a number cannot be read).
unsigned ValueBits(element v);

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
  // minProperties/maxProperties: counted up to this bound, in at most this many object states.
  static constexpr int64_t kMaxPropertyCount = 256;
  static constexpr size_t kMaxObjectStates = 4096;

  Status Compile(element e, const std::string& path, int depth, Symbol* out);
  Status Expand(element e, const std::string& path, int depth, bool skip_comb, Parts* out);
  Status CompileParts(const Parts& parts, const std::string& path, int depth, Symbol* out);
  Status Resolve(std::string_view ref, element* out);
  // json_applicators.cc
  Status ClassifyOneOf(array branches, const Parts& siblings, const std::string& path, int depth,
                       OneOfKind* kind);
  /// Two values of a bound keyword in one conjunction: keeps the tighter one in *kept (the least
  /// common multiple for integer multipleOf). False when they cannot be combined.
  bool MergeBound(std::string_view k, element* kept, element other);
  /// Parses a schema built by the compiler; it lives as long as the compiler.
  Status Synthesize(const std::string& text, element* out);
  Status ExpandConditional(object obj, const std::string& path, int depth, Parts* out);
  void MergeAdditionalProperties(const std::vector<PartObjectKeys>& members, Keywords* kw);
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
  Status ContainsArray(const Keywords& kw, element contains, bool rest_allowed, Symbol rest,
                       const std::string& path, int depth, Symbol* out);
  Status DependentRequired(const Keywords& kw, const std::string& path,
                           std::vector<std::pair<std::string, std::vector<std::string>>>* deps);
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
  std::deque<simdjson::dom::parser> synthesized_;  // schemas built by the compiler (if/then/else)
};

}  // namespace deepinfer::grammar::internal
