// The response_format of a request (OpenAI's shapes plus regex and grammar extensions) compiled
// into a grammar the matcher can follow.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/status.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

/// Accepted shapes (JSON text):
///   {"type": "text"}                                   -> nullptr (no constraint)
///   {"type": "json_object"}                            -> any JSON value
///   {"type": "json_schema", "json_schema": {"schema": {...}, "strict": true|false}}
///   {"type": "regex", "regex": "..."}  (or "pattern")
///   {"type": "grammar", "grammar": "..."}  (GBNF; "ebnf" is a synonym for the type)
/// "whitespace": "flexible" allows whitespace between JSON tokens (compact by default).
/// Unenforceable schema keywords: an error with strict, else reported in *warnings.
Result<std::shared_ptr<const CompiledGrammar>> CompileResponseFormat(
    std::string_view response_format_json, std::vector<std::string>* warnings);

}  // namespace deepinfer::grammar
