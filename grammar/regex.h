// Regex front end: the syntax JSON Schema `pattern` and users need, compiled into a Grammar over
// UTF-8 bytes. Unsupported constructs (backreferences, lookaround, word boundaries, inline flags,
// anchors away from the ends) are InvalidArgument errors, never a wrong grammar.
#pragma once

#include <string_view>

#include "engine/common/status.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

struct RegexOptions {
  /// JSON Schema `pattern` semantics: a branch not anchored with ^ (resp. $) may be preceded
  /// (resp. followed) by anything. Without it the regex must match the whole string.
  bool search = false;
  /// Match the JSON-escaped form of the text (the inside of a JSON string literal).
  bool json_string = false;
};

/// Adds rules for `pattern` to *g and returns the symbol that matches it.
Result<Symbol> AddRegex(Grammar* g, std::string_view pattern, const RegexOptions& options = {});
/// A grammar whose start rule matches `pattern` (whole string unless options.search).
Result<Grammar> RegexToGrammar(std::string_view pattern, const RegexOptions& options = {});

}  // namespace deepinfer::grammar
