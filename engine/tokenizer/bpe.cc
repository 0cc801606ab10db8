#include "engine/tokenizer/bpe.h"

#include <algorithm>
#include <cstring>
#include <queue>

namespace deepinfer {

BpeMerger::BpeMerger(const int32_t (&byte_ids)[256], const std::vector<Merge>& merges) {
  for (int b = 0; b < 256; ++b) byte_ids_[b] = byte_ids[b];
  uint64_t size = 16;
  while (size < merges.size() * 2) size <<= 1;
  slots_.assign(size, Slot{kEmpty, {-1, -1}});
  mask_ = size - 1;
  for (size_t r = 0; r < merges.size(); ++r) {
    const uint64_t key = Key(merges[r].left, merges[r].right);
    uint64_t i = Hash(key) & mask_;
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    // The first occurrence of a pair wins, as with a rank map built from the merges list.
    if (slots_[i].key == kEmpty) slots_[i] = {key, {static_cast<int32_t>(r), merges[r].merged}};
  }
}

namespace {

// Words repeat: a per-thread, direct-mapped cache of short pieces skips the merge loop for most
// of them. Per thread, so encoding takes no lock; fixed size, so memory stays flat.
constexpr size_t kCachedPieceBytes = 32;
constexpr size_t kCachedIds = 14;
constexpr size_t kCacheSlots = 1 << 14;

struct CacheSlot {
  uint8_t len = 0xFF;  // 0xFF: empty
  uint8_t n_ids = 0;
  char bytes[kCachedPieceBytes];
  int32_t ids[kCachedIds];
};

struct PieceCache {
  const void* owner = nullptr;
  std::vector<CacheSlot> slots;
};

uint64_t HashPiece(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h ^ (h >> 29);
}

}  // namespace

void BpeMerger::Encode(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.size() > 64) return EncodeLong(piece, out);
  if (piece.size() > kCachedPieceBytes) return EncodeShort(piece, out);
  thread_local PieceCache cache;
  if (cache.owner != this) {
    cache.slots.assign(kCacheSlots, CacheSlot{});
    cache.owner = this;
  }
  CacheSlot& slot = cache.slots[HashPiece(piece) & (kCacheSlots - 1)];
  if (slot.len == piece.size() && std::memcmp(slot.bytes, piece.data(), piece.size()) == 0) {
    out->insert(out->end(), slot.ids, slot.ids + slot.n_ids);
    return;
  }
  const size_t before = out->size();
  EncodeShort(piece, out);
  const size_t n = out->size() - before;
  if (n <= kCachedIds) {
    slot.len = static_cast<uint8_t>(piece.size());
    slot.n_ids = static_cast<uint8_t>(n);
    std::memcpy(slot.bytes, piece.data(), piece.size());
    std::copy(out->begin() + before, out->end(), slot.ids);
  }
}

// Short pieces: arrays of symbols and pair ranks, rescanned for the minimum after each merge.
void BpeMerger::EncodeShort(std::string_view piece, std::vector<int32_t>* out) const {
  int32_t sym[64], rank[64], merged[64];
  int n = static_cast<int>(piece.size());
  for (int i = 0; i < n; ++i) sym[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
  auto refresh = [&](int i) {
    const Entry e = Lookup(sym[i], sym[i + 1]);
    rank[i] = e.rank;
    merged[i] = e.merged;
  };
  for (int i = 0; i + 1 < n; ++i) refresh(i);
  while (n > 1) {
    int best = -1;
    for (int i = 0; i + 1 < n; ++i) {
      if (rank[i] >= 0 && (best < 0 || rank[i] < rank[best])) best = i;
    }
    if (best < 0) break;
    sym[best] = merged[best];
    for (int i = best + 1; i + 1 < n; ++i) {
      sym[i] = sym[i + 1];
      rank[i] = rank[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) refresh(best - 1);
    if (best + 1 < n) refresh(best);
  }
  out->insert(out->end(), sym, sym + n);
}

// Long pieces: a linked list of symbols and a heap of candidate merges ordered by (rank,
// position); stale heap entries are recognised and skipped.
void BpeMerger::EncodeLong(std::string_view piece, std::vector<int32_t>* out) const {
  const int n = static_cast<int>(piece.size());
  std::vector<int32_t> sym(n), prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    sym[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank, pos, left, right;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int i) {
    if (i < 0 || next[i] < 0) return;
    const Entry e = Lookup(sym[i], sym[next[i]]);
    if (e.rank >= 0) heap.push({e.rank, i, sym[i], sym[next[i]]});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int i = c.pos;
    if (!alive[i] || next[i] < 0 || sym[i] != c.left || sym[next[i]] != c.right) continue;
    const int j = next[i];
    sym[i] = Lookup(c.left, c.right).merged;
    alive[j] = false;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  for (int i = 0; i >= 0; i = next[i]) out->push_back(sym[i]);
}

}  // namespace deepinfer
