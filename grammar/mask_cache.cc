#include "grammar/mask_cache.h"

#include <atomic>

namespace deepinfer::grammar {

namespace {
std::atomic<size_t> g_process_bytes{0};
}  // namespace

MaskCache::~MaskCache() { g_process_bytes.fetch_sub(bytes_); }

size_t MaskCache::process_bytes() { return g_process_bytes.load(); }

bool MaskCache::Bind(const TokenVocabulary* vocab) {
  std::lock_guard<std::mutex> lock(mu_);
  if (vocab_ == nullptr) vocab_ = vocab;
  return vocab_ == vocab;
}

uint64_t MaskCache::HashKey(const std::vector<uint64_t>& key) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ key.size();
  for (uint64_t k : key) {
    h ^= k + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
  }
  return h ^ (h >> 31);
}

std::shared_ptr<const MaskCache::Entry> MaskCache::Find(uint64_t hash,
                                                        const std::vector<uint64_t>& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [begin, end] = slots_.equal_range(hash);
  for (auto it = begin; it != end; ++it) {
    if (it->second.entry->key == key) {
      it->second.last_use = ++clock_;
      ++hits_;
      return it->second.entry;
    }
  }
  ++misses_;
  return nullptr;
}

void MaskCache::Insert(uint64_t hash, std::shared_ptr<const Entry> entry) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [begin, end] = slots_.equal_range(hash);
  for (auto it = begin; it != end; ++it) {
    if (it->second.entry->key == entry->key) return;  // another matcher got there first
  }
  const size_t add = entry->bytes();
  bytes_ += add;
  g_process_bytes.fetch_add(add);
  slots_.emplace(hash, Slot{std::move(entry), ++clock_});
  EvictLocked();
}

void MaskCache::EvictLocked() {
  while (bytes_ > max_bytes_ && slots_.size() > 1) EvictOldestLocked();
  // Over the process budget: this cache gives up what it holds, down to nothing.
  while (g_process_bytes.load() > kProcessBytes && !slots_.empty()) EvictOldestLocked();
}

void MaskCache::EvictOldestLocked() {
  // A linear scan per eviction: entries are few (each holds a vocabulary-sized mask) and an
  // eviction follows a miss, which walked the trie and dwarfs the scan.
  auto oldest = slots_.begin();
  for (auto it = slots_.begin(); it != slots_.end(); ++it) {
    if (it->second.last_use < oldest->second.last_use) oldest = it;
  }
  const size_t b = oldest->second.entry->bytes();
  bytes_ -= b;
  g_process_bytes.fetch_sub(b);
  slots_.erase(oldest);
}

MaskCache::Stats MaskCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Stats{hits_, misses_, slots_.size(), bytes_};
}

}  // namespace deepinfer::grammar
