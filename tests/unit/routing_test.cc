// Top-k selection and MoE routing (reference §2.4): deterministic tie-breaks, sqrt(softplus)
// scores, bias used for selection only, hash-routed layers, normalisation and scaling.
#include "engine/model/routing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace deepinfer {
namespace {

double SqrtSoftplus(double x) { return std::sqrt(std::log1p(std::exp(x))); }

std::vector<int32_t> TopK(const std::vector<float>& s, int64_t k) {
  std::vector<int32_t> out(k + 2, -1), scratch;
  TopKIndices(s.data(), static_cast<int64_t>(s.size()), k, out.data(), scratch);
  return out;
}

TEST(RoutingTest, TopKOrderAndTies) {
  EXPECT_EQ(TopK({1, 3, 2, 3, 0}, 3), (std::vector<int32_t>{1, 3, 2, -1, -1}));
  EXPECT_EQ(TopK({5, 5, 5, 5}, 2), (std::vector<int32_t>{0, 1, -1, -1}));
  EXPECT_EQ(TopK({-1, 0.5f, -1, 0.5f, 2}, 4), (std::vector<int32_t>{4, 1, 3, 0, -1, -1}));
  // k > n: only n indices are written.
  EXPECT_EQ(TopK({0.1f, 0.3f, 0.2f}, 5), (std::vector<int32_t>{1, 2, 0, -1, -1, -1, -1}));
  // Many equal scores, large n: the lowest indices win, in order, regardless of sorting.
  std::vector<float> flat(1000, 0.0f);
  flat[700] = 1.0f;
  const std::vector<int32_t> got = TopK(flat, 6);
  EXPECT_EQ(got, (std::vector<int32_t>{700, 0, 1, 2, 3, 4, -1, -1}));
  std::vector<int32_t> out(1), scratch;
  TopKIndices(flat.data(), 1000, 0, out.data(), scratch);  // k = 0 writes nothing
}

TEST(RoutingTest, RouterScore) {
  // sqrt(ln 2), sqrt(ln(1 + e)), sqrt(ln(1 + e^-3)).
  EXPECT_NEAR(RouterScore(ScoringFunc::kSqrtSoftplus, 0.0f), 0.8325546, 1e-6);
  EXPECT_NEAR(RouterScore(ScoringFunc::kSqrtSoftplus, 1.0f), 1.1459763, 1e-6);
  EXPECT_NEAR(RouterScore(ScoringFunc::kSqrtSoftplus, -3.0f), 0.2204255, 1e-6);
  for (float x : {-20.0f, -5.5f, 0.3f, 7.0f, 19.0f}) {
    EXPECT_NEAR(RouterScore(ScoringFunc::kSqrtSoftplus, x), SqrtSoftplus(x), 2e-6 * SqrtSoftplus(x))
        << x;
  }
  // Above 20 softplus is the identity (PyTorch's threshold): no overflow of exp().
  EXPECT_FLOAT_EQ(RouterScore(ScoringFunc::kSqrtSoftplus, 25.0f), 5.0f);
  EXPECT_FLOAT_EQ(RouterScore(ScoringFunc::kSqrtSoftplus, 100.0f), 10.0f);
  EXPECT_FLOAT_EQ(RouterScore(ScoringFunc::kSqrtSoftplus, 1e4f), 100.0f);
  EXPECT_FLOAT_EQ(RouterScore(ScoringFunc::kSigmoid, 0.0f), 0.5f);
  EXPECT_NEAR(RouterScore(ScoringFunc::kSigmoid, 2.0f), 1 / (1 + std::exp(-2.0)), 1e-7);
  EXPECT_EQ(RouterScore(ScoringFunc::kSoftmax, -1.25f), -1.25f);  // normalised by the caller
}

class RouteTokenTest : public ::testing::Test {
 protected:
  RouteTokenTest() {
    cfg_.n_routed_experts = 6;
    cfg_.num_experts_per_tok = 2;
    cfg_.scoring_func = ScoringFunc::kSqrtSoftplus;
    cfg_.norm_topk_prob = true;
    cfg_.routed_scaling_factor = 1.5;
  }
  void Route(const float* bias, const int32_t* hash) {
    RouteToken(cfg_, logits_.data(), bias, hash, experts_, weights_, scratch_, order_);
  }
  ModelConfig cfg_;
  std::vector<float> logits_ = {3, 2, 1, 0, -1, -2};
  int32_t experts_[2] = {-1, -1};
  float weights_[2] = {0, 0};
  std::vector<float> scratch_;
  std::vector<int32_t> order_;
};

TEST_F(RouteTokenTest, ScoreRoutingSelectsWithBiasWeighsWithout) {
  // Biased scores: s0 + 0 = 1.75, s3 + 5 = 5.83, s5 + 2 = 2.36, s1 = 1.46: pick 3 then 5.
  const float bias[6] = {0, 0, 0, 5, 0, 2};
  Route(bias, nullptr);
  EXPECT_EQ(experts_[0], 3);
  EXPECT_EQ(experts_[1], 5);
  const double s3 = SqrtSoftplus(0), s5 = SqrtSoftplus(-2);
  EXPECT_NEAR(weights_[0], s3 / (s3 + s5) * 1.5, 1e-6);
  EXPECT_NEAR(weights_[1], s5 / (s3 + s5) * 1.5, 1e-6);

  Route(nullptr, nullptr);  // no bias: plain top-2 by score
  EXPECT_EQ(experts_[0], 0);
  EXPECT_EQ(experts_[1], 1);
  const double s0 = SqrtSoftplus(3), s1 = SqrtSoftplus(2);
  EXPECT_NEAR(weights_[0], s0 / (s0 + s1) * 1.5, 1e-6);
  EXPECT_NEAR(weights_[1], s1 / (s0 + s1) * 1.5, 1e-6);
}

TEST_F(RouteTokenTest, HashRoutingTakesTableExpertsAndScoreWeights) {
  const int32_t table_row[2] = {4, 1};
  const float bias[6] = {9, 9, 9, 9, 9, 9};  // ignored for the choice
  Route(bias, table_row);
  EXPECT_EQ(experts_[0], 4);
  EXPECT_EQ(experts_[1], 1);
  const double s4 = SqrtSoftplus(-1), s1 = SqrtSoftplus(2);
  EXPECT_NEAR(weights_[0], s4 / (s4 + s1) * 1.5, 1e-6);
  EXPECT_NEAR(weights_[1], s1 / (s4 + s1) * 1.5, 1e-6);
}

TEST_F(RouteTokenTest, NoNormalisation) {
  cfg_.norm_topk_prob = false;
  const float bias[6] = {0, 0, 0, 5, 0, 2};
  Route(bias, nullptr);
  EXPECT_EQ(experts_[0], 3);
  EXPECT_NEAR(weights_[0], SqrtSoftplus(0) * 1.5, 1e-6);
  EXPECT_NEAR(weights_[1], SqrtSoftplus(-2) * 1.5, 1e-6);

  // Softmax scoring: weights are the probabilities over all experts, times the factor.
  cfg_.scoring_func = ScoringFunc::kSoftmax;
  cfg_.routed_scaling_factor = 1.0;
  Route(nullptr, nullptr);
  double z = 0;
  for (float l : logits_) z += std::exp(l);
  EXPECT_EQ(experts_[0], 0);
  EXPECT_EQ(experts_[1], 1);
  EXPECT_NEAR(weights_[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(weights_[1], std::exp(2.0) / z, 1e-6);
}

}  // namespace
}  // namespace deepinfer
