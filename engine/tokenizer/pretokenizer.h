// The pre-tokenizer of a Hugging Face tokenizer.json: a sequence of Split(regex, Isolated)
// passes run with PCRE2 (JIT, UTF, Unicode properties), each splitting every piece the previous
// pass produced into its matches and the text between them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/status.h"

namespace deepinfer {

/// A piece of the input: [begin, end) byte offsets.
struct Span {
  uint32_t begin, end;
};

class PreTokenizer {
 public:
  /// `patterns` are the Split regexes in the tokenizer.json dialect (Oniguruma/JavaScript), in
  /// order.
  static Result<std::unique_ptr<PreTokenizer>> Create(const std::vector<std::string>& patterns);
  ~PreTokenizer();

  /// Splits valid UTF-8 `text` into pieces, appended to `out` in order. DeepSeek's own
  /// patterns take a hand-written path that gives the same pieces as SplitRegex, faster.
  void Split(std::string_view text, std::vector<Span>* out) const;
  /// The same split through PCRE2 alone (the path every other tokenizer.json takes).
  void SplitRegex(std::string_view text, std::vector<Span>* out) const;

  struct Pass;

 private:
  PreTokenizer() = default;
  std::vector<std::unique_ptr<Pass>> passes_;
  bool deepseek_ = false;
};

/// Rewrites a JavaScript (u-flag) regex for PCRE2 so both match the same strings: \s and \S
/// become JavaScript's whitespace set (it has U+FEFF and lacks U+0085), and each \p{X} also
/// accepts the code points the reference's newer Unicode assigns to X that PCRE2 does not know.
/// \d, \w and \b stay ASCII (PCRE2 runs without UCP, like JavaScript). Exposed for tests.
Result<std::string> ToPcre2Pattern(std::string_view js_pattern);
/// The code points Node's Unicode puts in general category `category` and PCRE2 does not, as a
/// character-class body ("\x{..}-\x{..}..."). Exposed for tests.
Result<std::string> JsPropertyAdditions(std::string_view category);

}  // namespace deepinfer
