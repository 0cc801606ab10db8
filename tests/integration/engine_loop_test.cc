// deepinferd end to end, the engine loop: batching, preemption under a tiny cache, the prefix
// cache (exactness, hits, one-token chunks, 48 concurrent requests), fairness, the overlapped and
// plain loops, structured outputs and jump-forward (the slot path: slot_path_test.cc).
#include "tests/integration/daemon_harness.h"

namespace deepinfer {
namespace {

using namespace daemon_testing;  // NOLINT: the harness is this file's vocabulary

// Several requests of one client run in the same batches; each gets its own tokens, and a
// request's greedy output does not depend on what runs beside it.
TEST_F(DaemonTest, ConcurrentRequestsOfOneClientAreBatched) {
  Daemon d(dir_ / "model", socket_);
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  for (uint64_t id = 1; id <= 6; ++id) {
    ASSERT_TRUE((*c)->Generate(Request(id, {static_cast<int32_t>(id), 5, 9}, 10 + id)).ok());
  }
  auto ended = DrainRequests(**c, 6);
  for (uint64_t id = 1; id <= 6; ++id) {
    EXPECT_TRUE(EndedDone(ended[id])) << "request " << id;
    ASSERT_EQ(ended[id].tokens.size(), 10 + id) << "request " << id;
    EXPECT_EQ(ended[id].tokens[0], ReferenceNext({static_cast<int32_t>(id), 5, 9}));
  }
  // Alone, request 3 produces the same greedy sequence.
  ASSERT_TRUE((*c)->Generate(Request(30, {3, 5, 9}, 13)).ok());
  EXPECT_EQ(Drain(**c).first, ended[3].tokens);
}

// A cache budget for about two sequences and six concurrent requests: the newest step aside and
// are recomputed later, every request completes, and the output is exactly what it is alone.
TEST_F(DaemonTest, PreemptionUnderATinyCacheKeepsOutputsExact) {
  Daemon d(dir_ / "model", socket_, {"--cache-memory-bytes", "900K"});
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  for (uint64_t id = 1; id <= 6; ++id) {
    ASSERT_TRUE((*c)->Generate(Request(id, {static_cast<int32_t>(id), 7, 8, 9}, 30)).ok());
  }
  auto ended = DrainRequests(**c, 6);
  for (uint64_t id = 1; id <= 6; ++id) {
    EXPECT_TRUE(EndedDone(ended[id])) << "request " << id;
    EXPECT_EQ(ended[id].end.finish_reason, static_cast<uint16_t>(ipc::FinishReason::kLength));
  }
  auto status = (*c)->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->find("\"preemptions\":0"), std::string::npos) << *status;
  for (uint64_t id = 1; id <= 6; ++id) {
    ASSERT_TRUE((*c)->Generate(Request(100 + id, {static_cast<int32_t>(id), 7, 8, 9}, 30)).ok());
    EXPECT_EQ(Drain(**c).first, ended[id].tokens) << "request " << id;
  }
}

// Structured outputs in the loop: every sampled token is allowed by the grammar, and the request
// ends when the grammar is complete.
TEST_F(DaemonTest, ResponseFormatConstrainsTheOutput) {
  const std::string tok = TestTokenizer();
  Daemon d(dir_ / "model", socket_, {"--tokenizer", tok});
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  auto run = [&](uint64_t id, const std::string& format, double temperature) {
    auto r = Request(id, {5, 6, 7}, 40);
    r.temperature = temperature;
    r.seed = id;
    r.response_format_json = format;
    auto accepted = (*c)->Generate(r);
    EXPECT_TRUE(accepted.ok()) << accepted.status().ToString();
    const Ended e = DrainOne(**c);
    return std::make_pair(e.text, e.end.finish_reason);
  };
  for (uint64_t id = 1; id <= 3; ++id) {
    auto [text, reason] = run(id, R"({"type": "regex", "regex": "[a-z]{3}-[0-9]{2}"})", 1.0);
    EXPECT_EQ(reason, static_cast<uint16_t>(ipc::FinishReason::kStop)) << text;
    EXPECT_EQ(text.size(), 6u) << text;
    EXPECT_TRUE(text.size() == 6 && std::islower(text[0]) && text[3] == '-' &&
                std::isdigit(text[5]))
        << text;
  }
  auto [json, reason] = run(9,
                            R"({"type": "json_schema", "json_schema": {"schema": )"
                            R"({"type": "object", "properties": {"ok": {"type": "boolean"}}, )"
                            R"("required": ["ok"], "additionalProperties": false}}})",
                            0.0);
  EXPECT_TRUE(json == "{\"ok\":true}" || json == "{\"ok\":false}") << json;
  // A broken constraint is a typed error before anything runs.
  auto bad = Request(20, {1}, 4);
  bad.response_format_json = R"({"type": "regex", "regex": "(a"})";
  EXPECT_FALSE((*c)->Generate(bad).ok());
}

// Constrained requests drawn on the stepper (the slot path with device_sampling on): each draw
// goes with its grammar's mask, and the outputs — sampled and greedy, with the grammar's forced
// '-' in between — are the layers path's, whose draws are the host's.
TEST_F(DaemonTest, ConstrainedDrawsOnTheStepperFollowTheGrammar) {
  const std::string tok = TestTokenizer();
  auto run = [&](const std::string& sock, std::vector<std::string> flags) {
    flags.insert(flags.end(), {"--tokenizer", tok});
    Daemon d(dir_ / "model", sock, flags);
    auto c = client::Client::Connect(sock);
    std::vector<std::string> texts;
    EXPECT_TRUE(c.ok());
    if (!c.ok()) return std::make_pair(texts, std::string());
    // All four at once, so steps carry two masked draws (two slots).
    for (uint64_t id = 1; id <= 4; ++id) {
      auto r = Request(id, {5, 6, static_cast<int32_t>(id)}, 40);
      r.temperature = id % 2 ? 1.0 : 0.0;
      r.seed = id;
      r.response_format_json = R"({"type": "regex", "regex": "[a-z]{3}-[0-9]{2}"})";
      EXPECT_TRUE((*c)->Generate(r).ok());
    }
    for (const auto& [id, ended] : DrainRequests(**c, 4)) texts.push_back(ended.text);
    const auto status = (*c)->GetStatus();
    return std::make_pair(texts, status.ok() ? *status : std::string());
  };
  const auto [layers, layers_status] = run(dir_ / "layers.sock", {"--warmup", "off"});
  // No warm-up: every token the stepper draws is a constrained request's.
  const auto [slots, slots_status] =
      run(dir_ / "slots.sock",
          {"--forward", "slots", "--prefix-cache-bytes", "0", "--batch-requests", "2",
           "--slot-context", "128", "--device-sampling", "on", "--warmup", "off"});
  ASSERT_EQ(slots.size(), 4u);
  EXPECT_EQ(slots, layers);
  for (const std::string& text : slots) {
    EXPECT_TRUE(text.size() == 6 && std::islower(text[0]) && text[3] == '-') << text;
  }
  EXPECT_EQ(slots_status.find("\"stepper_sampled_tokens\":0,"), std::string::npos) << slots_status;
}

// More distinct response formats than the daemon's grammar cache holds (256): the cache starts
// over, and every request — the one that overflows it included — is still constrained.
TEST_F(DaemonTest, GrammarCacheOverflowKeepsRequestsConstrained) {
  const std::string tok = TestTokenizer();
  Daemon d(dir_ / "model", socket_, {"--tokenizer", tok});
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 260; ++i) {
    auto r = Request(static_cast<uint64_t>(i + 1), {5, 6, 7}, 8);
    r.temperature = 0;
    // Distinct formats (the client sends its JSON minified, so they must differ in content) for
    // one language: four digits followed by i empty groups.
    r.response_format_json =
        R"({"type": "regex", "regex": "[0-9]{4}(){)" + std::to_string(i) + R"(}"})";
    ASSERT_TRUE((*c)->Generate(r).ok()) << i;
    const std::string text = DrainOne(**c).text;
    ASSERT_EQ(text.size(), 4u) << "request " << i << ": " << text;
    for (char ch : text) ASSERT_TRUE(ch >= '0' && ch <= '9') << "request " << i << ": " << text;
  }
}

// Text the grammar forces is appended as tokens and fed as one chunk: fewer model steps than
// tokens, and the text is exactly the constrained one. Needs a model whose rows cover the
// tokenizer's ids (the demo's shape: 129,280 rows, hidden 64).
TEST_F(DaemonTest, JumpForwardInsertsForcedTextWithoutModelSteps) {
  const std::string wide = WideModel();
  const std::string tok = TestTokenizer();
  Daemon d(wide, socket_, {"--tokenizer", tok});
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  auto counter = [&](const std::string& name) {
    auto status = (*c)->GetStatus();
    EXPECT_TRUE(status.ok());
    const size_t at = status->find("\"" + name + "\":");
    EXPECT_NE(at, std::string::npos) << *status;
    return std::stoll(status->substr(at + name.size() + 3));
  };
  const long long steps0 = counter("engine_steps"), tokens0 = counter("tokens_served");
  auto r = Request(1, {5, 6, 7}, 40);
  r.temperature = 0;
  r.response_format_json =
      R"({"type": "regex", "regex": "The answer to the question is (yes|no)\\. Thank you\\."})";
  ASSERT_TRUE((*c)->Generate(r).ok());
  const Ended answer = DrainOne(**c);
  EXPECT_EQ(answer.end.finish_reason, static_cast<uint16_t>(ipc::FinishReason::kStop));
  const std::string& text = answer.text;
  EXPECT_TRUE(text == "The answer to the question is yes. Thank you." ||
              text == "The answer to the question is no. Thank you.")
      << text;
  const long long steps = counter("engine_steps") - steps0;
  const long long tokens = counter("tokens_served") - tokens0;
  EXPECT_GE(tokens, 10) << "the forced words are tokens of the output";
  EXPECT_LE(steps, 4) << steps << " steps for " << tokens << " tokens";
  // A constraint that forces the whole output: the first sample can only be EOS, and the forced
  // text before it is still the output.
  auto fixed = Request(2, {5, 6, 7}, 40);
  fixed.response_format_json =
      R"({"type": "json_schema", "json_schema": {"schema": {"const": "all systems nominal"}}})";
  ASSERT_TRUE((*c)->Generate(fixed).ok());
  const Ended whole = DrainOne(**c);
  EXPECT_EQ(whole.end.finish_reason, static_cast<uint16_t>(ipc::FinishReason::kStop));
  EXPECT_EQ(whole.text, R"("all systems nominal")");
}

// A step budget of one token makes every prefill chunk one token long; the chunk that ends on
// the 128-token boundary still leaves a snapshot, and a later request sharing the block hits it.
TEST_F(DaemonTest, OneTokenPrefillChunksStillFillThePrefixCache) {
  Daemon d(dir_ / "model", socket_, {"--step-token-budget", "1"});
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  std::vector<int32_t> prompt;
  for (int t = 0; t < 130; ++t) prompt.push_back((t * 31 + 5) % 512);
  ASSERT_TRUE((*c)->Generate(Request(1, prompt, 2)).ok());
  Drain(**c);
  prompt.back() = (prompt.back() + 1) % 512;
  ASSERT_TRUE((*c)->Generate(Request(2, prompt, 2)).ok());
  Drain(**c);
  auto status = (*c)->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_NE(status->find("\"prefix_cache_hit_tokens\":128"), std::string::npos) << *status;
}

// The overlapped loop (masks and new requests prepared while the model runs) and the plain one
// (--no-overlap) give the same tokens for a batch mixing greedy, seeded and grammar requests;
// status reports the mode and the step timing.
TEST_F(DaemonTest, OverlappedAndPlainLoopsGiveTheSameOutputs) {
  const std::string tok = TestTokenizer();
  auto run = [&](const std::string& sock, std::vector<std::string> flags) {
    flags.insert(flags.end(), {"--tokenizer", tok});
    Daemon d(dir_ / "model", sock, flags);
    auto c = client::Client::Connect(sock);
    EXPECT_TRUE(c.ok());
    if (!c.ok()) return std::make_pair(std::map<uint64_t, Ended>{}, std::string());
    for (uint64_t id = 1; id <= 8; ++id) {
      auto r = Request(id, {static_cast<int32_t>(id), 7, 9, static_cast<int32_t>(3 * id)}, 12);
      r.temperature = id % 2 ? 0.0 : 0.9;
      r.seed = id;
      if (id % 4 == 1) r.response_format_json = R"({"type": "regex", "regex": "[a-z]{4}-[0-9]+"})";
      if (id % 4 == 2) r.response_format_json = R"({"type": "json_object"})";
      EXPECT_TRUE((*c)->Generate(r).ok());
    }
    auto ended = DrainRequests(**c, 8);
    // Short prompts leave no snapshots: once idle, every pool block is back in the free list.
    const Result<std::string> status = StatusOnceItHas(**c, "\"kv_blocks_in_use\":0,");
    EXPECT_TRUE(status.ok());
    return std::make_pair(ended, status.ok() ? *status : std::string());
  };
  const auto [overlapped, status_on] = run(dir_ / "on.sock", {});
  const auto [plain, status_off] = run(dir_ / "off.sock", {"--no-overlap"});
  ASSERT_EQ(overlapped.size(), 8u);
  for (const auto& [id, r] : overlapped) {
    EXPECT_TRUE(EndedDone(r)) << id;
    EXPECT_FALSE(r.tokens.empty()) << id;
    EXPECT_EQ(r.tokens, plain.at(id).tokens) << "request " << id;
  }
  EXPECT_NE(status_on.find("\"overlap\":true"), std::string::npos) << status_on;
  EXPECT_NE(status_off.find("\"overlap\":false"), std::string::npos) << status_off;
  EXPECT_NE(status_on.find("\"step_forward_us_avg\""), std::string::npos) << status_on;
  EXPECT_NE(status_on.find("\"idle_gap_us_avg\""), std::string::npos) << status_on;
  EXPECT_NE(status_on.find("\"kv_blocks_in_use\":0,"), std::string::npos) << status_on;
}

// A second request sharing a 300-token prefix resumes from the cached 256-token snapshot and
// produces exactly what it produces with the cache off.
TEST_F(DaemonTest, PrefixCacheHitsAndKeepsOutputsExact) {
  std::vector<int32_t> prefix;
  for (int i = 0; i < 300; ++i) prefix.push_back((i * 37 + 11) % 512);
  auto with_suffix = [&](std::vector<int32_t> tail) {
    auto p = prefix;
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  std::vector<int32_t> out_cached, out_plain;
  {
    Daemon d(dir_ / "model", socket_);
    auto c = client::Client::Connect(socket_);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Generate(Request(1, with_suffix({1, 2}), 4)).ok());
    Drain(**c);
    ASSERT_TRUE((*c)->Generate(Request(2, with_suffix({3, 4, 5}), 8)).ok());
    out_cached = Drain(**c).first;
    auto status = (*c)->GetStatus();
    ASSERT_TRUE(status.ok());
    EXPECT_NE(status->find("\"prefix_cache_hit_tokens\":256"), std::string::npos) << *status;
    // The snapshots hold pool blocks of compressed rows after the requests are gone.
    EXPECT_EQ(status->find("\"kv_blocks_in_use\":0,"), std::string::npos) << *status;
    EXPECT_NE(status->find("\"kv_blocks_in_use\":"), std::string::npos) << *status;
  }
  {
    const std::string sock2 = dir_ / "plain.sock";
    Daemon d(dir_ / "model", sock2, {"--prefix-cache-bytes", "0"});
    auto c = client::Client::Connect(sock2);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Generate(Request(2, with_suffix({3, 4, 5}), 8)).ok());
    out_plain = Drain(**c).first;
  }
  EXPECT_EQ(out_cached, out_plain);
}

