// JSON Schema front end: hand-written valid and invalid documents per schema, documents generated
// through the mask checked with simdjson, strict/lenient reporting and errors.
#include <simdjson.h>

#include <cstdio>
#include <random>

#include "grammar/json_schema.h"
#include "tests/unit/grammar_test_util.h"

namespace deepinfer::grammar {
namespace {

using testing::Matches;
using testing::MustCompile;

using Case = testing::SchemaCase;

CompiledGrammar CompileSchema(const std::string& schema, JsonSchemaOptions o = {}) {
  o.strict = false;
  auto r = JsonSchemaToGrammar(schema, o);
  EXPECT_TRUE(r.ok()) << schema << ": " << r.status().ToString();
  if (!r.ok()) std::abort();
  return MustCompile(std::move(r->grammar));
}

TEST(GrammarJsonSchemaTest, HandWrittenCases) {
  const std::vector<Case> cases = {
      {R"({"type":"string"})",
       {R"("")", R"("a\"b\\c\n\u00e9\ud83d\ude00")", "\"é😀\""},
       {"\"a\nb\"", R"("\x")", R"("\ud800")", R"("\ude00x")", "\"\x01\"", "'a'", R"("a)"}},
      {R"({"type":"string","minLength":2,"maxLength":3})",
       {R"("ab")", R"("a\nb")", "\"éé\""},
       {R"("a")", R"("abcd")", R"("\u0041")"}},
      {R"({"type":"integer"})", {"0", "-7", "123"}, {"01", "-", "1.5", "+1", "1e3", "-0.0"}},
      {R"({"type":"integer","minimum":0})", {"0", "42"}, {"-1", "-0", "00"}},
      {R"({"type":"number"})", {"0", "-1.25", "3e10", "2.5E-3"}, {".5", "1.", "01", "1e"}},
      {R"({"type":["string","null"]})", {"null", R"("x")"}, {"1", "nul"}},
      {R"({"type":"boolean"})", {"true", "false"}, {"True", "1"}},
      {R"({"enum":["a",1,null,{"k":[true]}]})",
       {R"("a")", "1", "null", R"({"k":[true]})"},
       {R"("b")", "2", R"({"k":[]})"}},
      {R"({"const":"x\"y"})", {R"("x\"y")"}, {R"("xy")"}},
      {R"({"type":"string","enum":["a",1]})", {R"("a")"}, {"1"}},
      {R"({"type":"object"})", {"{}", R"({"a":1,"b":[{}]})"}, {"[]", R"({"a"})", "{,}"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},
          "required":["b"],"additionalProperties":false})",
       {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"b":"x","a":1})"},
       {"{}", R"({"a":1})", R"({"a":1,"b":"x","c":2})", R"({"b":1})", R"({"b":"x","b":"y"})"}},
      {R"({"properties":{"a":{},"b":{},"c":{},"d":{},"e":{},"f":{},"g":{}},"required":["g"],
          "additionalProperties":false})",
       {R"({"g":1})", R"({"a":1,"c":2,"g":3})"},
       {R"({"g":1,"a":1})", "{}"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}}})",
       {"{}", R"({"a":1})", R"({"a":1,"z":null})", R"({"z":null})", R"({"ab":"x"})"},
       {R"({"a":"x"})", R"({"z":1,"a":"x"})", R"({"a":1,"a":"x"})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})",
       {R"({"z":null,"a":1,"y":2})"},
       {R"({"z":null})"}},
      {R"({"type":"object","additionalProperties":{"type":"integer"}})",
       {"{}", R"({"x":1,"y":2})"},
       {R"({"x":"1"})"}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2})",
       {"[1]", "[1,2]"},
       {"[]", "[1,2,3]", "[\"a\"]", "[1,]"}},
      {R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
       {"[]", R"(["a"])", R"(["a",1])"},
       {R"(["a",1,2])", "[1]"}},
      {R"({"type":"array","items":[{"type":"string"}],"additionalItems":{"type":"boolean"}})",
       {R"(["a",true,false])"},
       {R"(["a",1])"}},
      {R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})",
       {"1", R"("a")"},
       {R"("ab")", "true"}},
      {R"({"oneOf":[{"const":1},{"const":2}]})", {"1", "2"}, {"3"}},
      {R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                    {"properties":{"b":{"const":true}},"required":["b"]}],
          "properties":{"a":true,"b":true},"additionalProperties":false})",
       {R"({"a":1,"b":true})"},
       {R"({"a":1})", R"({"b":true})", R"({"a":1,"b":false})"}},
      {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
          "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},
          "required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":null}})"},
       {R"({"v":1})", R"({"v":1,"next":{"v":2}})"}},
      {R"({"$defs":{"l":{"type":"array","items":{"$ref":"#/$defs/l","x-note":1}}},
          "$ref":"#/$defs/l","x-vendor":true})",
       {"[]", "[[],[[]]]"},
       {"[1]", "[[],]"}},
      {R"({"type":"string","pattern":"^[a-z]+\\d$"})", {R"("ab1")"}, {R"("ab")", R"("Ab1")"}},
      {R"({"type":"string","pattern":"b+"})", {R"("abbc")", R"("b")"}, {R"("ac")"}},
      {R"({"type":"string","pattern":"^a\"b$"})", {R"("a\"b")"}, {"\"a\"b\""}},
      {R"({"type":"string","format":"date-time"})",
       {R"("2024-01-31T23:59:60.5Z")", R"("2024-02-29T10:00:00+05:30")",
        R"("2000-02-29T00:00:00Z")"},
       {R"("2024-01-31 23:59:60")", R"("2024-01-31T24:00:00Z")", R"("2024-01-31T23:59:60.5+05:30")",
        R"("2023-02-29T10:00:00Z")", R"("1900-02-29T10:00:00Z")", R"("2024-04-31T10:00:00Z")",
        R"("2024-01-31T12:00:60Z")"}},
      {R"({"type":"string","format":"uuid"})",
       {R"("123e4567-e89b-12d3-a456-426614174000")"},
       {R"("123e4567e89b12d3a456426614174000")"}},
      {R"({"type":"string","format":"ipv4"})",
       {R"("192.168.0.255")"},
       {R"("256.1.1.1")", R"("1.2.3")", R"("01.2.3.4")"}},
      {R"({"type":"string","format":"ipv6"})",
       {R"("::1")", R"("2001:db8::ff00:42:8329")", R"("::ffff:192.168.0.1")", R"("1:2::10.0.0.1")",
        R"("1:2:3:4:5:6:255.255.255.255")", R"("::")", R"("1:2:3:4:5:6:7::")"},
       {R"(":::")", R"("12345::")", R"("1::2::3")", R"("1::2:192.168.256.1")", R"("1:2:3:4:1.2.3")",
        R"("1:2:3:4:5:6:7:1.2.3.4")", R"("1:2:3:4:5:6:7")"}},
      {R"({"type":"string","format":"uri"})",
       {R"("http://a.com:80/p?q=1#f")", R"("urn:isbn:0451450523")", R"("ldap://[2001:db8::7]/c")",
        R"("http://a.com/%20")", R"("mailto:a@b.c")"},
       {R"("/abc")", R"("http://a.com/%6G")", R"("http://a.com/%")", R"("http://a.com:8a")",
        R"("https://[@a.org")", R"("http://a.com/\u00e9")", R"("http://a b")", R"("1a:b")"}},
      {R"({"type":"string","format":"email"})",
       {R"("a.b@c.org")", R"("\"a b\"@c.org")", R"("\"\\\"\"@c.org")", R"("a@[127.0.0.1]")",
        R"("a@[IPv6:::1]")"},
       {R"(".a@c.org")", R"("a..b@c.org")", R"("a@[1.2.3]")", R"("a@-c.org")", R"("\"a@c.org")",
        R"("a@[tag:x]")"}},
      {"true", {"1", R"({"a":[]})"}, {"", "{"}},
      {R"({"type":"object","properties":{"a":{},"b":{},"c":{}},"additionalProperties":false,
          "minProperties":1,"maxProperties":2})",
       {R"({"a":1})", R"({"c":1,"a":2})"},
       {"{}", R"({"a":1,"b":2,"c":3})"}},
      {R"({"properties":{"o":{"type":"object","required":["x"],"additionalProperties":false}}})",
       {"{}", "1"},
       {R"({"o":{"x":1}})", R"({"o":{}})"}},
      {R"({"type":"object","required":["x"],"additionalProperties":{"type":"null"}})",
       {R"({"x":null})", R"({"x":null,"y":null})"},
       {R"({"x":1})", "{}"}},
      {R"({"type":"object","properties":{"a":false}})", {"{}", R"({"b":1})"}, {R"({"a":1})"}},
  };
  testing::ExpectSchemasDecide(cases, /*strict=*/false);
}

