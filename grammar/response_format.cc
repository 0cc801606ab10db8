#include "grammar/response_format.h"

#include <simdjson.h>

#include "grammar/ebnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace deepinfer::grammar {

Result<std::shared_ptr<const CompiledGrammar>> CompileResponseFormat(
    std::string_view json, std::vector<std::string>* warnings) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(json.data(), json.size()).get(root) || !root.is_object()) {
    return InvalidArgument("response_format: not a JSON object");
  }
  std::string_view type = "text", ws = "compact";
  if (root["type"].get(type) != simdjson::SUCCESS) type = "text";
  if (root["whitespace"].get(ws) != simdjson::SUCCESS) ws = "compact";
  if (ws != "compact" && ws != "flexible") {
    return InvalidArgument("response_format.whitespace: must be compact or flexible");
  }
  const bool flexible = ws == "flexible";
  Grammar g;
  if (type == "text") {
    return std::shared_ptr<const CompiledGrammar>();
  } else if (type == "json_object") {
    g = AnyJsonGrammar(flexible);
  } else if (type == "json_schema") {
    simdjson::dom::element schema;
    if (root["json_schema"]["schema"].get(schema)) {
      return InvalidArgument("response_format.json_schema.schema: missing");
    }
    bool strict = false;
    if (root["json_schema"]["strict"].get(strict) != simdjson::SUCCESS) strict = false;
    JsonSchemaOptions options;
    options.strict = strict;
    options.flexible_whitespace = flexible;
    DI_ASSIGN_OR_RETURN(JsonSchemaGrammar s,
                        JsonSchemaToGrammar(simdjson::to_string(schema), options));
    if (warnings != nullptr) *warnings = std::move(s.warnings);
    g = std::move(s.grammar);
  } else if (type == "regex") {
    std::string_view pattern;
    if (root["regex"].get(pattern) && root["pattern"].get(pattern)) {
      return InvalidArgument("response_format.regex: missing");
    }
    DI_ASSIGN_OR_RETURN(g, RegexToGrammar(pattern));
  } else if (type == "grammar" || type == "ebnf") {
    std::string_view text;
    if (root["grammar"].get(text)) return InvalidArgument("response_format.grammar: missing");
    DI_ASSIGN_OR_RETURN(g, EbnfToGrammar(text));
  } else {
    return InvalidArgument("response_format.type: unsupported '" + std::string(type) + "'");
  }
  DI_ASSIGN_OR_RETURN(CompiledGrammar compiled, CompiledGrammar::Compile(g));
  return std::shared_ptr<const CompiledGrammar>(
      std::make_shared<const CompiledGrammar>(std::move(compiled)));
}

}  // namespace deepinfer::grammar
