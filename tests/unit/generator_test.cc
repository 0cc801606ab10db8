// The single-request generator: greedy equals the argmax chain, stop ids and stop strings,
// max_tokens, cancellation, seeded sampling, draws on the slot stepper, and validation.
#include "engine/scheduler/generator.h"

#include <gtest/gtest.h>

#include <utility>

#include "engine/model/host_slot_stepper.h"
#include "engine/model/tiny_checkpoint.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

GenerationParams Params(std::vector<int32_t> prompt, int max_tokens, float temperature,
                        uint64_t seed = 0) {
  GenerationParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.sampling.temperature = temperature;
  p.sampling.seed = seed;
  p.ignore_eos = true;
  return p;
}

class GeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeTinyCheckpoint(TinySpec{}, dir_.path()).ok());
    auto ck = LoadCheckpoint(dir_.path());
    ASSERT_TRUE(ck.ok());
    ck_ = std::move(ck).value();
    backend_ = MakeCpuBackend(1);
    model_ = std::make_unique<Model>(*ck_, *backend_, Numerics::kExact);
    auto tok = Tokenizer::LoadDir(Tokenizer::DefaultDir(DEEPINFER_SOURCE_DIR));
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    tok_ = std::move(tok).value();
  }

  std::vector<GeneratedToken> Generate(const GenerationParams& p, GenerationEnd* reason,
                                       uint64_t request = 1) {
    Generator g(*model_, tok_.get());
    std::vector<GeneratedToken> out;
    auto r = g.Run(request, p, [&](const GeneratedToken& t) {
      out.push_back(t);
      return true;
    });
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) *reason = *r;
    return out;
  }

  testing::TempDir dir_;
  std::unique_ptr<Checkpoint> ck_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(GeneratorTest, GreedyFollowsTheArgmaxChain) {
  GenerationParams p = Params({5, 6, 7}, 6, 0);
  GenerationEnd reason;
  auto out = Generate(p, &reason);
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(reason, GenerationEnd::kLength);
  std::vector<int32_t> seq = p.prompt;
  for (const auto& t : out) {
    std::vector<float> logits(seq.size() * 512);
    SequenceState s = model_->NewSequence();
    ASSERT_TRUE(model_->Forward(s, seq, logits.data(), nullptr).ok());
    const float* last = &logits[(seq.size() - 1) * 512];
    EXPECT_EQ(t.token, std::max_element(last, last + 512) - last);
    seq.push_back(t.token);
  }
  std::string text;
  for (const auto& t : out) text += t.text;
  EXPECT_EQ(text, *tok_->Decode(std::vector<int32_t>(seq.begin() + 3, seq.end())));
}

// On the slot path a prompt longer than the stepper's chunk is fed in chunks; the tokens are the
// layers forward's.
TEST_F(GeneratorTest, PromptsLongerThanASlotChunkGoInChunks) {
  Model inner(*ck_, *backend_, Numerics::kExact), slotted(*ck_, *backend_, Numerics::kExact);
  HostSlotStepper stepper(inner, 1, 8, 8, 128);
  slotted.UseSlots(&stepper);
  std::vector<int32_t> prompt(21);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(3 + 5 * i);
  const GenerationParams p = Params(prompt, 5, 0);
  GenerationEnd plain_end, slot_end;
  const auto plain = Generate(p, &plain_end);
  Generator g(slotted, tok_.get());
  std::vector<int32_t> got;
  auto r = g.Run(2, p, [&](const GeneratedToken& t) {
    got.push_back(t.token);
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  slot_end = *r;
  EXPECT_EQ(slot_end, plain_end);
  ASSERT_EQ(got.size(), plain.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], plain[i].token) << i;
}

TEST_F(GeneratorTest, StopIdsAndStopStrings) {
  GenerationParams p = Params({9, 8}, 8, 0);
  GenerationEnd reason;
  auto free_run = Generate(p, &reason);
  ASSERT_EQ(free_run.size(), 8u);
  p.stop_ids = {free_run[2].token};
  auto stopped = Generate(p, &reason);
  EXPECT_EQ(reason, GenerationEnd::kStop);
  EXPECT_EQ(stopped.back().token, free_run[2].token);
  EXPECT_LE(stopped.size(), 3u);
  // A stop string: the text ends right before it.
  std::string full;
  for (const auto& t : free_run) full += t.text;
  ASSERT_GE(full.size(), 4u);
  const std::string stop = full.substr(full.size() / 2, 2);
  p.stop_ids.clear();
  p.stop_strings = {stop};
  auto cut = Generate(p, &reason);
  std::string text;
  for (const auto& t : cut) text += t.text;
  EXPECT_EQ(reason, GenerationEnd::kStop);
  EXPECT_EQ(text, full.substr(0, full.find(stop)));
}

TEST_F(GeneratorTest, CancellationAndSeededSampling) {
  GenerationParams p = Params({1, 2, 3}, 10, 1.0f, 3);
  GenerationEnd reason;
  auto a = Generate(p, &reason, 11), b = Generate(p, &reason, 11);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].token, b[i].token);
  p.sampling.seed = 4;
  auto c = Generate(p, &reason, 11);
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) differs = differs || a[i].token != c[i].token;
  EXPECT_TRUE(differs);
  Generator g(*model_, tok_.get());
  int calls = 0;
  auto r = g.Run(1, p, [&](const GeneratedToken&) { return ++calls < 3; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, GenerationEnd::kCancelled);
  EXPECT_EQ(calls, 3);
  std::atomic<bool> cancel{true};
  EXPECT_EQ(*g.Run(
                1, p, [](const GeneratedToken&) { return true; }, &cancel),
            GenerationEnd::kCancelled);
}

