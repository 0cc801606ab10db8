// The matcher's view of a tokenizer: the bytes of every token id, which ids are special (never
// allowed as text), which special ids end the sequence, and a byte trie for mask computation.
// Depends on nothing of the engine; tokenizer_vocabulary.h builds one from engine's Tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace deepinfer::grammar {

class TokenVocabulary {
 public:
  struct TrieNode {
    std::vector<std::pair<uint8_t, int32_t>> children;  // (byte, node), sorted by byte
    std::vector<int32_t> tokens;                        // ids whose bytes end exactly here
  };

  /// tokens[i]: the raw bytes of id i (may be partial UTF-8 or empty). special[i] != 0: id i is
  /// never allowed as text (padding ids included); eos_ids: special ids allowed exactly when the
  /// grammar can terminate. `special` may be shorter than `tokens` (missing entries are 0).
  TokenVocabulary(std::vector<std::string> tokens, std::vector<uint8_t> special,
                  std::vector<int32_t> eos_ids);

  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  /// 32-bit words in a packed mask: ceil(size / 32).
  int32_t mask_words() const { return (size() + 31) / 32; }
  const std::string& token(int32_t id) const { return tokens_[id]; }
  bool is_special(int32_t id) const { return special_[id] != 0; }
  bool is_eos(int32_t id) const;
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  const std::vector<TrieNode>& trie() const { return trie_; }  // node 0 is the root

 private:
  std::vector<std::string> tokens_;
  std::vector<uint8_t> special_;
  std::vector<int32_t> eos_ids_;
  std::vector<TrieNode> trie_;
};

}  // namespace deepinfer::grammar
