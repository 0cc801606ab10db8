// The DeepSeek tokenizer: byte-level BPE loaded from a Hugging Face tokenizer.json, with added
// (special) tokens, exact against the reference implementation (transformers.js), and decoding.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/common/status.h"
#include "engine/tokenizer/chat.h"

namespace deepinfer {

class BpeMerger;
class PreTokenizer;

/// How special-token strings inside the text are treated.
enum class SpecialTokens {
  kRecognize,  // the reference's encode(text, add_special_tokens=False): they become their ids
  kPlainText,  // safe mode for untrusted content: they are ordinary text
};

class Tokenizer {
 public:
  /// Loads DIR/tokenizer.json.
  static Result<std::unique_ptr<Tokenizer>> LoadDir(const std::string& dir);
  static Result<std::unique_ptr<Tokenizer>> LoadFile(const std::string& path);
  /// The default tokenizer installed by scripts/setup, if present.
  static std::string DefaultDir(const std::string& repo_root);
  ~Tokenizer();

  /// Token ids of `text`. Invalid UTF-8 is first decoded like TextDecoder does (each maximal
  /// invalid subpart becomes U+FFFD), so any byte string has defined ids.
  std::vector<int32_t> Encode(std::string_view text, SpecialTokens mode) const;
  /// A rendered chat prompt: its special spans become special ids (each must name an added token
  /// of this tokenizer), everything else is encoded as plain text.
  Result<std::vector<int32_t>> EncodePrompt(const RenderedPrompt& prompt) const;

  /// The text of `ids` (added tokens as their content; invalid UTF-8 replaced as TextDecoder does).
  Result<std::string> Decode(std::span<const int32_t> ids, bool skip_special = false) const;
  /// The raw bytes token `id` stands for (an added token's content; may be partial UTF-8).
  std::string_view TokenBytes(int32_t id) const { return id_bytes_[id]; }
  bool IsAdded(int32_t id) const { return id >= 0 && id < vocab_size() && added_[id] != 0; }
  bool IsSpecial(int32_t id) const { return id >= 0 && id < vocab_size() && added_[id] == 2; }
  /// The id of an added token by its content.
  std::optional<int32_t> AddedTokenId(std::string_view content) const;
  /// Checks that every string is an added token; the error names the first missing one.
  Status RequireAddedTokens(const std::vector<std::string>& contents) const;
  /// One past the largest id (vocabulary and added tokens).
  int32_t vocab_size() const { return static_cast<int32_t>(id_bytes_.size()); }

 private:
  Tokenizer();
  Status Parse(const std::string& json, const std::string& origin);
  void EncodeText(std::string_view text, std::vector<int32_t>* out) const;
  void EncodeRecognizing(std::string_view text, std::vector<int32_t>* out) const;
  // Longest added token starting at `pos`, or -1; *len receives its length.
  int32_t MatchAdded(std::string_view text, size_t pos, size_t* len) const;

  struct TrieNode {
    std::vector<std::pair<unsigned char, int32_t>> children;
    int32_t token = -1;
  };
  std::vector<std::string> id_bytes_;
  std::vector<uint8_t> added_;  // 0 vocabulary, 1 added, 2 added and special
  std::unordered_map<std::string, int32_t> added_by_content_;
  std::vector<TrieNode> trie_;
  bool starts_added_[256] = {};  // bytes that begin some added token
  std::unique_ptr<PreTokenizer> pre_;
  std::unique_ptr<BpeMerger> bpe_;
};

/// Incremental detokenizer: emits only complete UTF-8, holding back bytes of a character split
/// across tokens, so the pieces concatenate to Decode() of all ids.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false)
      : tok_(tok), skip_special_(skip_special) {}
  /// Appends the text that token `id` completes to `out`.
  Status Push(int32_t id, std::string* out);
  /// Appends whatever is held back (an unfinished character becomes U+FFFD).
  void Finish(std::string* out);

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace deepinfer