TEST_F(GeneratorTest, PenaltiesDiscourageRepeatsAndLogprobsAreReported) {
  GenerationParams p = Params({5, 6, 7}, 40, 0);
  GenerationEnd reason;
  auto plain = Generate(p, &reason);
  p.sampling.frequency_penalty = 2.0f;
  p.sampling.presence_penalty = 2.0f;
  auto penalised = Generate(p, &reason);
  auto distinct = [](const std::vector<GeneratedToken>& v) {
    std::vector<int32_t> ids;
    for (const auto& t : v) ids.push_back(t.token);
    std::sort(ids.begin(), ids.end());
    return std::unique(ids.begin(), ids.end()) - ids.begin();
  };
  EXPECT_GT(distinct(penalised), distinct(plain));
  for (const auto& t : plain) EXPECT_EQ(t.logprob, 0.0f);  // not asked for
  p.logprobs = true;
  p.sampling.frequency_penalty = p.sampling.presence_penalty = 0.0f;
  const auto reported = Generate(p, &reason);
  ASSERT_EQ(reported.size(), plain.size());
  for (size_t i = 0; i < reported.size(); ++i) {
    EXPECT_EQ(reported[i].token, plain[i].token);  // the log-softmax changes no pick
    EXPECT_LE(reported[i].logprob, 0.0f);
    EXPECT_GT(reported[i].logprob, -20.0f);  // greedy picks the most likely token
  }
  p.sampling.frequency_penalty = 3.0f;
  Generator g(*model_, tok_.get());
  EXPECT_NE(g.Run(1, p, [](const GeneratedToken&) { return true; })
                .status()
                .message()
                .find("frequency_penalty"),
            std::string::npos);
}

// Chunks for the prefix cache end at every 128-token boundary, even when the budget would carry
// a chunk past several; without that option a chunk stops at the last boundary before the end.
TEST_F(GeneratorTest, PrefillChunksStopAtEveryBlockBoundary) {
  GenerationParams p;
  for (int i = 0; i < 300; ++i) p.prompt.push_back((i * 11 + 2) % 512);
  RequestState st(*model_, nullptr, 1, p);
  std::vector<size_t> chunks;
  std::vector<float> logits(512);
  while (st.prefilling() || st.seq().length < 300) {
    std::span<const int32_t> in = st.NextInput(512, /*stop_at_block=*/true);
    chunks.push_back(in.size());
    BatchItem item{&st.seq(), in, logits.data(), nullptr, true};
    ASSERT_TRUE(model_->ForwardBatch(std::span<BatchItem>(&item, 1)).ok());
  }
  EXPECT_EQ(chunks, (std::vector<size_t>{128, 128, 44}));
  RequestState plain(*model_, nullptr, 2, p);
  EXPECT_EQ(plain.NextInput(512).size(), 300u);
  EXPECT_EQ(plain.NextInput(280).size(), 256u);
  // A chunk that would pass stop_at (a shared prefix's copy point) ends there, and only then.
  EXPECT_EQ(plain.NextInput(512, false, 100).size(), 100u);
  EXPECT_EQ(plain.NextInput(64, false, 100).size(), 64u);
  EXPECT_EQ(plain.NextInput(512, true, 100).size(), 100u);
  EXPECT_EQ(plain.NextInput(512, false, 300).size(), 300u);  // the end: nothing to stop
}

