// NucleusRows (kernels/sampling.h): nucleus draws without a top-k cut among the first kTopKMax
// candidates, beside greedy, id-walk and top-k draws of the same step (NucleusRowsWithoutWalks:
// the same for every draw but the walks). Where the cut is decided
// (TopPCutWithin against a total in another order, or a min-p floor among the selected) the
// token and log-probability are the CPU sampler's and SampleRows'; the rows left undrawn (-1,
// log-probability 0) are exactly those the host's own TopPCutWithin leaves undecided: nuclei
// past the selected, and a top-p share landing on a prefix sum within the slack of another
// summing order.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_available.h"
#include "kernels/sample_pick.h"
#include "kernels/sample_topk.h"
#include "kernels/sampling.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/sampler_test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;

// Whether NucleusRows draws this row (its masked logits) itself: every row but a nucleus without
// a top-k does; such a row where a min-p floor ends its kept candidates among the first
// kTopKMax, or where TopPCutWithin decides its cut from their running sums (ChunkedPrefix, as the
// samplers sum them) and the row's total in id order. NucleusRows sums that total in another
// order; both lie far within the slack of each other, which only a share landing within ~1e-16
// of the slack's edge could tell apart.
bool DrawnAmongTheSelected(const std::vector<float>& row, const kernels::SampleParams& c) {
  const int32_t vocab = static_cast<int32_t>(row.size());
  if (!TriesNucleusAmongSelected(c.temperature, c.top_k, c.top_p, vocab)) return true;
  const int32_t n = kernels::kTopKMax;
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int32_t a, int32_t b) {
    const uint32_t ka = DescendingKey(row[a]), kb = DescendingKey(row[b]);
    return ka < kb || (ka == kb && a < b);
  });
  const double inv_t = 1.0 / c.temperature, top = row[order[0]];
  std::vector<double> p(n), prefix(n), terms(vocab), sums(vocab);
  for (int32_t i = 0; i < n; ++i) p[i] = std::exp((row[order[i]] - top) * inv_t);
  if (c.min_p > 0) {
    for (int32_t i = 1; i < n; ++i) {
      if (p[i] < c.min_p * p[0]) return true;  // the kept end among the selected
    }
  }
  ChunkedPrefix(p.data(), n, prefix.data());
  for (int32_t i = 0; i < vocab; ++i) terms[i] = IdOrderTerm(row[i], top, inv_t, c.min_p);
  ChunkedPrefix(terms.data(), vocab, sums.data());
  return TopPCutWithin(prefix.data(), n, sums[vocab - 1], SumOrderSlack(vocab), c.top_p) >= 0;
}

TEST(SampleNucleusGpuTest, CutsAmongTheSelectedExactlyWhereDecided) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // printed with any failure
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  // Normal(0, 3) logits: at T 0.3 a 0.9 nucleus holds a few ids, at T 1 thousands of V4's
  // vocabulary (fewer under a mask and of 1,000 ids), at T 4 nearly all; a min-p floor of 0.05
  // at T 0.5 ends the kept among the selected.
  const std::vector<testing::SamplerCase> cases = {
      {0.3f, 0.9f, 0.0f, -1}, {0.5f, 0.9f, 0.05f, -1}, {1.0f, 0.95f, 0.0f, -1},
      {0.0f, 1.0f, 0.0f, -1}, {1.0f, 1.0f, 0.0f, -1},  {0.8f, 0.9f, 0.0f, 50},
      {0.2f, 0.5f, 0.0f, -1}, {4.0f, 0.99f, 0.0f, -1}};
  for (int32_t vocab : {1000, 129280}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    const int64_t rows = 4 * static_cast<int64_t>(cases.size()) + 1;
    testing::SamplerStep s =
        testing::RandomStep(rows, vocab, rng, [](int64_t r) { return (r / 2) % 2 == 1; });
    for (int64_t r = 0; r + 1 < rows; ++r) {
      s.params[r] = testing::DrawParams(cases[(r / 4) % cases.size()], rng, r, r % 3 != 0);
    }
    // The last row: four equal candidates and the rest -inf. Half their mass is exactly the
    // second's running sum, so any total within the slack cuts at the second or the third: the
    // sorted total decides, which only SampleRows has.
    const int64_t tie = rows - 1;
    std::fill(s.row(tie), s.row(tie) + vocab, -INFINITY);
    for (int32_t id : {3, 17, 400, 999}) s.row(tie)[id] = 0.0f;
    std::fill(s.mask.begin() + tie * s.words(), s.mask.end(), ~0u);  // unmasked
    s.params[tie] = testing::DrawParams({1.0f, 0.5f, 0.0f, -1}, rng, tie, true);
    kernels::SamplerWorkspace ws;
    ASSERT_EQ(ws.Reserve(rows, vocab), 0);
    DeviceVector<float> dl(s.logits);
    const testing::Drawn got = testing::DrawOnDevice(kernels::NucleusRows, ws, dl.get(), s);
    const testing::Drawn sorted = testing::DrawOnDevice(kernels::SampleRows, ws, dl.get(), s);
    // Without the walk's launches: the same ids and log-probabilities for every draw that does
    // not walk (a step of those alone takes it).
    const testing::Drawn no_walks =
        testing::DrawOnDevice(kernels::NucleusRowsWithoutWalks, ws, dl.get(), s);
    testing::ExpectCpuPicks(s, sorted.ids, sorted.logprobs);
    int decided = 0, undrawn = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const kernels::SampleParams& c = s.params[r];
      if (!WalksIdOrder(c.temperature, c.top_k, c.top_p, vocab)) {
        EXPECT_EQ(no_walks.ids[r], got.ids[r]) << "row " << r;
        EXPECT_EQ(no_walks.logprobs[r], got.logprobs[r]) << "row " << r;
      }
      const bool drawn = DrawnAmongTheSelected(testing::CpuRow(s, r), c);
      if (!drawn) {
        EXPECT_EQ(got.ids[r], -1) << "row " << r;
        EXPECT_EQ(got.logprobs[r], 0.0f) << "row " << r;
        ++undrawn;
        continue;
      }
      EXPECT_EQ(got.ids[r], sorted.ids[r]) << "row " << r << " T " << c.temperature;
      EXPECT_EQ(got.logprobs[r], sorted.logprobs[r]) << "row " << r;
      decided += TriesNucleusAmongSelected(c.temperature, c.top_k, c.top_p, vocab);
    }
    EXPECT_EQ(got.ids[tie], -1);
    EXPECT_GE(decided, 8);  // the T 0.3 and 0.2 rows at least
    EXPECT_GE(undrawn, 5);  // the T 4 rows and the tie at least
  }
  // Fewer ids than kTopKMax: refused, as TopKRows refuses them.
  kernels::SamplerWorkspace small;
  ASSERT_EQ(small.Reserve(1, kernels::kTopKMax - 1), 0);
  EXPECT_NE(kernels::NucleusRows(small, nullptr, 1, kernels::kTopKMax - 1, nullptr, nullptr,
                                 nullptr, nullptr, nullptr, nullptr),
            0);
}

}  // namespace
}  // namespace deepinfer
