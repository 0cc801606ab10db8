# Structured outputs (grammar/): regex, GBNF and JSON Schema front ends, the Earley matcher and
# the deepinfer-grammar CLI.
function(deepinfer_grammar_test name)
  deepinfer_unit_test(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE deepinfer_grammar)
endfunction()

deepinfer_grammar_test(grammar_regex_test unit/grammar_regex_test.cc)
deepinfer_grammar_test(grammar_matcher_test unit/grammar_matcher_test.cc)
deepinfer_grammar_test(grammar_json_schema_test unit/grammar_json_schema_test.cc)
deepinfer_grammar_test(grammar_json_keywords_test unit/grammar_json_keywords_test.cc)
deepinfer_grammar_test(grammar_ebnf_test unit/grammar_ebnf_test.cc)
deepinfer_grammar_test(grammar_tool_test unit/grammar_tool_test.cc)
add_dependencies(grammar_tool_test deepinfer-grammar)
deepinfer_grammar_test(grammar_fuzz_test unit/grammar_fuzz_test.cc)
