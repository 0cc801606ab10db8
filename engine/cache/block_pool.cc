#include "engine/cache/block_pool.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace deepinfer {

BlockPool::~BlockPool() {
  for (float* b : free_) delete[] b;
}

std::shared_ptr<float> BlockPool::Allocate() {
  float* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      block = free_.back();
      free_.pop_back();
    }
    ++in_use_;
  }
  if (block == nullptr) block = new float[kBlockFloats];
  // The deleter keeps the pool alive while any of its blocks is.
  return std::shared_ptr<float>(block, [pool = shared_from_this()](float* b) { pool->Release(b); });
}

void BlockPool::Release(float* block) {
  std::lock_guard<std::mutex> lock(mu_);
  --in_use_;
  free_.push_back(block);
}

BlockPool::Stats BlockPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Stats{in_use_, free_.size()};
}

PagedRows::PagedRows(std::shared_ptr<BlockPool> pool, int width)
    : pool_(std::move(pool)),
      width_(width),
      per_block_(std::max<int64_t>(1, static_cast<int64_t>(BlockPool::kBlockFloats) / width)) {
  assert(width > 0 && static_cast<size_t>(width) <= BlockPool::kBlockFloats);
}

void PagedRows::Append(const float* r) {
  const int64_t slot = n_ % per_block_;
  if (slot == 0) {
    blocks_.push_back(pool_->Allocate());
  } else if (blocks_.back().use_count() > 1) {
    // Another holder (a prefix snapshot, a sequence resumed from it) keeps the filled part.
    std::shared_ptr<float> own = pool_->Allocate();
    std::memcpy(own.get(), blocks_.back().get(),
                static_cast<size_t>(slot * width_) * sizeof(float));
    blocks_.back() = std::move(own);
  }
  std::memcpy(blocks_.back().get() + slot * width_, r, static_cast<size_t>(width_) * sizeof(float));
  ++n_;
}

std::vector<float> PagedRows::ToVector() const {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(n_ * width_));
  ForEachRun(n_, [&](int64_t, const float* rows, int64_t count) {
    out.insert(out.end(), rows, rows + count * width_);
  });
  return out;
}

}  // namespace deepinfer
