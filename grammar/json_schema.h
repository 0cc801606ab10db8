// JSON Schema front end (draft 2020-12 plus draft-7 spellings) -> Grammar. Keywords the grammar
// cannot enforce are collected: strict mode fails listing them, lenient mode returns them as
// warnings. See docs/grammar.md for what is enforced.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/common/status.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

struct JsonSchemaOptions {
  /// Unenforceable keywords are an error (true) or warnings (false).
  bool strict = true;
  /// Allow whitespace between JSON tokens (otherwise compact output only).
  bool flexible_whitespace = false;
  /// Objects without `additionalProperties` accept extra keys (JSON Schema semantics) after the
  /// declared ones; false treats them as `additionalProperties: false`.
  bool allow_extra_properties = true;
};

struct JsonSchemaGrammar {
  Grammar grammar;
  /// What is not (or only partly) enforced, each naming the keyword and its schema path.
  std::vector<std::string> warnings;
};

/// Compiles a schema given as JSON text.
Result<JsonSchemaGrammar> JsonSchemaToGrammar(std::string_view schema_json,
                                              const JsonSchemaOptions& options = {});
/// The `json_object` response format: any JSON value.
Grammar AnyJsonGrammar(bool flexible_whitespace = false);

}  // namespace deepinfer::grammar
