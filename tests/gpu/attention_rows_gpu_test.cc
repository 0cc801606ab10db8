// The decode queries' attention rows on the device (kernels/attention_rows.h) against the CPU
// forward's gather rule (engine/model/attention.cc): window positions from the ring (truncated
// at the start and after a resume), then the indexer's picks (CSA) or every visible compressed
// row (HCA) through each sequence's page table; more queries than one block of the scan.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention_rows.h"
#include "kernels/cuda_available.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;

TEST(AttentionRowsGpuTest, GathersWhatTheCpuForwardGathers) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(std::random_device{}());
  const int64_t Q = 300, pages_per_query = 40;
  const int window = 128, page_rows = 64, top_k = 512;
  for (bool csa : {true, false}) {
    const int ratio = csa ? 4 : 128;
    std::vector<int64_t> pos(Q), from(Q);
    std::vector<int32_t> ring(Q), visible(Q), selected(Q * top_k, -1), pages(Q * pages_per_query);
    std::vector<int32_t> page_ids(Q * pages_per_query);
    std::iota(page_ids.begin(), page_ids.end(), 0);
    std::shuffle(page_ids.begin(), page_ids.end(), rng);
    for (int64_t q = 0; q < Q; ++q) {
      pos[q] = q % 7 == 0 ? static_cast<int64_t>(rng() % 100) : static_cast<int64_t>(rng() % 9000);
      from[q] = q % 5 == 0 ? pos[q] - static_cast<int64_t>(rng() % 60) : 0;  // resumed
      ring[q] = static_cast<int32_t>(1'000'000 + q * window);
      visible[q] = static_cast<int32_t>((pos[q] + 1) / ratio);
      std::copy_n(&page_ids[q * pages_per_query], pages_per_query, &pages[q * pages_per_query]);
      if (csa) {
        std::vector<int32_t> rows(visible[q]);
        std::iota(rows.begin(), rows.end(), 0);
        std::shuffle(rows.begin(), rows.end(), rng);
        const int n = std::min<int>(top_k, visible[q]);
        std::copy_n(rows.begin(), n, &selected[q * top_k]);
      }
    }
    DeviceVector<int64_t> d_pos(pos), d_from(from);
    DeviceVector<int32_t> d_ring(ring), d_visible(visible), d_sel(selected), d_pages(pages);
    kernels::AttentionRowsArgs a;
    a.queries = Q;
    a.pos = d_pos.get();
    a.window_from = d_from.get();
    a.ring_row = d_ring.get();
    a.window = window;
    a.visible = d_visible.get();
    a.selected = csa ? d_sel.get() : nullptr;
    a.top_k = top_k;
    a.page_table = d_pages.get();
    a.pages_per_query = pages_per_query;
    a.page_rows = page_rows;
    const int64_t most = window + (csa ? top_k : 9000 / 128 + 1);
    auto offsets = DeviceVector<int64_t>::Poisoned(Q + 1);
    auto rows = DeviceVector<int32_t>::Poisoned(Q * most);
    ASSERT_EQ(kernels::BuildAttentionRows(a, offsets.get(), rows.get(), nullptr), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got_off = offsets.ToHost();
    const auto got = rows.ToHost();
    std::vector<int32_t> want;
    ASSERT_EQ(got_off[0], 0);
    for (int64_t q = 0; q < Q; ++q) {
      want.clear();
      const int64_t first = std::max({int64_t{0}, pos[q] - window + 1, from[q]});
      for (int64_t p = first; p <= pos[q]; ++p) want.push_back(ring[q] + p % window);
      const int n = csa ? std::min(top_k, visible[q]) : visible[q];
      for (int i = 0; i < n; ++i) {
        const int32_t j = csa ? selected[q * top_k + i] : i;
        want.push_back(pages[q * pages_per_query + j / page_rows] * page_rows + j % page_rows);
      }
      ASSERT_EQ(got_off[q + 1] - got_off[q], static_cast<int64_t>(want.size())) << "query " << q;
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(got[got_off[q] + i], want[i]) << "query " << q << " row " << i;
    }
  }
}

TEST(AttentionRowsGpuTest, RejectsBadArguments) {
  kernels::AttentionRowsArgs a;
  a.queries = 1;  // no pointers, no window
  EXPECT_NE(kernels::BuildAttentionRows(a, nullptr, nullptr, nullptr), 0);
}

}  // namespace
}  // namespace deepinfer
