#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

#include "grammar/lexical_dfa.h"

namespace deepinfer::grammar {

namespace {
constexpr size_t kMaxJumpForward = 4096;
// Limits for one Earley set: items, and items scanned by completions.
constexpr size_t kMaxSetItems = 1 << 15;
constexpr size_t kMaxSetWork = 1 << 22;

// Item identity packed for the per-set deduplication table: position (< 2^24 by the compiler's
// limit), DFA state (< 2^12 by DfaLimits) and origin (< 2^28 by kMaxBytes).
constexpr size_t kMaxBytes = size_t{1} << 28;
static_assert(DfaLimits{}.max_dfa_states < (1 << 12));

inline uint64_t Mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}
}  // namespace

GrammarMatcher::GrammarMatcher(const CompiledGrammar& grammar, const TokenVocabulary& vocab)
    : g_(&grammar), vocab_(&vocab), keys_(64), stamps_(64, 0), predicted_(grammar.num_rules(), 0) {
  if (g_->mask_cache() != nullptr && g_->mask_cache()->Bind(vocab_)) cache_ = g_->mask_cache();
  set_begin_.push_back(0);
  BeginSet();
  for (int32_t p : g_->productions(g_->start())) Add({p, 0, g_->StartState(p)});
  predicted_[g_->start()] = gen_;
  Closure();
  if (over_) {  // nothing can be matched
    items_.clear();
    exhausted_ = true;
    ++exhaust_events_;
  }
}

void GrammarMatcher::BeginSet() {
  if (++gen_ == 0) {  // wrapped: forget every stamp
    std::fill(stamps_.begin(), stamps_.end(), 0);
    std::fill(predicted_.begin(), predicted_.end(), 0);
    gen_ = 1;
  }
  set_size_ = 0;
  tainted_ = false;
  over_ = false;
  work_ = 0;
}

void GrammarMatcher::Add(Item it) {
  if (set_size_ >= kMaxSetItems) {
    over_ = true;
    return;
  }
  if ((set_size_ + 1) * 2 > keys_.size()) {
    keys_.assign(keys_.size() * 2, 0);
    stamps_.assign(keys_.size(), 0);
    const uint32_t gen = gen_;
    // Re-stamp this set's items into the larger table.
    const size_t mask = keys_.size() - 1;
    for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
      const uint64_t key = Key(items_[i]);
      size_t h = Mix(key) & mask;
      while (stamps_[h] == gen) h = (h + 1) & mask;
      stamps_[h] = gen;
      keys_[h] = key;
    }
  }
  const uint64_t key = Key(it);
  const size_t mask = keys_.size() - 1;
  size_t h = Mix(key) & mask;
  while (stamps_[h] == gen_) {
    if (keys_[h] == key) return;
    h = (h + 1) & mask;
  }
  stamps_[h] = gen_;
  keys_[h] = key;
  ++set_size_;
  items_.push_back(it);
}

void GrammarMatcher::Closure() {
  const int32_t k = static_cast<int32_t>(set_begin_.size()) - 1;
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    const Item it = items_[i];
    const CompiledGrammar::Pos& p = g_->pos(it.pos);
    if (p.kind == CompiledGrammar::kRule) {
      const int32_t a = p.value;
      if (predicted_[a] != gen_) {
        predicted_[a] = gen_;
        for (int32_t prod : g_->productions(a)) Add({prod, k, g_->StartState(prod)});
      }
      // Aycock-Horspool: a nullable rule may be skipped right away.
      if (g_->nullable(a)) Add(Advance(it));
    } else if (p.kind == CompiledGrammar::kDfa) {
      if (g_->dfa(p.value).accepting[it.state]) Add(Advance(it));
    } else if (p.kind == CompiledGrammar::kEnd) {
      // An empty completion (origin == k) is covered by the nullable skip above.
      if (it.origin == k) continue;
      if (it.origin > 0 && it.origin < walk_base_) tainted_ = true;
      const int32_t a = p.value;
      const size_t end = set_begin_[it.origin + 1];
      work_ += end - set_begin_[it.origin];
      if (work_ > kMaxSetWork || over_) {
        over_ = true;
        return;
      }
      for (size_t j = set_begin_[it.origin]; j < end; ++j) {
        const CompiledGrammar::Pos& q = g_->pos(items_[j].pos);
        if (q.kind == CompiledGrammar::kRule && q.value == a) Add(Advance(items_[j]));
      }
    }
  }
}

