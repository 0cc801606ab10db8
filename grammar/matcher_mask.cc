// Token masks: a walk of the vocabulary trie with the parser, and the cached form of that walk
// (see mask_cache.h for why a cached walk gives the same mask as a full one).
#include <algorithm>
#include <cstring>
#include <span>

#include "grammar/matcher.h"

namespace deepinfer::grammar {

namespace {
inline void SetTokens(std::span<const int32_t> ids, uint32_t* words) {
  for (int32_t id : ids) words[id >> 5] |= uint32_t{1} << (id & 31);
}
}  // namespace

void GrammarMatcher::Walk(int32_t node, uint32_t* words) {
  const auto& trie = vocab_->trie();
  SetTokens(vocab_->node_tokens(node), words);
  const uint32_t end = trie[node].next;
  if (static_cast<uint32_t>(node) + 1 == end) return;
  const ByteSet allowed = AllowedBytes();
  for (uint32_t child = node + 1; child < end; child = trie[child].next) {
    const uint8_t byte = trie[child].byte;
    if (!allowed.Has(byte) || !PushByte(byte)) continue;  // prune the dead subtree
    Walk(static_cast<int32_t>(child), words);
    PopSet();
  }
}

void GrammarMatcher::TopKey(std::vector<uint64_t>* key) const {
  // Origins reduced to: 0 = the top set, 1 = the initial set, 2 = any set in between.
  const int32_t k = static_cast<int32_t>(set_begin_.size()) - 1;
  key->clear();
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    const Item& it = items_[i];
    const uint64_t label = it.origin == k ? 0 : it.origin == 0 ? 1 : 2;
    key->push_back((uint64_t{static_cast<uint32_t>(it.pos)} << 16) |
                   (uint64_t{static_cast<uint32_t>(it.state)} << 2) | label);
  }
  std::sort(key->begin(), key->end());
  key->erase(std::unique(key->begin(), key->end()), key->end());
}

void GrammarMatcher::BuildWalk(int32_t node, MaskCache::Entry* e) {
  const auto& trie = vocab_->trie();
  SetTokens(vocab_->node_tokens(node), e->words.data());
  const uint32_t end = trie[node].next;
  if (static_cast<uint32_t>(node) + 1 == end) return;
  const ByteSet allowed = AllowedBytes();
  for (uint32_t c = node + 1; c < end; c = trie[c].next) {
    const uint8_t byte = trie[c].byte;
    const int32_t child = static_cast<int32_t>(c);
    if (!allowed.Has(byte) || !PushByte(byte)) continue;
    const size_t at = e->skeleton.size();
    if (tainted_) {
      // The byte was scanned from an untainted set, so every context with this key reaches the
      // child; only what lies below it depends on the context.
      SetTokens(vocab_->node_tokens(c), e->words.data());
      if (c + 1 != trie[c].next) {
        e->skeleton.push_back({child, static_cast<uint32_t>(at + 1), byte, true});
      }
    } else {
      e->skeleton.push_back({child, 0, byte, false});
      BuildWalk(child, e);
      if (e->skeleton.size() == at + 1) {
        e->skeleton.pop_back();  // no frontier below: the cached tokens say it all
      } else {
        e->skeleton[at].end = static_cast<uint32_t>(e->skeleton.size());
      }
    }
    PopSet();
  }
}

std::shared_ptr<const MaskCache::Entry> GrammarMatcher::BuildEntry() {
  auto e = std::make_shared<MaskCache::Entry>();
  e->key = key_;
  e->words.assign(vocab_->mask_words(), 0);
  const uint64_t exhaust_before = exhaust_events_;
  walk_base_ = static_cast<int32_t>(set_begin_.size()) - 1;
  BuildWalk(0, e.get());
  walk_base_ = 0;
  // A walk cut short by a resource limit is not the state's mask; do not keep it.
  if (exhaust_events_ != exhaust_before) return nullptr;
  e->skeleton.shrink_to_fit();
  return e;
}

void GrammarMatcher::ApplySkeleton(const MaskCache::Entry& e, size_t begin, size_t end,
                                   uint32_t* words) {
  for (size_t i = begin; i < end; i = e.skeleton[i].end) {
    const MaskCache::Step& s = e.skeleton[i];
    if (!PushByte(s.byte)) continue;  // only a resource limit refuses a skeleton byte
    if (s.frontier) {
      Walk(s.trie_node, words);
    } else {
      ApplySkeleton(e, i + 1, s.end, words);
    }
    PopSet();
  }
}

void GrammarMatcher::FillNextTokenBitmask(uint32_t* words) {
  std::memset(words, 0, sizeof(uint32_t) * vocab_->mask_words());
  if (terminated_) return;
  std::shared_ptr<const MaskCache::Entry> entry;
  if (cache_ != nullptr && cache_enabled_) {
    TopKey(&key_);
    const uint64_t hash = MaskCache::HashKey(key_);
    entry = cache_->Find(hash, key_);
    if (entry == nullptr) {
      entry = BuildEntry();
      if (entry != nullptr) cache_->Insert(hash, entry);
    }
  }
  if (entry != nullptr) {
    std::memcpy(words, entry->words.data(), sizeof(uint32_t) * entry->words.size());
    ApplySkeleton(*entry, 0, entry->skeleton.size(), words);
  } else {
    Walk(0, words);
  }
  if (CanTerminate()) {
    for (int32_t id : vocab_->eos_ids()) words[id >> 5] |= uint32_t{1} << (id & 31);
  }
}

}  // namespace deepinfer::grammar
