// Resuming by tail replay (engine/cache/tail_replay.h): exact exactly when the replay covers the
// dependency cone of every layer's window, approximate below it; stored rows are not emitted
// again.
#include "engine/cache/tail_replay.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "engine/backend/backend.h"
#include "engine/model/tiny_checkpoint.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

class TailReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TinySpec spec;
    spec.window = 32;  // a small window keeps the cone (window - 1) * layers short
    ASSERT_TRUE(MakeTinyCheckpoint(spec, dir_.path()).ok());
    ck_ = *LoadCheckpoint(dir_.path());
    model_.emplace(*ck_, *backend_, Numerics::kExact);
    for (int i = 0; i < 320; ++i) tokens_.push_back((i * 37 + 11) % 512);
    exact_ = model_->NewSequence();
    std::vector<float> logits(tokens_.size() * 512);
    ASSERT_TRUE(model_->Forward(exact_, tokens_, logits.data(), nullptr).ok());
  }
  // Logits of the same 4 decode tokens after `state`.
  std::vector<float> Decode(SequenceState state) {
    std::vector<float> out(4 * 512);
    for (int k = 0; k < 4; ++k) {
      const int32_t t = (k * 101 + 7) % 512;
      EXPECT_TRUE(
          model_->Forward(state, std::span<const int32_t>(&t, 1), &out[k * 512], nullptr).ok());
    }
    return out;
  }
  testing::TempDir dir_;
  std::unique_ptr<Checkpoint> ck_;
  std::unique_ptr<Backend> backend_ = MakeCpuBackend(1);
  std::optional<Model> model_;
  std::vector<int32_t> tokens_;
  SequenceState exact_;
};

TEST_F(TailReplayTest, ExactFromTheConeOnApproximateBelow) {
  const int64_t layers = static_cast<int64_t>(exact_.layers.size());
  const int64_t window = exact_.layers[0].window;
  ASSERT_EQ(window, 32);
  const int64_t cone = (window - 1) * layers;
  ASSERT_LT(cone, static_cast<int64_t>(tokens_.size()));
  const std::vector<float> want = Decode(exact_);
  auto resumed = ResumeByTailReplay(*model_, exact_, tokens_, cone);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  for (size_t l = 0; l < exact_.layers.size(); ++l) {
    EXPECT_EQ(resumed->layers[l].rows.ToVector(), exact_.layers[l].rows.ToVector()) << l;
    EXPECT_EQ(resumed->layers[l].index_keys.ToVector(), exact_.layers[l].index_keys.ToVector())
        << l;
  }
  EXPECT_EQ(Decode(*resumed), want);
  auto short_tail = ResumeByTailReplay(*model_, exact_, tokens_, cone - 1);
  ASSERT_TRUE(short_tail.ok());
  EXPECT_NE(Decode(*short_tail), want);
  auto bounded = ResumeByTailReplay(*model_, exact_, tokens_, window);
  ASSERT_TRUE(bounded.ok());
  const std::vector<float> got = Decode(*bounded);
  EXPECT_NE(got, want);
  for (float v : got) ASSERT_TRUE(std::isfinite(v)) << "a dropped ring slot was read";
}

TEST_F(TailReplayTest, RejectsAMismatchedContext) {
  std::vector<int32_t> shorter(tokens_.begin(), tokens_.end() - 1);
  EXPECT_FALSE(ResumeByTailReplay(*model_, exact_, shorter, 128).ok());
  EXPECT_FALSE(ResumeByTailReplay(*model_, exact_, tokens_, 0).ok());
}

}  // namespace
}  // namespace deepinfer
