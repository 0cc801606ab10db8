// GrammarMatcher: an Earley parser over bytes that follows one sequence's output token by token
// and computes the next-token bitmask by walking the vocabulary's byte trie with the parser.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/mask_cache.h"
#include "grammar/vocabulary.h"

namespace deepinfer::grammar {

class GrammarMatcher {
 public:
  /// Both arguments must outlive the matcher. Copying a matcher forks the sequence.
  GrammarMatcher(const CompiledGrammar& grammar, const TokenVocabulary& vocab);

  /// Accepts token `id` if the grammar allows it (an EOS id: only when it can terminate, after
  /// which the matcher is terminated). On false nothing changes.
  bool AcceptToken(int32_t id);
  /// Accepts raw bytes as one history entry (for Rollback). On false nothing changes.
  bool AcceptBytes(std::string_view bytes);
  /// Undoes the last n accepted tokens / AcceptBytes calls (n larger than the history: all).
  void Rollback(int n);
  /// The bytes so far form a complete string of the grammar.
  bool CanTerminate() const;
  /// An EOS token was accepted.
  bool IsTerminated() const { return terminated_; }
  /// Writes vocab.mask_words() words: bit i of word i/32 set iff token i is allowed now.
  void FillNextTokenBitmask(uint32_t* words);
  /// The longest byte string every continuation starts with (empty when EOS is possible).
  std::string JumpForward();
  /// The same continuation as tokens of this vocabulary: longest match first over the token
  /// trie, as far as whole tokens cover it (a BPE tokenizer may split it differently; the
  /// engine uses its tokenizer's canonical encoding when it has one). Consumes nothing.
  std::vector<int32_t> JumpForwardTokens();
  /// A step was refused because one Earley set outgrew the limits (a pathologically ambiguous
  /// grammar); from then on masks may be incomplete. Sticky.
  bool ResourceExhausted() const { return exhausted_; }
  /// Number of entries Rollback can undo.
  int history_size() const { return static_cast<int>(history_.size()); }
  /// Masks use the grammar's MaskCache (default) or walk the whole trie every time (for tests
  /// and measurements; both give the same masks).
  void set_mask_cache_enabled(bool on) { cache_enabled_ = on; }

 private:
  struct Item {
    int32_t pos;     // position in the compiled grammar (dot)
    int32_t origin;  // Earley set where the production started
    int32_t state;   // DFA state at a kDfa position, else 0
  };
  static uint64_t Key(const Item& it) {  // bit layout: see kMaxBytes in matcher.cc
    return (uint64_t{static_cast<uint32_t>(it.pos)} << 40) |
           (uint64_t{static_cast<uint32_t>(it.state)} << 28) | static_cast<uint32_t>(it.origin);
  }
  Item Advance(const Item& it) const { return {it.pos + 1, it.origin, g_->StartState(it.pos + 1)}; }
  bool PushByte(uint8_t b);
  void PopSet();
  void BeginSet();
  void Add(Item it);
  void Closure();
  ByteSet AllowedBytes() const;
  void Walk(int32_t node, uint32_t* words);
  // Mask cache (matcher_mask.cc).
  void TopKey(std::vector<uint64_t>* key) const;
  std::shared_ptr<const MaskCache::Entry> BuildEntry();
  void BuildWalk(int32_t node, MaskCache::Entry* e);
  void ApplySkeleton(const MaskCache::Entry& e, size_t begin, size_t end, uint32_t* words);

  const CompiledGrammar* g_;
  const TokenVocabulary* vocab_;
  std::vector<Item> items_;
  std::vector<uint32_t> set_begin_;  // set k is items_[set_begin_[k], set_begin_[k+1] or end)
  std::vector<int32_t> history_;     // bytes per accepted entry; -1 for an EOS token
  bool terminated_ = false;
  bool exhausted_ = false;
  uint64_t exhaust_events_ = 0;  // steps refused by a limit, ever (a walk compares before/after)
  bool over_ = false;            // the set being built exceeded a limit
  size_t work_ = 0;              // completion scan work for the set being built
  // Per-set deduplication scratch: an open-addressing table stamped with a generation.
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> stamps_;
  std::vector<uint32_t> predicted_;  // per rule: generation in which it was predicted
  uint32_t gen_ = 0;
  size_t set_size_ = 0;
  // Mask cache state: sets whose closure completed an item that began after the initial set and
  // before walk_base_ are tainted (they depend on more than the cache key).
  MaskCache* cache_ = nullptr;
  bool cache_enabled_ = true;
  int32_t walk_base_ = 0;
  bool tainted_ = false;
  std::vector<uint64_t> key_;
};

}  // namespace deepinfer::grammar
