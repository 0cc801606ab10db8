#include "engine/tokenizer/pretokenizer.h"

#include <cstdio>

#include "engine/tokenizer/deepseek_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace deepinfer {
namespace {

struct JsCategory {
  const char* name;
  const uint32_t (*ranges)[2];
  size_t n;
};
#include "engine/tokenizer/js_unicode_tables.inc"

constexpr std::string_view kJsSpace =
    R"(\t\n\x0B\f\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF})";

std::string Utf8(uint32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 63));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 63));
    s += static_cast<char>(0x80 | (c & 63));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 63));
    s += static_cast<char>(0x80 | ((c >> 6) & 63));
    s += static_cast<char>(0x80 | (c & 63));
  }
  return s;
}

}  // namespace

Result<std::string> JsPropertyAdditions(std::string_view category) {
  const JsCategory* cat = nullptr;
  for (const auto& c : kJsCategories) {
    if (category == c.name) cat = &c;
  }
  if (cat == nullptr) {
    return InvalidArgument("unsupported Unicode property \\p{" + std::string(category) + "}");
  }
  const std::string pattern = "\\p{" + std::string(category) + "}";
  int err = 0;
  PCRE2_SIZE offset = 0;
  std::unique_ptr<pcre2_code, void (*)(pcre2_code*)> code(
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_ANCHORED, &err, &offset, nullptr),
      pcre2_code_free);
  if (!code) return Internal("PCRE2 lacks " + pattern);
  (void)pcre2_jit_compile(code.get(), PCRE2_JIT_COMPLETE);
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(
      pcre2_match_data_create_from_pattern(code.get(), nullptr), pcre2_match_data_free);
  std::string out;
  int64_t run_start = -1, run_end = -1;
  auto flush = [&] {
    if (run_start < 0) return;
    char buf[48];
    std::snprintf(buf, sizeof(buf), "\\x{%llX}-\\x{%llX}", static_cast<long long>(run_start),
                  static_cast<long long>(run_end));
    out += buf;
    run_start = -1;
  };
  for (size_t i = 0; i < cat->n; ++i) {
    for (uint32_t c = cat->ranges[i][0]; c <= cat->ranges[i][1]; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      const std::string s = Utf8(c);
      if (pcre2_match(code.get(), reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0,
                      match.get(), nullptr) >= 0) {
        continue;
      }
      if (run_start >= 0 && c == run_end + 1) {
        run_end = c;
      } else {
        flush();
        run_start = run_end = c;
      }
    }
  }
  flush();
  return out;
}

Result<std::string> ToPcre2Pattern(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      if (n == 's' || n == 'S') {
        if (in_class && n == 'S') {
          return InvalidArgument("\\S inside a character class is unsupported");
        }
        if (!in_class) out += n == 's' ? "[" : "[^";
        out.append(kJsSpace);
        if (!in_class) out += ']';
      } else if ((n == 'p' || n == 'P') && i + 2 < p.size() && p[i + 2] == '{') {
        const size_t close = p.find('}', i + 3);
        if (close == std::string_view::npos) return InvalidArgument("unterminated \\p{");
        const std::string_view name = p.substr(i + 3, close - i - 3);
        // PCRE2's Unicode tables are older than the reference's: add what it does not know.
        DI_ASSIGN_OR_RETURN(std::string extra, JsPropertyAdditions(name));
        const std::string prop = "\\p{" + std::string(name) + "}";
        if (in_class) {
          if (n == 'P') return InvalidArgument("\\P{...} inside a character class is unsupported");
          out += prop + extra;
        } else {
          out += (n == 'p' ? "[" : "[^") + prop + extra + "]";
        }
        i = close;
        continue;
      } else {
        out += c;
        out += n;
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
    } else if (c == ']' && in_class) {
      in_class = false;
    }
    out += c;
  }
  return out;
}

struct PreTokenizer::Pass {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Pass() { pcre2_code_free(code); }
};

namespace {
// pcre2_jit_match skips the interpreter's option checks: most calls match one short piece.
int Match(const PreTokenizer::Pass* pass, PCRE2_SPTR subject, uint32_t len, uint32_t pos,
          pcre2_match_data* match) {
  if (pass->jit) return pcre2_jit_match(pass->code, subject, len, pos, 0, match, nullptr);
  return pcre2_match(pass->code, subject, len, pos, PCRE2_NO_UTF_CHECK, match, nullptr);
}
}  // namespace

PreTokenizer::~PreTokenizer() = default;

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(
    const std::vector<std::string>& patterns) {
  std::unique_ptr<PreTokenizer> p(new PreTokenizer());
  for (const std::string& js : patterns) {
    DI_ASSIGN_OR_RETURN(const std::string pattern, ToPcre2Pattern(js));
    int err = 0;
    PCRE2_SIZE offset = 0;
    auto pass = std::make_unique<Pass>();
    pass->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                               PCRE2_UTF | PCRE2_NO_UTF_CHECK, &err, &offset, nullptr);
    if (pass->code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return InvalidArgument("pre-tokenizer regex does not compile at offset " +
                             std::to_string(offset) + ": " + reinterpret_cast<char*>(msg) + " in " +
                             js);
    }
    // JIT is an optimisation: when unavailable the interpreter gives the same matches.
    pass->jit = pcre2_jit_compile(pass->code, PCRE2_JIT_COMPLETE) == 0;
    p->passes_.push_back(std::move(pass));
  }
  p->deepseek_ = IsDeepSeekPattern(patterns);
  return p;
}

void PreTokenizer::Split(std::string_view text, std::vector<Span>* out) const {
  if (deepseek_) return DeepSeekSplit(text, out);
  SplitRegex(text, out);
}

void PreTokenizer::SplitRegex(std::string_view text, std::vector<Span>* out) const {
  std::vector<Span> cur = {{0, static_cast<uint32_t>(text.size())}}, next;
  if (text.empty()) return;
  for (const auto& pass : passes_) {
    next.clear();
    // Match data per call keeps Split safe to call from several threads at once.
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(
        pcre2_match_data_create_from_pattern(pass->code, nullptr), pcre2_match_data_free);
    for (const Span& piece : cur) {
      // Each piece is its own subject, as in the reference: lookarounds stop at its edges.
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + piece.begin);
      const uint32_t len = piece.end - piece.begin;
      uint32_t pos = 0, last = 0;
      while (pos < len) {
        const int rc = Match(pass.get(), subject, len, pos, match.get());
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match.get());
        const uint32_t b = static_cast<uint32_t>(ov[0]), e = static_cast<uint32_t>(ov[1]);
        if (e == b) {  // empty match: step over one character
          pos = e + 1;
          while (pos < len && (subject[pos] & 0xC0) == 0x80) ++pos;
          continue;
        }
        if (b > last) next.push_back({piece.begin + last, piece.begin + b});
        next.push_back({piece.begin + b, piece.begin + e});
        last = pos = e;
      }
      if (last < len) next.push_back({piece.begin + last, piece.end});
    }
    cur.swap(next);
  }
  out->insert(out->end(), cur.begin(), cur.end());
}

}  // namespace deepinfer
