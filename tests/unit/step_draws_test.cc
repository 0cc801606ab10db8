// Where a step's tokens are drawn (engine/scheduler/step_draws.h): each request sampled in the
// step that can draw on the stepper asks for its draw with its parameters (its log-probability
// too when it asks for them), the others (a penalty here) take a row
// of logits, items that sample nothing take neither; switched off or off the slot path, every
// sampled request takes logits.
#include "engine/scheduler/step_draws.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "grammar/regex.h"
#include "tests/unit/grammar_test_util.h"
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

TEST_F(StepDrawsTest, EachRequestDrawsOnTheStepperWhenItCan) {
  MakeSlotted(4, 16, 8, 128);
  RequestState a(*slotted_, nullptr, 1, Sampled(0.8f, 3));
  GenerationParams with_penalty = Sampled(0.8f, 3);
  with_penalty.sampling.repetition_penalty = 1.2f;
  RequestState c(*slotted_, nullptr, 3, with_penalty);
  GenerationParams with_logprobs = Sampled(0, 5);
  with_logprobs.logprobs = true;
  RequestState b(*slotted_, nullptr, 2, with_logprobs);
  // Items 0, 2 and 3 sample after this step; item 1 is a prompt chunk that samples nothing.
  std::vector<BatchItem> items(4);
  std::vector<float> logits;
  StepDraws draws(*slotted_, true);
  const std::vector<RequestState*> sampled = {&a, &c, &b};
  const std::vector<size_t> sampled_items = {3, 0, 2};
  ASSERT_EQ(draws.Plan(items, sampled, sampled_items, logits), 2u);
  EXPECT_TRUE(draws.drawn(0));
  EXPECT_FALSE(draws.drawn(1));  // a penalty needs the host
  EXPECT_TRUE(draws.drawn(2));
  EXPECT_EQ(items[1].sample, nullptr);
  EXPECT_EQ(items[1].logits, nullptr);
  ASSERT_NE(items[3].sample, nullptr);
  EXPECT_EQ(items[3].logits, nullptr);
  EXPECT_EQ(items[3].sample->seed, 3u);
  EXPECT_EQ(items[3].sample->stream, 1u);
  EXPECT_EQ(items[3].sample->position, 3u);  // the prompt's length: the token's place
  EXPECT_FLOAT_EQ(items[3].sample->temperature, 0.8f);
  EXPECT_EQ(items[3].sample->top_k, 30);
  ASSERT_NE(items[2].sample, nullptr);
  EXPECT_EQ(items[2].sample->stream, 2u);
  EXPECT_EQ(items[2].sample->logprob, 1u);  // b asked for log-probabilities
  EXPECT_EQ(items[3].sample->logprob, 0u);
  EXPECT_EQ(items[0].sample, nullptr);
  ASSERT_EQ(logits.size(), static_cast<size_t>(V_));  // one row, for c
  EXPECT_EQ(items[0].logits, logits.data());
  EXPECT_EQ(draws.logits(1), logits.data());
  *items[3].next = 17;  // what the stepper writes
  *items[2].next = 23;
  *items[2].logprob = -1.5f;
  EXPECT_EQ(draws.token(0), 17);
  EXPECT_EQ(draws.token(2), 23);
  EXPECT_EQ(draws.logprob(2), -1.5f);
  // Switched off, or on the layers path, every sampled request takes logits.
  for (bool on_layers : {false, true}) {
    Model layers(*ck_, *cpu_, Numerics::kReference);
    StepDraws host(on_layers ? layers : *slotted_, on_layers);
    std::vector<BatchItem> fresh(4);
    EXPECT_EQ(host.Plan(fresh, sampled, sampled_items, logits), 0u);
    ASSERT_EQ(logits.size(), 3 * static_cast<size_t>(V_));
    EXPECT_EQ(fresh[3].logits, logits.data());
    EXPECT_EQ(fresh[0].logits, &logits[V_]);
    EXPECT_EQ(fresh[2].logits, &logits[2 * V_]);
    EXPECT_EQ(fresh[1].logits, nullptr);
    for (const BatchItem& it : fresh) EXPECT_EQ(it.sample, nullptr);
    EXPECT_FALSE(host.drawn(0));
  }
}

// The stepper's tokens go to their requests through Accept, which counts the ones accepted
// (status' stepper_sampled_tokens) and not a refused one.
TEST_F(StepDrawsTest, AcceptedDrawsAreCounted) {
  MakeSlotted(2, 16, 8, 128);
  RequestState a(*slotted_, nullptr, 1, Sampled(0.8f, 3)), b(*slotted_, nullptr, 2, Sampled(0, 5));
  std::vector<BatchItem> items = {{&a.seq(), a.NextInput(64), nullptr, nullptr, true}};
  std::vector<float> logits;
  StepDraws draws(*slotted_, true);
  const std::vector<RequestState*> sampled = {&a, &b};
  const std::vector<size_t> sampled_items = {0, 0};
  ASSERT_EQ(draws.Plan(items, {sampled.data(), 1}, {sampled_items.data(), 1}, logits), 1u);
  ASSERT_TRUE(slotted_->ForwardBatch(items).ok());
  EXPECT_TRUE(draws.Accept(0, a).ok());
  EXPECT_EQ(a.context().size(), 4u);  // the prompt and the drawn token
  EXPECT_EQ(a.context().back(), draws.token(0));
  EXPECT_EQ(draws.TakeAccepted(), 1u);
  EXPECT_EQ(draws.TakeAccepted(), 0u);
  EXPECT_FALSE(draws.Accept(0, b).ok());  // b's prompt was never fed
  EXPECT_EQ(draws.TakeAccepted(), 0u);
}