// The engine issue's acceptance run: 48 concurrent greedy requests (prompts of 150-290 tokens in
// four families sharing a 140-token prefix, 12 new tokens each) return exactly what each returns
// alone on a daemon without the prefix cache, first tokens are the reference's greedy choice, and
// requests that arrive together share their common prefix through the cache.
TEST_F(DaemonTest, FortyEightConcurrentRequestsEqualAloneAndSharePrefixes) {
  constexpr int kRequests = 48;
  std::vector<std::vector<int32_t>> prompts(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    const int family = i % 4;
    for (int t = 0; t < 140; ++t) prompts[i].push_back((t * 53 + family * 97 + 3) % 512);
    const int length = 150 + (i * 37) % 141;
    for (int t = 140; t < length; ++t) prompts[i].push_back((t * 29 + i * 71 + 1) % 512);
  }
  std::map<uint64_t, Ended> together;  // by request id: prompt i is request i + 1
  {
    Daemon d(dir_ / "model", socket_, {"--threads", "2", "--max-requests-per-client", "64"});
    auto c = client::Client::Connect(socket_);
    ASSERT_TRUE(c.ok());
    for (int i = 0; i < kRequests; ++i) {
      auto accepted = (*c)->Generate(Request(static_cast<uint64_t>(i + 1), prompts[i], 12));
      ASSERT_TRUE(accepted.ok()) << i << " " << accepted.status().ToString();
    }
    together = DrainRequests(**c, kRequests);
    auto status = (*c)->GetStatus();
    ASSERT_TRUE(status.ok());
    // Each family's first request computes the 128-token block; the other 44 resume from it.
    EXPECT_NE(status->find("\"prefix_cache_hit_tokens\":5632"), std::string::npos) << *status;
  }
  const std::string sock2 = dir_ / "alone.sock";
  Daemon d(dir_ / "model", sock2, {"--prefix-cache-bytes", "0"});
  auto c = client::Client::Connect(sock2);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE((*c)->Generate(Request(static_cast<uint64_t>(100 + i), prompts[i], 12)).ok());
    const Ended& got = together[static_cast<uint64_t>(i + 1)];
    EXPECT_TRUE(EndedDone(got)) << "request " << i;
    EXPECT_EQ(Drain(**c).first, got.tokens) << "request " << i;
    ASSERT_FALSE(got.tokens.empty());
    EXPECT_EQ(got.tokens[0], ReferenceNext(prompts[i])) << "request " << i;
  }
}

