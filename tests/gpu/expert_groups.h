// Expert groups as the GPU expert tests draw them: each group's expert at random (repeats
// allowed), its rows gathered from and scattered to token rows in a random order, so that a
// kernel which reads or writes the wrong row shows. The entries past a group's rows hold a row
// far past any buffer, so a kernel that reads or writes one faults instead of quietly using
// row 0.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <random>
#include <vector>

#include "kernels/expert_fp4.h"

namespace deepinfer::testing {

/// What the entries past a group's rows hold (the file comment).
constexpr int32_t kUnusedRow = 1 << 29;

/// One group per entry of `group_rows` (its row count) over `experts` experts; with
/// `sorted_by_expert`, in the order BuildExpertGroups writes them (runs of one expert).
inline std::vector<kernels::ExpertGroup> RandomExpertGroups(const std::vector<int>& group_rows,
                                                            int experts, bool sorted_by_expert,
                                                            std::mt19937& rng) {
  int total = 0;
  for (int r : group_rows) total += r;
  std::vector<int32_t> x_perm(total), y_perm(total);
  for (int i = 0; i < total; ++i) x_perm[i] = y_perm[i] = i;
  std::shuffle(x_perm.begin(), x_perm.end(), rng);
  std::shuffle(y_perm.begin(), y_perm.end(), rng);
  std::vector<kernels::ExpertGroup> groups;
  int next = 0;
  for (int rows : group_rows) {
    kernels::ExpertGroup g{};
    g.expert = static_cast<int32_t>(rng() % experts);
    g.rows = rows;
    std::fill(std::begin(g.x_row), std::end(g.x_row), kUnusedRow);
    std::fill(std::begin(g.y_row), std::end(g.y_row), kUnusedRow);
    for (int r = 0; r < rows; ++r, ++next) {
      g.x_row[r] = x_perm[next];
      g.y_row[r] = y_perm[next];
    }
    groups.push_back(g);
  }
  if (sorted_by_expert) {
    std::stable_sort(groups.begin(), groups.end(),
                     [](const auto& a, const auto& b) { return a.expert < b.expert; });
  }
  return groups;
}

}  // namespace deepinfer::testing