// Constrained requests draw on the stepper with their grammar's mask: two in one step, each item
// pointing at its own row, which allows exactly the grammar's next tokens — none of the model's
// ids past the grammar's vocabulary (257 byte tokens here, 512 model ids).
TEST_F(StepDrawsTest, ConstrainedDrawsCarryTheirGrammarsMask) {
  MakeSlotted(4, 16, 8, 128);
  const auto vocabulary = std::shared_ptr<const grammar::TokenVocabulary>(
      &grammar::testing::ByteVocab(), [](const grammar::TokenVocabulary*) {});
  auto constrained = [&](const char* regex, uint64_t stream) {
    GenerationParams p = Sampled(0.8f, 3);
    p.grammar = std::make_shared<const grammar::CompiledGrammar>(
        grammar::testing::MustCompile(grammar::RegexToGrammar(regex)));
    p.vocabulary = vocabulary;
    return std::make_unique<RequestState>(*slotted_, nullptr, stream, p);
  };
  auto abc = constrained("[a-c]x", 1), digits = constrained("[0-9]+", 2);
  ASSERT_TRUE(abc->DrawsOnStepper());
  std::vector<BatchItem> items(2);
  std::vector<float> logits;
  StepDraws draws(*slotted_, true);
  const std::vector<RequestState*> sampled = {abc.get(), digits.get()};
  const std::vector<size_t> sampled_items = {1, 0};
  ASSERT_EQ(draws.Plan(items, sampled, sampled_items, logits), 2u);
  ASSERT_NE(items[1].mask, nullptr);
  ASSERT_NE(items[0].mask, nullptr);
  ASSERT_NE(items[0].mask, items[1].mask);
  auto allowed = [&](const uint32_t* mask) {
    std::vector<int32_t> ids;
    for (int32_t t = 0; t < V_; ++t) {
      if ((mask[t >> 5] >> (t & 31)) & 1u) ids.push_back(t);
    }
    return ids;
  };
  EXPECT_EQ(allowed(items[1].mask), (std::vector<int32_t>{'a', 'b', 'c'}));
  std::vector<int32_t> digit_ids;
  for (int32_t d = '0'; d <= '9'; ++d) digit_ids.push_back(d);
  EXPECT_EQ(allowed(items[0].mask), digit_ids);
  EXPECT_TRUE(logits.empty());  // nothing for the host
}

// Masks made on a pool are the ones made on the calling thread: five constrained requests (and
// one that is not) planned twice, on fresh states, with a pool of three threads and without.
TEST_F(StepDrawsTest, MasksMadeOnThePoolAreTheCallingThreadsOnes) {
  MakeSlotted(8, 16, 8, 128);
  const auto vocabulary = std::shared_ptr<const grammar::TokenVocabulary>(
      &grammar::testing::ByteVocab(), [](const grammar::TokenVocabulary*) {});
  const char* regexes[] = {"[a-c]x", "[0-9]+", "(yes|no)", "[A-Z][a-z]*", "", "q?[r-t]"};
  auto plan = [&](ThreadPool* pool) {
    std::vector<std::unique_ptr<RequestState>> states;
    for (uint64_t i = 0; i < 6; ++i) {
      GenerationParams p = Sampled(0.8f, 3);
      if (*regexes[i] != '\0') {
        p.grammar = std::make_shared<const grammar::CompiledGrammar>(
            grammar::testing::MustCompile(grammar::RegexToGrammar(regexes[i])));
        p.vocabulary = vocabulary;
      }
      states.push_back(std::make_unique<RequestState>(*slotted_, nullptr, i + 1, p));
    }
    std::vector<RequestState*> sampled;
    for (auto& st : states) sampled.push_back(st.get());
    const std::vector<size_t> sampled_items = {5, 4, 3, 2, 1, 0};
    std::vector<BatchItem> items(6);
    std::vector<float> logits;
    StepDraws draws(*slotted_, true);
    EXPECT_EQ(draws.Plan(items, sampled, sampled_items, logits, pool), 6u);
    std::vector<std::vector<uint32_t>> masks;
    const size_t words = (V_ + 31) / 32;
    for (const BatchItem& item : items) {
      masks.emplace_back();
      if (item.mask != nullptr) masks.back().assign(item.mask, item.mask + words);
    }
    return masks;
  };
  ThreadPool pool(3);
  const auto serial = plan(nullptr), pooled = plan(&pool);
  ASSERT_EQ(pooled.size(), serial.size());
  for (size_t i = 0; i < serial.size(); ++i) {
    EXPECT_EQ(pooled[i], serial[i]) << "item " << i;
    EXPECT_EQ(serial[i].empty(), i == 1) << "item " << i;  // the unconstrained request's item
  }
  EXPECT_EQ(serial[5][('a' >> 5)] >> ('a' & 31) & 1u, 1u);  // [a-c]x allows 'a' first
}

}  // namespace
}  // namespace deepinfer