// A request draws on the stepper only without logit processors or a grammar. Its tokens drawn
// there with DrawParams and handed to Accept, with their log-probabilities, are what Sample
// draws and reports from the same logits, and Accept refuses a token before the model has seen
// the context.
TEST_F(GeneratorTest, DrawsOnTheStepperGiveSamplesTokens) {
  GenerationParams p = Params({5, 6, 7, 8, 9}, 6, 0.9f, 4);
  p.sampling.top_p = 0.95f;
  EXPECT_TRUE(RequestState(*model_, nullptr, 1, p).DrawsOnStepper());
  for (int variant = 0; variant < 3; ++variant) {
    GenerationParams q = p;
    if (variant == 0) q.sampling.repetition_penalty = 1.2f;
    if (variant == 1) q.sampling.presence_penalty = 0.5f;
    if (variant == 2) q.sampling.logit_bias = {{3, 1.0f}};
    EXPECT_FALSE(RequestState(*model_, nullptr, 1, q).DrawsOnStepper()) << variant;
  }
  p.logprobs = true;  // drawn with the token on the stepper
  Model inner(*ck_, *backend_, Numerics::kExact), slotted(*ck_, *backend_, Numerics::kExact);
  HostSlotStepper stepper(inner, 1, 8, 8, 128);
  slotted.UseSlots(&stepper);
  RequestState host(*model_, nullptr, 7, p), drawn(slotted, nullptr, 7, p);
  EXPECT_EQ(drawn.Accept(3).code(), ErrorCode::kInternal);  // nothing fed yet
  std::vector<std::pair<int32_t, float>> host_tokens, drawn_tokens;
  std::vector<float> logits(ck_->config.vocab_size);
  auto keep = [](std::vector<std::pair<int32_t, float>>& out) {
    return [&out](const GeneratedToken& t) {
      out.emplace_back(t.token, t.logprob);
      return true;
    };
  };
  for (int step = 0; step < 6; ++step) {
    BatchItem a{&host.seq(), host.NextInput(64), logits.data(), nullptr, true};
    ASSERT_TRUE(model_->ForwardBatch(std::span<BatchItem>(&a, 1)).ok());
    ASSERT_TRUE(host.Sample(logits.data()).ok());
    ASSERT_TRUE(host.Emit(keep(host_tokens)).ok());
    const SampleParams draw = drawn.DrawParams();
    EXPECT_EQ(draw.position, drawn.context().size());
    EXPECT_EQ(draw.stream, 7u);
    EXPECT_EQ(draw.logprob, 1u);
    int32_t token = -1;
    float logprob = 0;
    BatchItem b{&drawn.seq(), drawn.NextInput(64), nullptr, nullptr, true, &draw, nullptr, &token,
                &logprob};
    ASSERT_TRUE(slotted.ForwardBatch(std::span<BatchItem>(&b, 1)).ok());
    ASSERT_TRUE(drawn.Accept(token, logprob).ok());
    ASSERT_TRUE(drawn.Emit(keep(drawn_tokens)).ok());
  }
  EXPECT_EQ(drawn_tokens.size(), 6u);
  EXPECT_EQ(drawn_tokens, host_tokens);
  EXPECT_NE(drawn_tokens.front().second, 0.0f);
}

TEST_F(GeneratorTest, ValidationNamesTheField) {
  Generator g(*model_, tok_.get());
  auto ok = [](const GeneratedToken&) { return true; };
  GenerationParams p = Params({1, 512}, 4, 0);
  EXPECT_NE(g.Run(1, p, ok).status().message().find("prompt"), std::string::npos);
  p = Params({1}, 0, 0);
  EXPECT_NE(g.Run(1, p, ok).status().message().find("max_tokens"), std::string::npos);
  p = Params({1}, 4, 3);
  EXPECT_NE(g.Run(1, p, ok).status().message().find("temperature"), std::string::npos);
  Generator no_tok(*model_, nullptr);
  p = Params({1}, 4, 0);
  p.stop_strings = {"x"};
  EXPECT_NE(no_tok.Run(1, p, ok).status().message().find("tokenizer"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
