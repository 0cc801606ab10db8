// JSON Schema front end, keyword by keyword: not, propertyNames, patternProperties, object
// const, applicators (oneOf exactness, allOf members with additionalProperties or items),
// strict/lenient reporting and malformed schemas.
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "tests/unit/grammar_test_util.h"

namespace deepinfer::grammar {
namespace {

using testing::Matches;
using testing::MustCompile;

using Case = testing::SchemaCase;

// Every schema must compile in strict mode (it is exact) and decide its texts as listed.
void ExpectExact(const std::vector<Case>& cases) { testing::ExpectSchemasDecide(cases, true); }

TEST(GrammarJsonKeywordsTest, NotPropertyNamesPatternPropertiesAndObjectConst) {
  const std::vector<Case> cases = {
      {R"({"not":{"type":"integer"}})", {R"("a")", "1.5", "null", "{}"}, {"1", "0", "-3"}},
      {R"({"type":"number","not":{"type":"integer"}})", {"1.5", "-0.25"}, {"1", "1.0", R"("a")"}},
      {R"({"not":{"type":["string","null"],"description":"x"}})", {"1", "[]"}, {R"("a")", "null"}},
      {R"({"properties":{"a":{"not":{}}}})", {"{}", R"({"b":1})"}, {R"({"a":1})"}},
      {R"({"not":false})", {"1", R"("x")"}, {}},
      {R"({"type":"object","propertyNames":{"maxLength":3}})",
       {"{}", R"({"abc":1,"a":[]})"},
       {R"({"abcd":1})", R"({"a":1,"abcd":2})"}},
      {R"({"type":"object","propertyNames":{"pattern":"^[a-b]"},"additionalProperties":{"type":"integer"}})",
       {R"({"apple":1,"b":2})"},
       {R"({"cherry":1})", R"({"apple":"x"})"}},
      {R"({"type":"object","propertyNames":false})", {"{}"}, {R"({"a":1})"}},
      {R"({"type":"object","patternProperties":{"^x-":{"type":"integer"}},"additionalProperties":false})",
       {"{}", R"({"x-a":1,"x-b":2})"},
       {R"({"y":1})", R"({"x-a":"s"})", R"({"ax-":1})"}},
      {R"({"const":{"a":1,"b":[true]}})",
       {R"({"a":1,"b":[true]})", R"({"b":[true],"a":1})"},
       {R"({"a":1})", R"({"a":1,"b":[true],"c":1})", R"({"a":1,"a":1,"b":[true]})"}},
      {R"({"enum":[{"x":{"p":1,"q":2}},3]})",
       {R"({"x":{"q":2,"p":1}})", "3"},
       {R"({"x":{"q":2}})", R"({"x":{"p":1,"q":2,"p":1}})"}},
  };
  ExpectExact(cases);
  // Not expressible soundly: reported, never a silently wrong grammar.
  for (const char* s : {
           R"({"not":{"type":"object","properties":{"a":{"type":"string"}}}})",
           R"({"patternProperties":{"f.*o":{"type":"integer"}}})",
           R"({"patternProperties":{"a":{"type":"integer"},"b":{"type":"string"}},
               "additionalProperties":false})",
           R"({"properties":{"a":{}},"patternProperties":{"^x":{}},"additionalProperties":false})",
           R"({"properties":{"banana":{}},"propertyNames":{"maxLength":3}})",
           R"({"type":"number","not":{"type":"integer"},"minimum":1})",
       }) {
    EXPECT_FALSE(JsonSchemaToGrammar(s).ok()) << s;
  }
}

