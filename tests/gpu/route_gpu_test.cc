// The MoE glue on the GPU (kernels/route.h) against the CPU's Moe: the router's experts and
// weights bit for bit (score kinds, bias, hash routing, ties on a coarse grid, logits above
// softplus's linear threshold), the grouping in the CPU's expert-then-token order across several
// chunks of pairs, the combine's sums in the CPU's order; and the one-token router with its groups
// in one launch and the combine straight into the mHC post, against the two-launch forms.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/routing.h"
#include "kernels/cuda_available.h"
#include "kernels/expert_fp4_limbs.h"
#include "kernels/ops.h"
#include "kernels/route.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;

class RouteGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  std::mt19937 rng_{std::random_device{}()};
};

struct RouterCase {
  int experts, top_k;
  ScoringFunc scoring;
  bool bias, hash, norm;
  double scaling;
};

TEST_F(RouteGpuTest, RouterPicksWhatTheCpuPicks) {
  const std::vector<RouterCase> cases = {
      {256, 6, ScoringFunc::kSqrtSoftplus, true, false, true, 1.5},
      {256, 6, ScoringFunc::kSqrtSoftplus, false, true, true, 1.5},
      {72, 5, ScoringFunc::kSigmoid, false, false, false, 2.5},
      {300, 8, ScoringFunc::kSoftmax, true, false, true, 1.0},
      {7, 7, ScoringFunc::kSqrtSoftplus, true, false, true, 1.0}};
  const int64_t T = 41, vocab = 97;
  for (const RouterCase& c : cases) {
    ModelConfig cfg;
    cfg.n_routed_experts = c.experts;
    cfg.num_experts_per_tok = c.top_k;
    cfg.scoring_func = c.scoring;
    cfg.norm_topk_prob = c.norm;
    cfg.routed_scaling_factor = c.scaling;
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> logits(T * c.experts), bias(c.experts);
    for (int64_t t = 0; t < T; ++t) {
      for (int e = 0; e < c.experts; ++e) {
        float v = normal(rng_);
        if (t % 3 == 1) v = std::round(v * 4.0f) / 4.0f;  // a coarse grid: many exact ties
        if (t % 7 == 2 && e % 5 == 0) v += 25.0f;         // softplus's linear region
        logits[t * c.experts + e] = v;
      }
    }
    for (float& b : bias) b = std::round(normal(rng_) * 8.0f) / 64.0f;
    std::vector<int32_t> tokens(T), tid2eid(vocab * c.top_k);
    for (auto& tok : tokens) tok = static_cast<int32_t>(rng_() % vocab);
    for (auto& e : tid2eid) e = static_cast<int32_t>(rng_() % c.experts);

    std::vector<int32_t> want_e(T * c.top_k), order;
    std::vector<float> want_w(T * c.top_k), scratch;
    for (int64_t t = 0; t < T; ++t) {
      RouteToken(cfg, &logits[t * c.experts], c.bias ? bias.data() : nullptr,
                 c.hash ? &tid2eid[tokens[t] * c.top_k] : nullptr, &want_e[t * c.top_k],
                 &want_w[t * c.top_k], scratch, order);
    }
    DeviceVector<float> d_logits(logits), d_bias(bias);
    DeviceVector<int32_t> d_tokens(tokens), d_table(tid2eid);
    auto d_e = DeviceVector<int32_t>::Poisoned(T * c.top_k);
    auto d_w = DeviceVector<float>::Poisoned(T * c.top_k);
    kernels::RouterParams p;
    p.experts = c.experts;
    p.top_k = c.top_k;
    p.scoring = static_cast<kernels::RouterScoring>(static_cast<int>(c.scoring));
    p.norm_topk_prob = c.norm;
    p.routed_scaling = static_cast<float>(c.scaling);
    ASSERT_EQ(kernels::RouteTokens(d_logits.get(), c.bias ? d_bias.get() : nullptr,
                                   c.hash ? d_table.get() : nullptr, d_tokens.get(), T, p,
                                   d_e.get(), d_w.get(), nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(d_e.ToHost(), want_e) << "experts, E " << c.experts;
    const std::vector<float> got_w = d_w.ToHost();
    EXPECT_EQ(std::memcmp(got_w.data(), want_w.data(), want_w.size() * sizeof(float)), 0)
        << "weights, E " << c.experts;
  }
}

TEST_F(RouteGpuTest, GroupsFollowTheCpuOrder) {
  const int E = 256, K = 6;
  struct Case {
    int64_t T;
    int group_rows;
    int align = 1;
    bool one_expert = false;  // every pair on one expert: the bound's worst case
  };
  // 900 x 6 pairs span six chunks of the kernel; group_rows 2 is the CUDA-core GEMV's bound;
  // align 8 and 16 pad each expert's groups to the folded GEMM's windows.
  for (const Case c : {Case{1, 8}, Case{37, 8}, Case{256, 8}, Case{900, 8}, Case{256, 2},
                       Case{40, 1}, Case{900, 8, 8}, Case{2000, 8, 16}, Case{3, 8, 16},
                       Case{40, 1, 16, true}, Case{100, 8, 16, true}}) {
    const int64_t T = c.T, pairs = T * K;
    const int R = c.group_rows;
    SCOPED_TRACE("T " + std::to_string(T) + " R " + std::to_string(R) + " align " +
                 std::to_string(c.align));
    std::vector<int32_t> experts(pairs);
    for (auto& e : experts) {  // a hot set of eight experts takes half the pairs
      e = static_cast<int32_t>(c.one_expert ? 5 : rng_() % 2 ? rng_() % 8 : rng_() % E);
    }
    const int64_t capacity = kernels::MaxExpertGroups(pairs, E, R, c.align);
    DeviceVector<int32_t> d_experts(experts);
    auto d_up = DeviceVector<kernels::ExpertGroup>::Poisoned(capacity);
    auto d_down = DeviceVector<kernels::ExpertGroup>::Poisoned(capacity);
    auto d_count = DeviceVector<int32_t>::Poisoned(1);
    auto d_rank = DeviceVector<int32_t>::Poisoned(pairs);
    ASSERT_EQ(kernels::BuildExpertGroups(d_experts.get(), pairs, K, E, R, d_up.get(), d_down.get(),
                                         d_count.get(), d_rank.get(), nullptr, c.align),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<kernels::ExpertGroup> want;
    for (int e = 0; e < E; ++e) {
      std::vector<int32_t> mine;
      for (int64_t p = 0; p < pairs; ++p) {
        if (experts[p] == e) mine.push_back(static_cast<int32_t>(p));
      }
      for (size_t i = 0; i < mine.size(); i += R) {
        kernels::ExpertGroup g{};
        g.expert = e;
        g.rows = static_cast<int32_t>(std::min<size_t>(R, mine.size() - i));
        for (int r = 0; r < g.rows; ++r) {
          g.x_row[r] = mine[i + r] / K;
          g.y_row[r] = mine[i + r];
        }
        want.push_back(g);
      }
      while (want.size() % c.align != 0) {  // empty groups of the same expert, to a window
        kernels::ExpertGroup pad{};
        pad.expert = e;
        want.push_back(pad);
      }
    }
    ASSERT_EQ(d_count.ToHost()[0], static_cast<int32_t>(want.size())) << "T " << T << " R " << R;
    ASSERT_LE(static_cast<int64_t>(want.size()), capacity);
    const auto up = d_up.ToHost(), down = d_down.ToHost();
    for (size_t g = 0; g < want.size(); ++g) {
      ASSERT_EQ(up[g].expert, want[g].expert) << "group " << g;
      ASSERT_EQ(up[g].rows, want[g].rows) << "group " << g;
      ASSERT_EQ(down[g].expert, want[g].expert);
      ASSERT_EQ(down[g].rows, want[g].rows);
      for (int r = 0; r < want[g].rows; ++r) {
        EXPECT_EQ(up[g].x_row[r], want[g].x_row[r]) << "group " << g << " row " << r;
        EXPECT_EQ(up[g].y_row[r], want[g].y_row[r]);
        EXPECT_EQ(down[g].x_row[r], want[g].y_row[r]);
        EXPECT_EQ(down[g].y_row[r], want[g].y_row[r]);
      }
    }
  }
}

// One token's routing with its one-row groups in the router's launch: the two-launch path's
// experts, weights, groups and count, bit for bit — score routing, and hash routing whose table
// repeats an expert (two groups of one expert, in slot order).
TEST_F(RouteGpuTest, OneTokenRoutesAndGroupsInOneLaunch) {
  const int E = 64, K = 6, vocab = 5;
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(E), bias(E);
  for (float& v : logits) v = normal(rng_);
  for (float& v : bias) v = normal(rng_) / 8.0f;
  std::vector<int32_t> table(vocab * K);
  for (auto& e : table) e = static_cast<int32_t>(rng_() % E);
  const int32_t token = 3;
  table[token * K + 4] = table[token * K + 1];  // a repeated expert
  DeviceVector<float> d_logits(logits), d_bias(bias);
  DeviceVector<int32_t> d_table(table), d_token(std::vector<int32_t>{token});
  kernels::RouterParams p;
  p.experts = E;
  p.top_k = K;
  p.routed_scaling = 2.5f;
  for (bool hash : {false, true}) {
    const int32_t* tid2eid = hash ? d_table.get() : nullptr;
    auto e2 = DeviceVector<int32_t>::Poisoned(K), e1 = DeviceVector<int32_t>::Poisoned(K);
    auto w2 = DeviceVector<float>::Poisoned(K), w1 = DeviceVector<float>::Poisoned(K);
    auto up2 = DeviceVector<kernels::ExpertGroup>::Poisoned(K);
    auto down2 = DeviceVector<kernels::ExpertGroup>::Poisoned(K);
    auto up1 = DeviceVector<kernels::ExpertGroup>::Poisoned(K);
    auto down1 = DeviceVector<kernels::ExpertGroup>::Poisoned(K);
    auto n2 = DeviceVector<int32_t>::Poisoned(1), n1 = DeviceVector<int32_t>::Poisoned(1);
    auto rank = DeviceVector<int32_t>::Poisoned(K);
    ASSERT_EQ(kernels::RouteTokens(d_logits.get(), d_bias.get(), tid2eid, d_token.get(), 1, p,
                                   e2.get(), w2.get(), nullptr),
              0);
    ASSERT_EQ(kernels::BuildExpertGroups(e2.get(), K, K, E, 1, up2.get(), down2.get(), n2.get(),
                                         rank.get(), nullptr),
              0);
    ASSERT_EQ(kernels::RouteOneToken(d_logits.get(), d_bias.get(), tid2eid, d_token.get(), p,
                                     e1.get(), w1.get(), up1.get(), down1.get(), n1.get(), nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(e1.ToHost(), e2.ToHost()) << "hash " << hash;
    const auto wa = w1.ToHost(), wb = w2.ToHost();
    EXPECT_EQ(std::memcmp(wa.data(), wb.data(), K * sizeof(float)), 0) << "hash " << hash;
    ASSERT_EQ(n1.ToHost()[0], K);
    ASSERT_EQ(n2.ToHost()[0], K);
    const auto ua = up1.ToHost(), ub = up2.ToHost(), da = down1.ToHost(), db = down2.ToHost();
    for (int g = 0; g < K; ++g) {  // the fields one-row groups use (slot 0)
      EXPECT_EQ(ua[g].expert, ub[g].expert) << "group " << g << " hash " << hash;
      EXPECT_EQ(ua[g].rows, ub[g].rows);
      EXPECT_EQ(ua[g].x_row[0], ub[g].x_row[0]);
      EXPECT_EQ(ua[g].y_row[0], ub[g].y_row[0]);
      EXPECT_EQ(da[g].expert, db[g].expert);
      EXPECT_EQ(da[g].rows, db[g].rows);
      EXPECT_EQ(da[g].x_row[0], db[g].x_row[0]);
      EXPECT_EQ(da[g].y_row[0], db[g].y_row[0]);
    }
  }
}

// The one-token router's launch with the token's activation limbs: ActLimbsFp8's bytes and
// scales, and the same routing as without them.
TEST_F(RouteGpuTest, OneTokenRouterFormsTheLimbsToo) {
  const int E = 64, K = 6;
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(E);
  for (float& v : logits) v = normal(rng_);
  DeviceVector<float> d_logits(logits);
  DeviceVector<int32_t> d_token(std::vector<int32_t>{1});
  kernels::RouterParams p;
  p.experts = E;
  p.top_k = K;
  for (int64_t in : {4096, 1152, 384}) {  // 1152: a second limb block with one warp busy
    std::vector<float> x(in);
    for (float& v : x)
      v = rng_() % 17 == 0 ? 0.0f : normal(rng_) * (rng_() % 3 == 0 ? 1e-3f : 1.0f);
    DeviceVector<float> d_x(x);
    const int64_t limb_bytes = in / 32 * kernels::kLimbBlockBytes;
    auto limbs = DeviceVector<uint8_t>::Poisoned(limb_bytes);
    auto want_limbs = DeviceVector<uint8_t>::Poisoned(limb_bytes);
    auto scales = DeviceVector<float>::Poisoned(in / 128);
    auto want_scales = DeviceVector<float>::Poisoned(in / 128);
    auto e1 = DeviceVector<int32_t>::Poisoned(K), e2 = DeviceVector<int32_t>::Poisoned(K);
    auto w1 = DeviceVector<float>::Poisoned(K), w2 = DeviceVector<float>::Poisoned(K);
    auto up = DeviceVector<kernels::ExpertGroup>::Poisoned(K);
    auto down = DeviceVector<kernels::ExpertGroup>::Poisoned(K);
    auto n = DeviceVector<int32_t>::Poisoned(1);
    const kernels::TokenLimbs job{d_x.get(), in, limbs.get(), scales.get()};
    ASSERT_EQ(kernels::RouteOneToken(d_logits.get(), nullptr, nullptr, d_token.get(), p, e1.get(),
                                     w1.get(), up.get(), down.get(), n.get(), nullptr, &job),
              0);
    ASSERT_EQ(kernels::RouteOneToken(d_logits.get(), nullptr, nullptr, d_token.get(), p, e2.get(),
                                     w2.get(), up.get(), down.get(), n.get(), nullptr),
              0);
    ASSERT_EQ(kernels::ActLimbsFp8(d_x.get(), 1, in, want_limbs.get(), want_scales.get(), nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(limbs.ToHost(), want_limbs.ToHost()) << in;
    const auto sa = scales.ToHost(), sb = want_scales.ToHost();
    EXPECT_EQ(std::memcmp(sa.data(), sb.data(), sa.size() * sizeof(float)), 0) << in;
    EXPECT_EQ(e1.ToHost(), e2.ToHost());
    const auto wa = w1.ToHost(), wb = w2.ToHost();
    EXPECT_EQ(std::memcmp(wa.data(), wb.data(), K * sizeof(float)), 0);
    // Widths that are not whole 128-value blocks are refused, everything else being valid.
    const kernels::TokenLimbs ragged{d_x.get(), in - 64, limbs.get(), scales.get()};
    EXPECT_NE(kernels::RouteOneToken(d_logits.get(), nullptr, nullptr, d_token.get(), p, e1.get(),
                                     w1.get(), up.get(), down.get(), n.get(), nullptr, &ragged),
              0);
  }
}

TEST_F(RouteGpuTest, CombineSumsInTheCpuOrder) {
  const int64_t T = 19, dim = 300;
  // Top-6 (V4) and top-12 (the kernels' register sort holds 8 slots, then 16), with and without
  // the shared expert.
  for (const int variant : {0, 1, 2, 3}) {
    const int K = variant < 2 ? 6 : 12;
    const bool with_shared = variant % 2 == 0;
    SCOPED_TRACE("K " + std::to_string(K) + (with_shared ? " with shared" : ""));
    std::vector<int32_t> experts(T * K);
    for (auto& e : experts) e = static_cast<int32_t>(rng_() % 12);  // repeats within a token
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> y(T * K * dim), w(T * K), shared(T * dim);
    for (float& v : y) v = normal(rng_);
    for (float& v : w) v = normal(rng_);
    for (float& v : shared) v = normal(rng_);
    // The CPU's Moe: experts in id order, each over its tokens' slots in order, then the shared.
    std::vector<float> want(T * dim, 0.0f);
    for (int e = 0; e < 12; ++e) {
      for (int64_t t = 0; t < T; ++t) {
        for (int k = 0; k < K; ++k) {
          if (experts[t * K + k] != e) continue;
          for (int64_t c = 0; c < dim; ++c)
            want[t * dim + c] += y[(t * K + k) * dim + c] * w[t * K + k];
        }
      }
    }
    if (with_shared) {
      for (int64_t i = 0; i < T * dim; ++i) want[i] += shared[i];
    }
    DeviceVector<float> d_y(y), d_w(w), d_shared(shared);
    DeviceVector<int32_t> d_e(experts);
    auto d_out = DeviceVector<float>::Poisoned(T * dim);
    ASSERT_EQ(kernels::CombineExperts(d_y.get(), d_e.get(), d_w.get(),
                                      with_shared ? d_shared.get() : nullptr, T, K, dim,
                                      d_out.get(), nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = d_out.ToHost();
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);

    // Straight into the mHC post (n = 4 and 3 streams): HyperPost over that output, bit for bit.
    for (int n : {4, 3}) {
      std::vector<float> streams(T * n * dim), post(T * n), comb(T * n * n);
      for (float& v : streams) v = normal(rng_);
      for (float& v : post) v = normal(rng_);
      for (float& v : comb) v = normal(rng_);
      DeviceVector<float> d_streams(streams), d_post(post), d_comb(comb);
      auto want_post = DeviceVector<float>::Poisoned(T * n * dim);
      auto got_post = DeviceVector<float>::Poisoned(T * n * dim);
      ASSERT_EQ(kernels::HyperPost(d_streams.get(), d_out.get(), d_post.get(), d_comb.get(), T, n,
                                   dim, want_post.get(), nullptr),
                0);
      const kernels::HyperPostArgs args{d_streams.get(), d_post.get(), d_comb.get(), n,
                                        got_post.get()};
      ASSERT_EQ(kernels::CombineExpertsPost(d_y.get(), d_e.get(), d_w.get(),
                                            with_shared ? d_shared.get() : nullptr, T, K, dim, args,
                                            nullptr),
                0);
      const auto a = got_post.ToHost(), b = want_post.ToHost();
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "n " << n;
    }
  }
}

TEST_F(RouteGpuTest, RejectsBadArguments) {
  kernels::RouterParams p;
  p.experts = 4;
  p.top_k = 5;  // more than the experts
  EXPECT_NE(
      kernels::RouteTokens(nullptr, nullptr, nullptr, nullptr, 1, p, nullptr, nullptr, nullptr), 0);
  EXPECT_NE(kernels::RouteOneToken(nullptr, nullptr, nullptr, nullptr, p, nullptr, nullptr, nullptr,
                                   nullptr, nullptr, nullptr),
            0);
  EXPECT_NE(kernels::BuildExpertGroups(nullptr, 6, 6, kernels::kMaxRouterExperts + 1, 8, nullptr,
                                       nullptr, nullptr, nullptr, nullptr),
            0);
  EXPECT_NE(kernels::BuildExpertGroups(nullptr, 6, 6, 256, kernels::kExpertGroupRows + 1, nullptr,
                                       nullptr, nullptr, nullptr, nullptr),
            0);
  for (const int align : {0, kernels::kMaxGroupAlign + 1}) {
    EXPECT_NE(kernels::BuildExpertGroups(nullptr, 6, 6, 256, 8, nullptr, nullptr, nullptr, nullptr,
                                         nullptr, align),
              0);
  }
  EXPECT_NE(kernels::CombineExperts(nullptr, nullptr, nullptr, nullptr, 1, 17, 8, nullptr, nullptr),
            0);
  EXPECT_NE(kernels::CombineExpertsPost(nullptr, nullptr, nullptr, nullptr, 1, 6, 8,
                                        kernels::HyperPostArgs{}, nullptr),
            0);
}

}  // namespace
}  // namespace deepinfer
