// deepinfer-grammar: checks structured-output constraints (JSON Schema, regex, GBNF) against
// texts tokenized with the real tokenizer, token by token through the mask, as the engine would.
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "grammar/ebnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "grammar/tokenizer_vocabulary.h"

namespace deepinfer::grammar {
namespace {

constexpr const char* kUsage = R"(usage: deepinfer-grammar check|bench --tokenizer DIR --cases FILE
           [--strict] [--compact]

FILE is a JSON array of {"name", "kind": "json_schema"|"regex"|"ebnf", "constraint": schema
object or string, "accept": [texts], "reject": [texts]}. Each text is encoded with the
tokenizer's canonical encoding and fed token by token: every token must be allowed by the mask
and accepted, and the matcher must be able to terminate. Prints "PASS|FAIL name index" per text
(indexes count the accept texts first, then the reject texts), "ERROR name: reason" for a
constraint that does not compile, and "N passed, M failed" last;
exits 1 on any failure, 2 on bad usage or input. JSON Schemas compile in lenient mode unless
--strict (unenforced keywords are printed to stderr) and allow JSON whitespace between tokens
(whitespace never makes a JSON document invalid) unless --compact, the engine's default policy.
A json_schema constraint "json_object" means any JSON value. bench walks every accept text
token by token timing each mask and each compile; its last line is {"steps","mask_us_p50",
"mask_us_p99","mask_us_max","compile_ms_p50","compile_ms_max"}.
)";

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

Result<CompiledGrammar> Build(std::string_view kind, simdjson::dom::element c, bool strict,
                              bool flexible) {
  std::string_view text;
  const bool is_string = c.get_string().get(text) == simdjson::SUCCESS;
  Result<Grammar> g = InvalidArgument("unknown kind '" + std::string(kind) + "'");
  if (kind == "json_schema") {
    const std::string schema = is_string ? std::string(text) : simdjson::minify(c);
    if (is_string && text == "json_object") {
      g = AnyJsonGrammar(flexible);
    } else {
      JsonSchemaOptions o;
      o.strict = strict;
      o.flexible_whitespace = flexible;
      Result<JsonSchemaGrammar> r = JsonSchemaToGrammar(schema, o);
      if (!r.ok()) return r.status();
      for (const std::string& w : r->warnings) std::cerr << "warning: " << w << "\n";
      g = std::move(r->grammar);
    }
  } else if (kind == "regex" || kind == "ebnf") {
    if (!is_string)
      return InvalidArgument("the constraint of a " + std::string(kind) + " case must be a string");
    g = kind == "regex" ? RegexToGrammar(text) : EbnfToGrammar(text);
  }
  if (!g.ok()) return g.status();
  return CompiledGrammar::Compile(*g);
}

// Feeds `ids` through the mask; true when every token was allowed and accepted and the matcher
// can then terminate.
bool Feed(const CompiledGrammar& g, const TokenVocabulary& v, const std::vector<int32_t>& ids) {
  GrammarMatcher m(g, v);
  std::vector<uint32_t> mask(v.mask_words());
  for (int32_t id : ids) {
    m.FillNextTokenBitmask(mask.data());
    if (((mask[id >> 5] >> (id & 31)) & 1) == 0) return false;
    if (!m.AcceptToken(id)) return false;
  }
  return m.CanTerminate();
}

int Check(int argc, char** argv, bool bench) {
  std::string tok_dir, cases_path;
  bool strict = false, flexible = true;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tokenizer" && i + 1 < argc) {
      tok_dir = argv[++i];
    } else if (a == "--cases" && i + 1 < argc) {
      cases_path = argv[++i];
    } else if (a == "--strict") {
      strict = true;
    } else if (a == "--compact") {
      flexible = false;
    } else {
      std::cerr << "unknown or incomplete option '" << a << "'\n" << kUsage;
      return 2;
    }
  }
  if (tok_dir.empty() || cases_path.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  auto tok = Tokenizer::LoadDir(tok_dir);
  if (!tok.ok()) {
    std::cerr << tok.status().ToString() << "\n";
    return 2;
  }
  const TokenVocabulary vocab = VocabularyFromTokenizer(**tok);
  simdjson::dom::parser parser;
  simdjson::padded_string json;
  simdjson::dom::array cases;
  if (simdjson::padded_string::load(cases_path).get(json) != simdjson::SUCCESS ||
      parser.parse(json).get_array().get(cases) != simdjson::SUCCESS) {
    std::cerr << cases_path << ": not readable as a JSON array\n";
    return 2;
  }
  int passed = 0, failed = 0;
  std::vector<double> mask_us, compile_ms, hit_us, miss_us;
  for (simdjson::dom::element c : cases) {
    std::string_view name, kind;
    simdjson::dom::element constraint;
    if (c["name"].get_string().get(name) != simdjson::SUCCESS ||
        c["kind"].get_string().get(kind) != simdjson::SUCCESS ||
        c["constraint"].get(constraint) != simdjson::SUCCESS) {
      std::cerr << "a case needs name, kind and constraint\n";
      return 2;
    }
    const auto t0 = std::chrono::steady_clock::now();
    Result<CompiledGrammar> g = Build(kind, constraint, strict, flexible);
    compile_ms.push_back(Since(t0) / 1000);
    // A constraint that does not compile (in strict mode: one with keywords that cannot be
    // enforced) is reported on its own line; its accept texts then fail, its reject texts pass.
    if (!g.ok()) std::cout << "ERROR " << name << ": " << g.status().ToString() << "\n";
    if (bench) {
      simdjson::dom::array texts;
      if (!g.ok() || c["accept"].get_array().get(texts) != simdjson::SUCCESS) continue;
      std::vector<uint32_t> mask(vocab.mask_words());
      for (simdjson::dom::element t : texts) {
        std::string_view text;
        if (t.get_string().get(text) != simdjson::SUCCESS) continue;
        GrammarMatcher m(*g, vocab);
        for (int32_t id : (*tok)->Encode(text, SpecialTokens::kPlainText)) {
          const uint64_t misses = g->mask_cache()->stats().misses;
          const auto t1 = std::chrono::steady_clock::now();
          m.FillNextTokenBitmask(mask.data());
          mask_us.push_back(Since(t1));
          (g->mask_cache()->stats().misses == misses ? hit_us : miss_us).push_back(mask_us.back());
          if (!m.AcceptToken(id)) break;
        }
      }
      continue;
    }
    int index = 0;
    for (const char* list : {"accept", "reject"}) {
      const bool want = std::string_view(list) == "accept";
      simdjson::dom::array texts;
      if (c[list].get_array().get(texts) != simdjson::SUCCESS) continue;
      for (simdjson::dom::element t : texts) {
        std::string_view text;
        bool ok = false;
        if (t.get_string().get(text) == simdjson::SUCCESS) {
          const bool accepted =
              g.ok() && Feed(*g, vocab, (*tok)->Encode(text, SpecialTokens::kPlainText));
          ok = accepted == want;
        }
        std::cout << (ok ? "PASS " : "FAIL ") << name << " " << index++ << "\n";
        (ok ? passed : failed)++;
      }
    }
  }
  if (bench) {
    // Masks served from the grammar's mask cache vs. computed by a trie walk (first time a state
    // is seen), on a line of its own before the summary.
    std::printf("mask cache: %zu hits (p50 %.1f us, max %.1f us), %zu misses (p50 %.1f us)\n",
                hit_us.size(), Percentile(hit_us, 0.5), Percentile(hit_us, 1.0), miss_us.size(),
                Percentile(miss_us, 0.5));
    std::printf(
        "{\"steps\":%zu,\"mask_us_p50\":%.1f,\"mask_us_p99\":%.1f,\"mask_us_max\":%.1f,"
        "\"compile_ms_p50\":%.3f,\"compile_ms_max\":%.3f}\n",
        mask_us.size(), Percentile(mask_us, 0.5), Percentile(mask_us, 0.99),
        Percentile(mask_us, 1.0), Percentile(compile_ms, 0.5), Percentile(compile_ms, 1.0));
    return 0;
  }
  std::cout << passed << " passed, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace deepinfer::grammar

int main(int argc, char** argv) {
  const std::string cmd = argc >= 2 ? argv[1] : "";
  if (cmd == "check" || cmd == "bench")
    return deepinfer::grammar::Check(argc, argv, cmd == "bench");
  std::cerr << deepinfer::grammar::kUsage;
  return 2;
}