bool GrammarMatcher::PushByte(uint8_t b) {
  if (set_begin_.size() >= kMaxBytes) {
    exhausted_ = true;
    ++exhaust_events_;
    return false;
  }
  const size_t top_begin = set_begin_.back();
  const size_t top_end = items_.size();
  if (top_end == top_begin + 1 && g_->pos(items_[top_begin].pos).kind == CompiledGrammar::kDfa) {
    // Inside a DFA and nothing else (a string, a number, a regex): the next set is the same item
    // in the next state, with nothing to close over unless that state accepts.
    const Item it = items_[top_begin];
    const ByteDfa& dfa = g_->dfa(g_->pos(it.pos).value);
    const int32_t next = dfa.Next(it.state, b);
    if (next < 0) return false;
    if (!dfa.accepting[next]) {
      set_begin_.push_back(static_cast<uint32_t>(top_end));
      items_.push_back({it.pos, it.origin, next});
      tainted_ = false;
      return true;
    }
  }
  set_begin_.push_back(static_cast<uint32_t>(top_end));
  BeginSet();
  for (size_t i = top_begin; i < top_end; ++i) {
    const Item it = items_[i];
    const CompiledGrammar::Pos& p = g_->pos(it.pos);
    if (p.kind == CompiledGrammar::kTerminal) {
      if (g_->terminal(p.value).Has(b)) Add(Advance(it));
    } else if (p.kind == CompiledGrammar::kDfa) {
      const int32_t next = g_->dfa(p.value).Next(it.state, b);
      if (next >= 0) Add({it.pos, it.origin, next});
    }
  }
  if (items_.size() == top_end) {
    set_begin_.pop_back();
    return false;
  }
  Closure();
  if (over_) {
    items_.resize(top_end);
    set_begin_.pop_back();
    exhausted_ = true;
    ++exhaust_events_;
    return false;
  }
  return true;
}

void GrammarMatcher::PopSet() {
  items_.resize(set_begin_.back());
  set_begin_.pop_back();
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (terminated_) return false;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (!PushByte(static_cast<uint8_t>(bytes[i]))) {
      for (size_t j = 0; j < i; ++j) PopSet();
      return false;
    }
  }
  history_.push_back(static_cast<int32_t>(bytes.size()));
  return true;
}

bool GrammarMatcher::AcceptToken(int32_t id) {
  if (terminated_ || id < 0 || id >= vocab_->size()) return false;
  if (vocab_->is_special(id)) {
    if (!vocab_->is_eos(id) || !CanTerminate()) return false;
    terminated_ = true;
    history_.push_back(-1);
    return true;
  }
  return AcceptBytes(vocab_->token(id));
}

void GrammarMatcher::Rollback(int n) {
  for (; n > 0 && !history_.empty(); --n) {
    const int32_t len = history_.back();
    history_.pop_back();
    if (len < 0) {
      terminated_ = false;
      continue;
    }
    for (int32_t i = 0; i < len; ++i) PopSet();
  }
}

bool GrammarMatcher::CanTerminate() const {
  if (terminated_) return false;
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    const CompiledGrammar::Pos& p = g_->pos(items_[i].pos);
    if (p.kind == CompiledGrammar::kEnd && p.value == g_->start() && items_[i].origin == 0) {
      return true;
    }
  }
  return false;
}

ByteSet GrammarMatcher::AllowedBytes() const {
  ByteSet out;
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    const CompiledGrammar::Pos& p = g_->pos(items_[i].pos);
    if (p.kind == CompiledGrammar::kTerminal) {
      out.Union(g_->terminal(p.value));
    } else if (p.kind == CompiledGrammar::kDfa) {
      out.Union(g_->dfa(p.value).live_bytes[items_[i].state]);
    }
  }
  return out;
}

std::vector<int32_t> GrammarMatcher::JumpForwardTokens() {
  const std::string text = JumpForward();
  const auto& trie = vocab_->trie();
  std::vector<int32_t> out;
  size_t at = 0;
  while (at < text.size()) {
    uint32_t node = 0;
    int32_t best = -1;
    size_t best_len = 0;
    for (size_t k = at; k < text.size(); ++k) {
      uint32_t child = node + 1;
      while (child < trie[node].next && trie[child].byte != static_cast<uint8_t>(text[k])) {
        child = trie[child].next;
      }
      if (child >= trie[node].next) break;
      node = child;
      const auto ids = vocab_->node_tokens(node);
      if (!ids.empty()) {
        best = ids[0];
        best_len = k - at + 1;
      }
    }
    if (best < 0) break;
    out.push_back(best);
    at += best_len;
  }
  return out;
}

std::string GrammarMatcher::JumpForward() {
  std::string out;
  if (terminated_) return out;
  while (out.size() < kMaxJumpForward && !CanTerminate()) {
    const ByteSet allowed = AllowedBytes();
    if (allowed.Count() != 1) break;
    int b = 0;
    while (!allowed.Has(static_cast<uint8_t>(b))) ++b;
    if (!PushByte(static_cast<uint8_t>(b))) break;
    out.push_back(static_cast<char>(b));
  }
  for (size_t i = 0; i < out.size(); ++i) PopSet();
  return out;
}

}  // namespace deepinfer::grammar
