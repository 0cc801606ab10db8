// Where a step's tokens are drawn (engine/scheduler/step_draws.h): on the stepper when every
// request sampled in the step can be, each sampled item then asking for its draw with the
// request's parameters and no item taking logits; otherwise, or when switched off or off the slot
// path, every item takes a row of logits.
#include "engine/scheduler/step_draws.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/tiny_model_test.h"

namespace deepinfer {
namespace {

using StepDrawsTest = testing::TinyModelTest;

GenerationParams Sampled(float temperature, uint64_t seed) {
  GenerationParams p;
  p.prompt = {4, 5, 6};
  p.max_tokens = 4;
  p.sampling.temperature = temperature;
  p.sampling.top_k = 30;
  p.sampling.seed = seed;
  return p;
}

TEST_F(StepDrawsTest, AStepDrawsOnTheStepperWhenEverySampledRequestCan) {
  MakeSlotted(4, 16, 8, 128);
  RequestState a(*slotted_, nullptr, 1, Sampled(0.8f, 3)), b(*slotted_, nullptr, 2, Sampled(0, 5));
  GenerationParams with_logprobs = Sampled(0.8f, 3);
  with_logprobs.logprobs = true;
  RequestState c(*slotted_, nullptr, 3, with_logprobs);
  std::vector<BatchItem> items(3);  // item 1: a prompt chunk that samples nothing this step
  std::vector<float> logits;
  StepDraws draws(*slotted_, true);
  const std::vector<RequestState*> ab = {&a, &b};
  const std::vector<size_t> ab_items = {2, 0};
  ASSERT_TRUE(draws.Plan(items, ab, ab_items, logits));
  for (const BatchItem& it : items) EXPECT_EQ(it.logits, nullptr);
  EXPECT_EQ(items[1].sample, nullptr);
  ASSERT_NE(items[2].sample, nullptr);
  ASSERT_NE(items[0].sample, nullptr);
  EXPECT_EQ(items[2].sample->seed, 3u);
  EXPECT_EQ(items[2].sample->stream, 1u);
  EXPECT_EQ(items[2].sample->position, 3u);  // the prompt's length: the token's place
  EXPECT_FLOAT_EQ(items[2].sample->temperature, 0.8f);
  EXPECT_EQ(items[2].sample->top_k, 30);
  EXPECT_EQ(items[0].sample->stream, 2u);
  *items[2].next = 17;  // what the stepper writes
  *items[0].next = 23;
  EXPECT_EQ(draws.token(0), 17);
  EXPECT_EQ(draws.token(1), 23);
  // One request that needs the host (log-probabilities) takes the whole step to logits.
  std::vector<BatchItem> fresh(3);
  const std::vector<RequestState*> abc = {&a, &b, &c};
  const std::vector<size_t> abc_items = {0, 1, 2};
  EXPECT_FALSE(draws.Plan(fresh, abc, abc_items, logits));
  ASSERT_EQ(logits.size(), 3 * static_cast<size_t>(V_));
  for (size_t k = 0; k < fresh.size(); ++k) {
    EXPECT_EQ(fresh[k].logits, &logits[k * V_]);
    EXPECT_EQ(fresh[k].sample, nullptr);
  }
  // Switched off, or on the layers path, every step takes logits.
  std::vector<BatchItem> off(3);
  EXPECT_FALSE(StepDraws(*slotted_, false).Plan(off, ab, ab_items, logits));
  EXPECT_NE(off[2].logits, nullptr);
  Model layers(*ck_, *cpu_, Numerics::kReference);
  std::vector<BatchItem> on_layers(3);
  EXPECT_FALSE(StepDraws(layers, true).Plan(on_layers, ab, ab_items, logits));
  EXPECT_EQ(on_layers[0].sample, nullptr);
}

}  // namespace
}  // namespace deepinfer