TEST(GrammarJsonSchemaTest, IntegerBoundsAreExact) {
  struct Bounds {
    const char* schema;
    int64_t lo, hi;  // inclusive, within the tested window
  };
  const std::vector<Bounds> cases = {
      {R"({"type":"integer","minimum":-15,"maximum":123})", -15, 123},
      {R"({"type":"integer","minimum":7})", 7, 100000},
      {R"({"type":"integer","maximum":-3})", -100000, -3},
      {R"({"type":"integer","exclusiveMinimum":-1.5,"exclusiveMaximum":99.5})", -1, 99},
      {R"({"type":"integer","minimum":100,"maximum":999})", 100, 999},
      {R"({"type":"integer","minimum":0,"maximum":0})", 0, 0},
      {R"({"type":"integer","minimum":-1009,"maximum":-990})", -1009, -990},
      {R"({"type":"integer","minimum":95,"maximum":1205})", 95, 1205},
  };
  for (const Bounds& b : cases) {
    auto r = JsonSchemaToGrammar(b.schema);  // strict: exact bounds raise nothing
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const CompiledGrammar g = MustCompile(std::move(r->grammar));
    for (int64_t v = -1500; v <= 1500; ++v) {
      EXPECT_EQ(Matches(g, std::to_string(v)), v >= b.lo && v <= b.hi) << b.schema << " " << v;
    }
    EXPECT_EQ(Matches(g, "100000"), b.hi >= 100000) << b.schema;
    EXPECT_EQ(Matches(g, "-100000"), b.lo <= -100000) << b.schema;
    EXPECT_FALSE(Matches(g, "-0")) << b.schema;
    EXPECT_FALSE(Matches(g, "0123")) << b.schema;
  }
  auto empty = JsonSchemaToGrammar(R"({"type":"integer","minimum":5,"maximum":4})");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(CompiledGrammar::Compile(empty->grammar).ok());
}

