// The block pool behind compressed rows and indexer keys (reference/deepseek-v4.md §4): fixed-size
// blocks, shared by reference between sequences and prefix-cache entries that have the same
// prefix (rows are a pure function of the prefix, so a block once full never changes), recycled
// through a free list, and counted so that status can report every byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace deepinfer {

class BlockPool : public std::enable_shared_from_this<BlockPool> {
 public:
  static constexpr size_t kBlockFloats = 16384;  // 64 KiB: 32 V4 rows of 512 = 128 tokens of CSA
  struct Stats {
    uint64_t blocks_in_use = 0;
    uint64_t blocks_free = 0;  // allocated, waiting in the free list
    uint64_t bytes() const { return (blocks_in_use + blocks_free) * kBlockFloats * sizeof(float); }
  };

  static std::shared_ptr<BlockPool> Create() { return std::shared_ptr<BlockPool>(new BlockPool); }
  ~BlockPool();

  /// A block of kBlockFloats floats (contents unspecified), returned to the pool when the last
  /// reference goes. Thread-safe.
  std::shared_ptr<float> Allocate();
  Stats stats() const;

 private:
  BlockPool() = default;
  void Release(float* block);

  mutable std::mutex mu_;
  std::vector<float*> free_;
  uint64_t in_use_ = 0;
};

/// Rows of one width appended one at a time, stored in pool blocks. Copies share the blocks; an
/// append to a shared, partly filled last block copies that block first (copy on write).
class PagedRows {
 public:
  PagedRows() = default;
  PagedRows(std::shared_ptr<BlockPool> pool, int width);

  int64_t size() const { return n_; }
  int width() const { return width_; }
  int64_t rows_per_block() const { return per_block_; }
  const float* row(int64_t j) const {
    return blocks_[static_cast<size_t>(j / per_block_)].get() + (j % per_block_) * width_;
  }
  void Append(const float* row);
  /// Calls fn(first_row, rows, count) for the contiguous runs covering rows [0, n).
  template <class Fn>
  void ForEachRun(int64_t n, Fn&& fn) const {
    for (int64_t first = 0; first < n; first += per_block_) {
      fn(first, row(first), std::min<int64_t>(per_block_, n - first));
    }
  }
  /// Bytes of the blocks referenced (shared blocks count in every holder).
  size_t bytes() const { return blocks_.size() * BlockPool::kBlockFloats * sizeof(float); }
  /// All rows, contiguous (tests and tools).
  std::vector<float> ToVector() const;

 private:
  std::shared_ptr<BlockPool> pool_;
  int width_ = 0;
  int64_t per_block_ = 1;
  int64_t n_ = 0;
  std::vector<std::shared_ptr<float>> blocks_;
};

}  // namespace deepinfer