// Lenient mode with patternProperties it cannot enforce (next to declared properties and
// additionalProperties false, as a real-world schema in bench/data/maskbench has it): keys matching
// a pattern must stay possible, so extra keys are let through (with the warning), not rejected.
TEST(GrammarJsonKeywordsTest, LenientPatternPropertiesKeepValidDocumentsPossible) {
  const char* schema = R"({"type":"object","properties":{"basic":{"type":"object"}},
      "patternProperties":{"^[a-zA-Z0-9_]*$":{"type":"object"}},"additionalProperties":false})";
  JsonSchemaOptions lenient;
  lenient.strict = false;
  auto r = JsonSchemaToGrammar(schema, lenient);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_FALSE(r->warnings.empty());
  const CompiledGrammar g = MustCompile(std::move(r->grammar));
  EXPECT_TRUE(Matches(g, R"({"basic":{},"custom_label":{"a":1}})"));
  EXPECT_TRUE(Matches(g, R"({"custom_label":{}})"));
  EXPECT_FALSE(Matches(g, R"({"basic":3})"));      // declared properties stay enforced
  EXPECT_FALSE(JsonSchemaToGrammar(schema).ok());  // strict: refused
}

TEST(GrammarJsonKeywordsTest, StrictModeListsUnenforcedKeywords) {
  const char* schema = R"({"type":"object","minProperties":300,"properties":{
      "n":{"type":"number","minimum":3.5,"maximum":9},"s":{"type":"array","uniqueItems":true}}})";
  auto strict = JsonSchemaToGrammar(schema);
  ASSERT_FALSE(strict.ok());
  for (const char* kw : {"minProperties", "uniqueItems"}) {
    EXPECT_NE(strict.status().message().find(kw), std::string::npos) << strict.status().message();
  }
  JsonSchemaOptions lenient;
  lenient.strict = false;
  auto r = JsonSchemaToGrammar(schema, lenient);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->warnings.size(), 2u);
  // Unknown keywords are annotations; multipleOf 1 on integers holds anyway.
  EXPECT_TRUE(JsonSchemaToGrammar(R"({"type":"integer","x-order":1,"multipleOf":1})").ok());
  EXPECT_FALSE(JsonSchemaToGrammar(R"({"type":"number","multipleOf":0.5,"maximum":3})").ok());
  // oneOf with branches of different types is exact, and exact sign bounds are no warning.
  auto one = JsonSchemaToGrammar(R"({"oneOf":[{"type":"integer","minimum":0},{"type":"null"}]})");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_TRUE(one->warnings.empty());
}

TEST(GrammarJsonKeywordsTest, BadSchemasAreErrors) {
  for (const char* s :
       {"{", "[1]", R"({"$ref":"#/nope"})", R"({"$ref":"http://x/y"})", R"({"type":"str"})",
        R"({"required":"a"})", R"({"type":"string","pattern":"(a"})", R"({"allOf":{}})",
        R"({"$defs":{"a":{"$ref":"#/$defs/a","type":"string"}},
                            "$ref":"#/$defs/a","minLength":1})"}) {
    auto r = JsonSchemaToGrammar(s);
    ASSERT_FALSE(r.ok()) << s;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << s;
  }
}

TEST(GrammarJsonKeywordsTest, OneOfIsExactOnlyForExclusiveBranches) {
  ExpectExact({
      {R"({"oneOf":[{"type":"integer","minimum":0},{"type":"null"}]})",
       {"0", "7", "null"},
       {"-1", R"("a")"}},
      {R"({"oneOf":[{"const":1},{"enum":["a",2.5]}]})", {"1", R"("a")", "2.5"}, {"2", "true"}},
      {R"({"type":"object","oneOf":[{"required":["a"],"properties":{"a":{"type":"string"}}},
          {"type":"array"}]})",
       {R"({"a":"x"})"},
       {"{}", "[]"}},
      {R"({"oneOf":[true,false,false]})", {"1", R"("x")"}, {}},
      {R"({"properties":{"a":{"oneOf":[true,{"description":"any"}]}}})",
       {"{}", R"({"b":1})"},
       {R"({"a":1})"}},
  });
  // Branches that may overlap: refused in strict mode, anyOf with a warning in lenient mode.
  for (const char* s : {
           R"({"oneOf":[{"type":"integer"},{"minimum":2}]})",
           R"({"type":"string","oneOf":[{"minLength":2},{"maxLength":4}]})",
           R"({"oneOf":[{"const":1},{"const":1.0}]})",
           R"({"oneOf":[{"enum":[{"a":1}]},{"enum":[{"a":1.0}]}]})",
           R"({"type":"object","oneOf":[{"required":["a"]},{"required":["b"]}]})",
       }) {
    auto strict = JsonSchemaToGrammar(s);
    ASSERT_FALSE(strict.ok()) << s;
    EXPECT_NE(strict.status().message().find("oneOf"), std::string::npos) << s;
    JsonSchemaOptions lenient;
    lenient.strict = false;
    auto r = JsonSchemaToGrammar(s, lenient);
    ASSERT_TRUE(r.ok()) << s;
    EXPECT_EQ(r->warnings.size(), 1u) << s;
  }
}