TEST(GrammarJsonSchemaTest, NumberBoundsWithIntegerValuesAreExact) {
  struct Bounds {
    const char* schema;
    double lo, hi;
    bool lo_excl, hi_excl;
  };
  const std::vector<Bounds> cases = {
      {R"({"type":"number","minimum":0,"maximum":1})", 0, 1, false, false},
      {R"({"type":"number","exclusiveMinimum":-2,"maximum":3})", -2, 3, true, false},
      {R"({"type":"number","minimum":-90,"exclusiveMaximum":-1})", -90, -1, false, true},
      {R"({"type":"number","exclusiveMinimum":0})", 0, 1e9, true, false},
      {R"({"type":"number","maximum":0})", -1e9, 0, false, false},
      {R"({"type":"number","exclusiveMinimum":5,"exclusiveMaximum":6})", 5, 6, true, true},
  };
  for (const Bounds& b : cases) {
    auto r = JsonSchemaToGrammar(b.schema);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const CompiledGrammar g = MustCompile(std::move(r->grammar));
    for (int q = -4000; q <= 4000; ++q) {  // quarters in [-100, 100], several spellings
      const double x = q / 40.0;
      const bool want = (b.lo_excl ? x > b.lo : x >= b.lo) && (b.hi_excl ? x < b.hi : x <= b.hi);
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.3f", x);
      EXPECT_EQ(Matches(g, buf), want && std::string(buf) != "-0.000") << b.schema << " " << buf;
      if (q % 40 == 0) {
        const std::string integer = std::to_string(q / 40);
        EXPECT_EQ(Matches(g, integer), want) << b.schema << " " << integer;
      }
    }
    EXPECT_FALSE(Matches(g, "-0")) << b.schema;
    EXPECT_FALSE(Matches(g, "00.5")) << b.schema;
  }
}