// Fairness across clients: with two batch slots, one client's burst of 16 requests does not hold
// a second client's request back until the burst is through; the second client gets the next
// free slot.
TEST_F(DaemonTest, AFreeSlotGoesToTheClientWithFewestRunning) {
  Daemon d(dir_ / "model", socket_, {"--batch-requests", "2"});
  auto a = client::Client::Connect(socket_);
  auto b = client::Client::Connect(socket_);
  ASSERT_TRUE(a.ok() && b.ok());
  constexpr int kBurst = 16;
  for (int i = 0; i < kBurst; ++i) {
    ASSERT_TRUE((*a)->Generate(Request(static_cast<uint64_t>(i + 1), {1, 2, 3 + i}, 20)).ok());
  }
  ASSERT_TRUE((*b)->Generate(Request(1, {9, 8, 7}, 20)).ok());
  std::atomic<int> a_done{0};
  int a_done_when_b_ended = -1;
  std::thread reader_b([&] {
    auto [tokens, end] = Drain(**b);
    EXPECT_EQ(tokens.size(), 20u);
    a_done_when_b_ended = a_done.load();
  });
  for (int open = kBurst; open > 0;) {
    auto ev = (*a)->NextEvent(60s);
    ASSERT_TRUE(ev.ok() && ev->has_value());
    if ((*ev)->kind == static_cast<uint16_t>(ipc::EventKind::kDone)) {
      a_done.fetch_add(1);
      --open;
    }
  }
  reader_b.join();
  // First come, first served alone would run all 16 first; fair sharing admits b's request as
  // soon as a's first request ends, and it ends within the following wave.
  EXPECT_GE(a_done_when_b_ended, 0);
  EXPECT_LE(a_done_when_b_ended, 4);
}

}  // namespace
}  // namespace deepinfer
