// The matcher's view of a tokenizer: the bytes of every token id, which ids are special (never
// allowed as text), which special ids end the sequence, and a byte trie for mask computation.
// Depends on nothing of the engine; tokenizer_vocabulary.h builds one from engine's Tokenizer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace deepinfer::grammar {

class TokenVocabulary {
 public:
  /// The byte trie of the non-special tokens, flattened in preorder so that a walk reads memory
  /// front to back: node n's children are n + 1, then each child's `next`, up to n's `next`.
  struct TrieNode {
    uint32_t next;          // the node after n's subtree
    uint32_t tokens_begin;  // n's ids are trie_tokens()[tokens_begin, node n+1's tokens_begin)
    uint8_t byte;           // the byte on the edge from the parent (0 for the root)
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
  /// Node 0 is the root; a last sentinel node closes the token ranges.
  const std::vector<TrieNode>& trie() const { return trie_; }
  /// Ids whose bytes end exactly at `node` (sorted).
  std::span<const int32_t> node_tokens(uint32_t node) const {
    return {trie_tokens_.data() + trie_[node].tokens_begin,
            trie_tokens_.data() + trie_[node + 1].tokens_begin};
  }

 private:
  std::vector<std::string> tokens_;
  std::vector<uint8_t> special_;
  std::vector<int32_t> eos_ids_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> trie_tokens_;
};

}  // namespace deepinfer::grammar