TEST(GrammarJsonSchemaTest, NumberBoundsWithDecimalValuesAreExact) {
  struct Bounds {
    const char* schema;
    double lo, hi;
    bool lo_excl, hi_excl;
  };
  const std::vector<Bounds> cases = {
      {R"({"type":"number","minimum":1.1})", 1.1, 1e9, false, false},
      {R"({"exclusiveMinimum":1.1})", 1.1, 1e9, true, false},
      {R"({"type":"number","minimum":-2.5,"exclusiveMaximum":0.125})", -2.5, 0.125, false, true},
      {R"({"type":"number","exclusiveMinimum":-7.75,"maximum":-0.5})", -7.75, -0.5, true, false},
      {R"({"type":"number","minimum":0.25,"maximum":0.75})", 0.25, 0.75, false, false},
      {R"({"type":"number","exclusiveMinimum":2.025,"exclusiveMaximum":2.975})", 2.025, 2.975, true,
       true},
      {R"({"type":"number","minimum":3.5,"maximum":3.5})", 3.5, 3.5, false, false},
      {R"({"type":"number","maximum":-0.025})", -1e9, -0.025, false, false},
  };
  for (const Bounds& b : cases) {
    auto r = JsonSchemaToGrammar(b.schema);  // strict: decimal bounds are exact now
    ASSERT_TRUE(r.ok()) << b.schema << ": " << r.status().ToString();
    const CompiledGrammar g = MustCompile(std::move(r->grammar));
    for (int q = -4000; q <= 4000; ++q) {  // steps of 1/40 in [-100, 100], several spellings
      const double x = q / 40.0;
      const bool want = (b.lo_excl ? x > b.lo : x >= b.lo) && (b.hi_excl ? x < b.hi : x <= b.hi);
      for (const char* fmt : {"%.3f", "%.5f", "%g"}) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), fmt, x);
        const std::string t = buf;
        if (t.find('e') != std::string::npos || (t.rfind("-0", 0) == 0 && std::stod(t) == 0))
          continue;
        EXPECT_EQ(Matches(g, t), want) << b.schema << " " << t;
      }
    }
    EXPECT_FALSE(Matches(g, "-0")) << b.schema;
    EXPECT_FALSE(Matches(g, "1.")) << b.schema;
  }
  // Near the boundary, beyond the tested grid.
  const CompiledGrammar g =
      MustCompile(std::move(JsonSchemaToGrammar(R"({"minimum":1.1})")->grammar));
  for (const char* t : {"1.1", "1.10", "1.1000001", "1.11", "1.2", "2", "10.05", "\"x\""})
    EXPECT_TRUE(Matches(g, t)) << t;
  for (const char* t : {"1.0999999", "1.09", "1", "0.6", "-1.1", "1.0"})
    EXPECT_FALSE(Matches(g, t)) << t;
}

