// GBNF front end (the dialect llama.cpp and XGrammar use): `name ::= ...` rules, `|`, grouping,
// `? * +`, `{m}` `{m,}` `{m,n}`, character classes with negation and escapes, string literals
// with escapes, `.`, `#` comments; `root` is the start rule.
#pragma once

#include <string_view>

#include "engine/common/status.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

/// Parses a GBNF grammar. Errors name the construct and the line.
Result<Grammar> EbnfToGrammar(std::string_view text, std::string_view root = "root");

}  // namespace deepinfer::grammar