TEST(GrammarJsonKeywordsTest, AllOfMembersKeepTheirOwnAdditionalProperties) {
  ExpectExact({
      // The root's additionalProperties does not see properties declared inside allOf.
      {R"({"allOf":[{"properties":{"foo":{}}}],"additionalProperties":{"type":"boolean"}})",
       {"{}", R"({"foo":true,"bar":false})"},
       {R"({"foo":1,"bar":true})", R"({"foo":1})"}},
      {R"({"allOf":[{"properties":{"a":{}},"additionalProperties":false}],"properties":{"b":{}}})",
       {"{}", R"({"a":1})"},
       {R"({"b":1})", R"({"a":1,"b":2})"}},
      {R"({"allOf":[{"properties":{"a":{"type":"integer"}},"additionalProperties":false},
          {"properties":{"a":{"minimum":0}},"additionalProperties":false}]})",
       {"{}", R"({"a":3})"},
       {R"({"a":-1})", R"({"b":1})"}},
      {R"({"allOf":[{"items":{"type":"integer"}},{"items":{"type":"integer"}}]})",
       {"[]", "[1,2]"},
       {R"(["a"])"}},
  });
  // A required name that another member forbids: nothing is valid.
  auto none = JsonSchemaToGrammar(
      R"({"type":"object","allOf":[{"properties":{"a":{}},"required":["a"]}],
          "additionalProperties":false})");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(CompiledGrammar::Compile(std::move(none->grammar)).ok());
  // prefixItems of one member and items of another: each member's items starts after its own
  // prefix, which one merged array schema cannot say. Reported.
  auto items = JsonSchemaToGrammar(R"({"allOf":[{"prefixItems":[{"minimum":3}]}],
                                       "items":{"minimum":5}})");
  ASSERT_FALSE(items.ok());
  EXPECT_NE(items.status().message().find("prefixItems/items"), std::string::npos);
}