TEST(GrammarJsonSchemaTest, MultipleOfIsExact) {
  struct Mult {
    const char* schema;
    int scale;  // x is tested as n / scale
    int mult;   // multiple of mult / scale
    bool integer;
  };
  const std::vector<Mult> cases = {
      {R"({"type":"integer","multipleOf":3})", 1, 3, true},
      {R"({"multipleOf":2})", 1, 2, false},
      {R"({"type":"number","multipleOf":1.5})", 10, 15, false},
      {R"({"multipleOf":0.25})", 100, 25, false},
      {R"({"type":"integer","multipleOf":0.5})", 2, 1, true},
  };
  for (const Mult& m : cases) {
    auto r = JsonSchemaToGrammar(m.schema);
    ASSERT_TRUE(r.ok()) << m.schema << ": " << r.status().ToString();
    const CompiledGrammar g = MustCompile(std::move(r->grammar));
    for (int n = -1000; n <= 1000; ++n) {
      const bool is_int = n % m.scale == 0;
      const bool want = n % m.mult == 0 && (!m.integer || is_int);
      char buf[32];
      std::snprintf(buf, sizeof(buf), m.scale == 1 ? "%.0f" : "%.2f",
                    static_cast<double>(n) / m.scale);
      if (std::string(buf) == "-0.00" || std::string(buf) == "-0") continue;
      EXPECT_EQ(Matches(g, buf), want && (m.scale == 1 || !m.integer)) << m.schema << " " << buf;
      if (is_int) {
        EXPECT_EQ(Matches(g, std::to_string(n / m.scale)), want) << m.schema << " " << n;
      }
    }
  }
  // Too many states, or next to bounds: reported.
  EXPECT_FALSE(JsonSchemaToGrammar(R"({"multipleOf":0.000001234})").ok());
  EXPECT_FALSE(JsonSchemaToGrammar(R"({"type":"integer","multipleOf":5,"minimum":1})").ok());
}

TEST(GrammarJsonSchemaTest, FlexibleWhitespace) {
  JsonSchemaOptions o;
  o.flexible_whitespace = true;
  const CompiledGrammar g =
      CompileSchema(R"({"type":"object","properties":{"a":{"type":"array"}},"required":["a"]})", o);
  EXPECT_TRUE(Matches(g, " { \"a\" :\n[ 1 , {} ] } "));
  EXPECT_FALSE(Matches(g, "{\"a\":[1 2]}"));
  const CompiledGrammar compact = CompileSchema(R"({"type":"array"})");
  EXPECT_FALSE(Matches(compact, "[ ]"));
  EXPECT_TRUE(Matches(compact, "[]"));
}

// Samples documents through the byte mask and checks them with simdjson.
TEST(GrammarJsonSchemaTest, GeneratedDocumentsAreValid) {
  const CompiledGrammar g = CompileSchema(
      R"({"type":"object","properties":{"id":{"type":"integer","minimum":1},
          "tags":{"type":"array","items":{"type":"string","maxLength":3},"maxItems":3},
          "kind":{"enum":["a","b"]}},"required":["id","kind"],"additionalProperties":false})");
  const TokenVocabulary& v = testing::ByteVocab();
  std::mt19937 rng(11);
  std::vector<uint32_t> mask(v.mask_words());
  simdjson::dom::parser parser;
  int done = 0;
  for (int n = 0; n < 200; ++n) {
    GrammarMatcher m(g, v);
    std::string doc;
    for (int step = 0; step < 300 && !m.IsTerminated(); ++step) {
      m.FillNextTokenBitmask(mask.data());
      std::vector<int32_t> ids;
      for (int32_t t = 0; t < v.size(); ++t) {
        if (testing::MaskHas(mask, t)) ids.push_back(t);
      }
      ASSERT_FALSE(ids.empty());
      const int32_t id = testing::MaskHas(mask, 256) && rng() % 2 ? 256 : ids[rng() % ids.size()];
      ASSERT_TRUE(m.AcceptToken(id));
      if (id != 256) doc += static_cast<char>(id);
    }
    if (!m.IsTerminated()) continue;
    simdjson::dom::element e;
    const auto err = parser.parse(doc).get(e);
    if (err == simdjson::NUMBER_ERROR) continue;  // a huge integer: valid JSON, beyond simdjson
    ASSERT_EQ(err, simdjson::SUCCESS) << doc;
    ++done;
    int64_t id;
    std::string_view kind;
    ASSERT_EQ(e["id"].get_int64().get(id), simdjson::SUCCESS) << doc;
    EXPECT_GE(id, 1) << doc;
    ASSERT_EQ(e["kind"].get_string().get(kind), simdjson::SUCCESS) << doc;
    EXPECT_TRUE(kind == "a" || kind == "b") << doc;
    simdjson::dom::array tags;
    if (e["tags"].get_array().get(tags) == simdjson::SUCCESS) {
      EXPECT_LE(tags.size(), 3u) << doc;
    }
  }
  EXPECT_GT(done, 50);
}

}  // namespace
}  // namespace deepinfer::grammar