TEST(GrammarJsonKeywordsTest, PropertyCountsIfThenElseAndEscapedRefs) {
  ExpectExact({
      // min/maxProperties count extra keys too.
      {R"({"type":"object","minProperties":1,"maxProperties":2})",
       {R"({"a":1})", R"({"a":1,"b":2})"},
       {"{}", R"({"a":1,"b":2,"c":3})"}},
      {R"({"type":"object","maxProperties":0})", {"{}"}, {R"({"a":1})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],
          "additionalProperties":{"type":"string"},"minProperties":2,"maxProperties":3})",
       {R"({"a":1,"x":"s"})", R"({"y":"t","a":1,"x":"s"})"},
       {R"({"a":1})", R"({"x":"s","y":"t"})", R"({"a":1,"x":"s","y":"t","z":"u"})",
        R"({"a":1,"x":2})"}},
      // if/then/else: lone keywords constrain nothing, boolean and type-only conditions are exact.
      {R"({"if":{"const":0}})", {"0", R"("x")"}, {}},
      {R"({"then":{"const":0},"else":false})", {"1", R"("x")"}, {}},
      {R"({"if":true,"then":{"const":"then"},"else":{"const":"else"}})",
       {R"("then")"},
       {R"("else")"}},
      {R"({"if":false,"then":{"const":"then"},"else":{"const":"else"}})",
       {R"("else")"},
       {R"("then")"}},
      {R"({"if":{"type":"integer"},"then":{"minimum":0},"else":{"type":"string"}})",
       {"0", "5", R"("x")"},
       {"-1", "1.5", "null"}},
      {R"({"properties":{"a":{"if":{"type":"number"},"then":false,"else":false}}})",
       {"{}"},
       {R"({"a":4})", R"({"a":"foo"})"}},
      // A property referring to the root recurses through a rule.
      {R"({"properties":{"foo":{"$ref":"#"}},"additionalProperties":false})",
       {R"({"foo":false})", R"({"foo":{"foo":false}})"},
       {R"({"bar":false})", R"({"foo":{"bar":false}})"}},
      // $ref fragments are percent-decoded before the JSON pointer is followed.
      {R"({"$defs":{"a%b":{"type":"integer"},"q\"r":{"type":"string"}},
          "properties":{"x":{"$ref":"#/$defs/a%25b"},"y":{"$ref":"#/$defs/q%22r"}}})",
       {R"({"x":1,"y":"s"})"},
       {R"({"x":"s"})", R"({"y":1})"}},
  });
  // A condition that needs a general `not` is reported.
  EXPECT_FALSE(JsonSchemaToGrammar(R"({"if":{"minimum":0},"then":{"multipleOf":2}})").ok());
}

TEST(GrammarJsonKeywordsTest, ContainsDependentRequiredAndMergedBounds) {
  ExpectExact({
      {R"({"type":"array","contains":{"minimum":5}})",
       {"[5]", "[3,4,6]", "[6,1]"},
       {"[]", "[1,2]", "[4.5]"}},
      {R"({"type":"array","items":{"multipleOf":2},"contains":{"multipleOf":3}})",
       {"[6,12]", "[2,6]", "[6]"},
       {"[2,4]", "[3,6]", "[]"}},
      {R"({"properties":{"a":{"type":"array","contains":false}}})",
       {"{}", R"({"b":[]})"},
       {R"({"a":[]})", R"({"a":[1]})"}},
      {R"({"type":"array","contains":{"const":1},"minContains":0})", {"[]", "[2]"}, {"{}"}},
      {R"({"type":"object","dependentRequired":{"bar":["foo"]}})",
       {"{}", R"({"foo":1})", R"({"foo":1,"bar":2})", R"({"bar":2,"x":0,"foo":1})"},
       {R"({"bar":2})", R"({"bar":2,"x":1})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}},"dependentRequired":{"a":["b"]},
          "additionalProperties":false})",
       {"{}"},
       {R"({"a":1})", R"({"a":1,"b":2})"}},
      // Bounds of several allOf members: the tighter one; integer multipleOf: the lcm.
      {R"({"type":"integer","allOf":[{"multipleOf":2},{"multipleOf":3}]})",
       {"0", "6", "-12"},
       {"2", "3", "4"}},
      {R"({"type":"integer","allOf":[{"maximum":30},{"maximum":20,"minimum":10},{"minimum":15}]})",
       {"15", "20"},
       {"14", "21", "25"}},
      // A second anyOf/oneOf is a conjunct of every branch of the first.
      {R"({"type":"integer","allOf":[{"multipleOf":2}],"anyOf":[{"multipleOf":3}],
          "oneOf":[{"multipleOf":5}]})",
       {"0", "30"},
       {"6", "10", "15"}},
  });
  for (const char* s : {
           R"({"contains":{"const":1},"minItems":2})",
           R"({"contains":{"const":1},"maxContains":1})",
           R"({"contains":{"const":1},"minContains":2})",
           R"({"prefixItems":[{"type":"string"}],"contains":{"const":1}})",
           R"({"allOf":[{"multipleOf":2},{"multipleOf":0.5}]})",
       }) {
    EXPECT_FALSE(JsonSchemaToGrammar(s).ok()) << s;
  }
}

}  // namespace
}  // namespace deepinfer::grammar
