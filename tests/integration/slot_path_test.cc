// deepinferd end to end on the slot path (--forward slots; on the CPU the device forward's
// reference stepper, engine/model/host_slot_stepper.h): the engine's tokens are the layers
// forward's, requests must fit their slot, and status reports the slots.
#include <stdlib.h>

#include "tests/integration/daemon_harness.h"

namespace deepinfer {
namespace {

using namespace daemon_testing;  // NOLINT: the harness is this file's vocabulary

// --forward slots (on the CPU, the device forward's reference stepper): more requests than slots,
// prompts longer than a step's budget (so prefill comes in chunks beside decode rows), greedy
// and seeded sampling — every request's tokens are those of the layers forward, whether drawn on
// the stepper (device_sampling, the default) or on the host, with the same log-probabilities
// for a request that asks for them, and slots are reused as requests end.
TEST_F(DaemonTest, TheSlotPathGivesTheLayersForwardsOutputs) {
  std::vector<std::string> statuses;
  auto run = [&](const std::string& sock, std::vector<std::string> flags,
                 const std::string& idle_free) {
    Daemon d(dir_ / "model", sock, flags);
    auto c = client::Client::Connect(sock);
    EXPECT_TRUE(c.ok());
    if (!c.ok()) return std::map<uint64_t, Ended>{};
    for (uint64_t id = 1; id <= 6; ++id) {
      std::vector<int32_t> prompt(3 + 5 * id);
      for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(id * 31 + i * 7);
      auto r = Request(id, prompt, 10);
      r.temperature = id % 2 ? 0.0 : 0.8;
      r.seed = id;
      r.logprobs = id == 4;  // its log-probabilities drawn with its tokens
      EXPECT_TRUE((*c)->Generate(r).ok());
    }
    auto ended = DrainRequests(**c, 6);
    // A request longer than a slot holds is refused on the slot path only (its context): the
    // proof that the steps ran there.
    const bool long_accepted = (*c)->Generate(Request(7, std::vector<int32_t>(126, 5), 8)).ok();
    if (long_accepted) ended[7] = DrainOne(**c);
    // Without max_tokens a request takes what its slot has left (2 positions here) and ends
    // normally instead of overrunning it.
    auto open_ended = Request(8, std::vector<int32_t>(126, 3), 0);
    open_ended.max_tokens.reset();
    EXPECT_TRUE((*c)->Generate(open_ended).ok());
    ended[8] = DrainOne(**c);
    // Status reports the path; once idle, every slot is parked by the request that ended on it.
    const Result<std::string> status = StatusOnceItHas(**c, idle_free);
    EXPECT_TRUE(status.ok());
    if (status.ok()) statuses.push_back(*status);
    return ended;
  };
  const auto layers =
      run(dir_ / "layers.sock", {"--step-token-budget", "8", "--max-tokens-cap", "64"},
          "\"slots_free\":0,");
  const auto slots = run(dir_ / "slots.sock",
                         {"--forward", "slots", "--prefix-cache-bytes", "0", "--batch-requests",
                          "3", "--step-token-budget", "8", "--slot-context", "128",
                          "--max-tokens-cap", "64", "--device-sampling", "on", "--warmup", "off"},
                         "\"slots_parked\":3");
  // The same with every token drawn on the host from the stepper's logits (the seeded requests'
  // draws above were made on the stepper).
  const auto host_draws =
      run(dir_ / "host.sock",
          {"--forward", "slots", "--prefix-cache-bytes", "0", "--batch-requests", "3",
           "--step-token-budget", "8", "--slot-context", "128", "--max-tokens-cap", "64",
           "--device-sampling", "off"},
          "\"slots_parked\":3");
  ASSERT_EQ(layers.size(), 8u);
  ASSERT_EQ(slots.size(), 7u);
  ASSERT_EQ(host_draws.size(), 7u);
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_NE(statuses[0].find("\"stepper_sampled_tokens\":0,"), std::string::npos) << statuses[0];
  EXPECT_EQ(statuses[1].find("\"stepper_sampled_tokens\":0,"), std::string::npos) << statuses[1];
  EXPECT_NE(statuses[2].find("\"stepper_sampled_tokens\":0,"), std::string::npos) << statuses[2];
  // The CPU reference stepper's draws are decided at once: none is made twice.
  EXPECT_NE(statuses[1].find("\"stepper_redrawn_draws\":0,"), std::string::npos) << statuses[1];
  EXPECT_NE(statuses[0].find("\"forward\":\"layers\""), std::string::npos) << statuses[0];
  EXPECT_NE(statuses[0].find("\"slots_total\":0,"), std::string::npos) << statuses[0];
  EXPECT_NE(statuses[1].find("\"forward\":\"slots\""), std::string::npos) << statuses[1];
  // Idle, every slot is parked with the sequence that ended on it (new requests took slots from
  // the parked ones: six requests went through three slots).
  EXPECT_NE(statuses[1].find("\"slots_total\":3,\"slots_free\":0,\"slots_parked\":3"),
            std::string::npos)
      << statuses[1];
  EXPECT_TRUE(EndedDone(slots.at(8)));
  EXPECT_LE(slots.at(8).tokens.size(), 2u);
  for (uint64_t id = 1; id <= 6; ++id) {
    const Ended& r = slots.at(id);
    EXPECT_TRUE(EndedDone(r)) << id;
    EXPECT_FALSE(r.tokens.empty()) << id;
    EXPECT_EQ(r.tokens, layers.at(id).tokens) << "request " << id;
    EXPECT_EQ(host_draws.at(id).tokens, layers.at(id).tokens) << "request " << id;
    EXPECT_EQ(r.logprobs, layers.at(id).logprobs) << "request " << id;
  }
  EXPECT_NE(slots.at(4).logprobs.front(), 0.0f);  // reported, from the stepper's draws too
}

// A conversation's next turn (its prompt: the last prompt, the answer, new tokens) continues on
// the slot parked by the last turn, prefilling only what is new, and its tokens are those of the
// layers forward, which computes the whole prompt.
TEST_F(DaemonTest, TheNextTurnContinuesOnTheParkedSlot) {
  std::vector<int32_t> first(20);
  for (size_t i = 0; i < first.size(); ++i) first[i] = static_cast<int32_t>(11 + 13 * i);
  std::vector<int32_t> next_turn;
  // Two turns on a slot-path daemon: the second turn's tokens and the status after it.
  auto turns = [&](const std::string& sock, const std::string& park) {
    Daemon d(dir_ / "model", sock,
             {"--forward", "slots", "--prefix-cache-bytes", "0", "--batch-requests", "2",
              "--step-token-budget", "8", "--slot-context", "128", "--warmup", "off",
              "--park-slots", park});
    auto c = client::Client::Connect(sock);
    EXPECT_TRUE(c.ok());
    if (!c.ok()) return std::make_pair(std::vector<int32_t>{}, std::string());
    EXPECT_TRUE((*c)->Generate(Request(1, first, 6)).ok());
    const Ended answer = DrainOne(**c);
    EXPECT_TRUE(EndedDone(answer));
    EXPECT_EQ(answer.tokens.size(), 6u);
    next_turn = first;
    next_turn.insert(next_turn.end(), answer.tokens.begin(), answer.tokens.end());
    next_turn.insert(next_turn.end(), {9, 10, 11});
    EXPECT_TRUE((*c)->Generate(Request(2, next_turn, 6)).ok());
    const Ended second = DrainOne(**c);
    EXPECT_TRUE(EndedDone(second));
    // The status once the engine has put the second turn away (its counters follow the events).
    const std::string idle = park == "on" ? "\"slots_free\":1,\"slots_parked\":1"
                                          : "\"slots_free\":2,\"slots_parked\":0";
    const Result<std::string> status = StatusOnceItHas(**c, idle);
    EXPECT_TRUE(status.ok());
    return std::make_pair(second.tokens, status.ok() ? *status : std::string());
  };
  const auto [parked_answer, parked_status] = turns(dir_ / "parked.sock", "on");
  const auto [plain_answer, plain_status] = turns(dir_ / "plain.sock", "off");
  EXPECT_NE(parked_status.find("\"slots_free\":1,\"slots_parked\":1"), std::string::npos)
      << parked_status;
  // The first turn's slot held its 20 prompt tokens and 5 of its 6 answers (the last was never
  // fed): the second turn resumed after 25 tokens. Without parking nothing is resumed or parked.
  EXPECT_NE(parked_status.find("\"prefix_cache_hit_tokens\":25,"), std::string::npos)
      << parked_status;
  EXPECT_NE(plain_status.find("\"prefix_cache_hit_tokens\":0,"), std::string::npos) << plain_status;
  EXPECT_NE(plain_status.find("\"slots_free\":2,\"slots_parked\":0"), std::string::npos)
      << plain_status;
  Daemon layers(dir_ / "model", dir_ / "layers.sock", {"--warmup", "off"});
  auto c = client::Client::Connect(dir_ / "layers.sock");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Generate(Request(2, next_turn, 6)).ok());
  const Ended reference = DrainOne(**c);
  ASSERT_TRUE(EndedDone(reference));
  EXPECT_EQ(parked_answer, reference.tokens);
  EXPECT_EQ(plain_answer, reference.tokens);
}

// A 200-token system prompt made from `salt` (one 128-token boundary inside it), then `own` ids of
// request `id`'s own.
std::vector<int32_t> SystemPrompted(int salt, uint64_t id, size_t own) {
  std::vector<int32_t> p(200);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int32_t>((salt + 13 * i) % 500);
  for (size_t i = 0; i < own; ++i) p.push_back(static_cast<int32_t>((id * 37 + i) % 500));
  return p;
}

// Unrelated requests with one system prompt (200 tokens, so one 128-token boundary inside it):
// the first records its prefixes, the second shares the boundary and leaves a donor there, the
// third and fourth start from copies of the donor — and every request's tokens are the layers
// forward's. Without share_prefixes nothing is shared.
TEST_F(DaemonTest, RequestsSharingASystemPromptStartFromADonor) {
  auto prompt = [](uint64_t id) { return SystemPrompted(7, id, 10 + 5 * id); };
  // Four requests one after another; their tokens and the status once idle.
  auto run = [&](const std::string& sock, std::vector<std::string> flags, const std::string& idle) {
    Daemon d(dir_ / "model", sock, flags);
    auto c = client::Client::Connect(sock);
    EXPECT_TRUE(c.ok());
    std::vector<std::vector<int32_t>> answers;
    if (!c.ok()) return std::make_pair(answers, std::string());
    for (uint64_t id = 1; id <= 4; ++id) {
      EXPECT_TRUE((*c)->Generate(Request(id, prompt(id), 5)).ok());
      const Ended e = DrainOne(**c);
      EXPECT_TRUE(EndedDone(e)) << id;
      answers.push_back(e.tokens);
    }
    const Result<std::string> status = StatusOnceItHas(**c, idle);
    EXPECT_TRUE(status.ok());
    return std::make_pair(answers, status.ok() ? *status : std::string());
  };
  const std::vector<std::string> slots = {
      "--forward",           "slots", "--prefix-cache-bytes", "0",   "--batch-requests", "3",
      "--step-token-budget", "64",    "--slot-context",       "512", "--warmup",         "off"};
  // Idle with sharing: the donor and two parked slots (the last two requests' slots; the
  // copies for requests 3 and 4 each took the slot parked longest ago).
  const std::string shared_idle = "\"slots_free\":0,\"slots_parked\":2,\"slots_shared\":1";
  const auto [shared, shared_status] = run(dir_ / "shared.sock", slots, shared_idle);
  std::vector<std::string> off = slots;
  off.insert(off.end(), {"--share-prefixes", "off"});
  const auto [plain, plain_status] = run(dir_ / "plain.sock", off, "\"slots_parked\":3");
  EXPECT_NE(shared_status.find(shared_idle), std::string::npos) << shared_status;
  // Requests 3 and 4 each resumed 128 tokens from the donor.
  EXPECT_NE(shared_status.find("\"prefix_cache_hit_tokens\":256,"), std::string::npos)
      << shared_status;
  EXPECT_NE(plain_status.find("\"prefix_cache_hit_tokens\":0,"), std::string::npos) << plain_status;
  EXPECT_NE(plain_status.find("\"slots_shared\":0"), std::string::npos) << plain_status;
  Daemon layers(dir_ / "model", dir_ / "layers.sock", {"--warmup", "off"});
  auto c = client::Client::Connect(dir_ / "layers.sock");
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(shared.size(), 4u);
  ASSERT_EQ(plain.size(), 4u);
  for (uint64_t id = 1; id <= 4; ++id) {
    ASSERT_TRUE((*c)->Generate(Request(id, prompt(id), 5)).ok());
    const Ended reference = DrainOne(**c);
    ASSERT_TRUE(EndedDone(reference));
    EXPECT_EQ(shared[id - 1], reference.tokens) << "request " << id;
    EXPECT_EQ(plain[id - 1], reference.tokens) << "request " << id;
  }
}

// The same three requests at once on three slots: the first records the prefix, the second leaves
// the donor while the third waits for it, and the third starts from it (a copy, or the donor
// itself when no slot is left), whatever order the engine sees them in. Tokens: the layers
// forward's.
TEST_F(DaemonTest, ConcurrentRequestsSharingASystemPromptWaitForTheDonor) {
  auto prompt = [](uint64_t id) { return SystemPrompted(5, id, 8 + 3 * id); };
  std::map<uint64_t, Ended> shared;
  {
    Daemon d(dir_ / "model", socket_,
             {"--forward", "slots", "--prefix-cache-bytes", "0", "--batch-requests", "3",
              "--step-token-budget", "64", "--slot-context", "512", "--warmup", "off"});
    auto c = client::Client::Connect(socket_);
    ASSERT_TRUE(c.ok());
    for (uint64_t id = 1; id <= 3; ++id)
      ASSERT_TRUE((*c)->Generate(Request(id, prompt(id), 5)).ok());
    shared = DrainRequests(**c, 3);
    const std::string hits = "\"prefix_cache_hit_tokens\":128,";
    const Result<std::string> status = StatusOnceItHas(**c, hits);
    ASSERT_TRUE(status.ok());
    EXPECT_NE(status->find(hits), std::string::npos) << *status;
  }
  Daemon layers(dir_ / "model", dir_ / "layers.sock", {"--warmup", "off"});
  auto c = client::Client::Connect(dir_ / "layers.sock");
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(shared.size(), 3u);
  for (uint64_t id = 1; id <= 3; ++id) {
    ASSERT_TRUE((*c)->Generate(Request(id, prompt(id), 5)).ok());
    const Ended reference = DrainOne(**c);
    ASSERT_TRUE(EndedDone(reference));
    EXPECT_TRUE(EndedDone(shared.at(id)));
    EXPECT_EQ(shared.at(id).tokens, reference.tokens) << "request " << id;
  }
}

// `deepinfer bench --turns`: each client's requests are one conversation (opening with the
// client's own token), so from the second turn on every request continues its client's parked
// slot. Turn 2 resumes after turn 1's 5 prompt and 3 of its 4 answer tokens (8), turn 3 after
// turn 2's 13 and 3 more (16): 24 a client.
TEST_F(DaemonTest, BenchTurnsContinueTheirParkedSlots) {
  Daemon d(dir_ / "model", socket_,
           {"--forward", "slots", "--prefix-cache-bytes", "0", "--batch-requests", "2",
            "--step-token-budget", "8", "--slot-context", "256", "--warmup", "off"});
  const auto [code, out] = testing::RunCommand(
      kBin + "/deepinfer --socket " + socket_ +
      " bench --clients 2 --requests 3 --turns --prompt-ids 5,6,7,8 --max-tokens 4 "
      "--temperature 0 2>&1");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"failures\": 0,"), std::string::npos) << out;
  EXPECT_NE(out.find("\"tokens\": 24,"), std::string::npos) << out;
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  auto status = (*c)->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_NE(status->find("\"prefix_cache_hit_tokens\":48,"), std::string::npos) << *status;
  // Turns are a closed loop of token ids: an open-loop rate or a text prompt is refused.
  for (const std::string bad : {" bench --turns --rate 5", " bench --turns --prompt hello"}) {
    EXPECT_EQ(system((kBin + "/deepinfer --socket " + socket_ + bad + " >/dev/null 2>&1").c_str()),
              2 << 8)
        << bad;
  }
}

// `deepinfer bench --own-ids`: every prompt is the shared --prompt-ids (200 ids: one 128-token
// boundary) and ids of its own. Of two clients' three requests each, the first two (one a client,
// at once) record the prefix and leave the donor; the four later ones each resume 128 tokens.
TEST_F(DaemonTest, BenchOwnIdsShareThePromptIdsThroughADonor) {
  Daemon d(dir_ / "model", socket_,
           {"--forward", "slots", "--prefix-cache-bytes", "0", "--batch-requests", "3",
            "--step-token-budget", "64", "--slot-context", "512", "--warmup", "off"});
  std::string ids;
  for (int i = 0; i < 200; ++i) ids += (i ? "," : "") + std::to_string((3 + 17 * i) % 500 + 1);
  const auto [code, out] = testing::RunCommand(
      kBin + "/deepinfer --socket " + socket_ + " bench --clients 2 --requests 3 --own-ids 10 " +
      "--prompt-ids " + ids + " --max-tokens 4 --temperature 0 2>&1");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"failures\": 0,"), std::string::npos) << out;
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  const std::string hits = "\"prefix_cache_hit_tokens\":512,";
  const Result<std::string> status = StatusOnceItHas(**c, hits);
  ASSERT_TRUE(status.ok());
  EXPECT_NE(status->find(hits), std::string::npos) << *status;
  // --own-ids follows shared ids: not with a text prompt, nor with --turns.
  for (const std::string bad :
       {" bench --own-ids 3 --prompt hello", " bench --own-ids 3 --turns"}) {
    EXPECT_NE(system((kBin + "/deepinfer --socket " + socket_ + bad + " >/dev/null 2>&1").c_str()),
              0)
        << bad;
  }
}

// A constrained turn whose grammar forces text (jump-forward: tokens appended without being
// sampled) parks only the tokens its slot was fed, and the next turn continues there with the
// layers forward's tokens.
TEST_F(DaemonTest, AForcedTextTurnParksWhatItFed) {
  const std::string wide = WideModel();
  const std::string tok = TestTokenizer();
  auto first = Request(1, {5, 6, 7}, 40);
  first.response_format_json =
      R"({"type": "regex", "regex": "The answer to the question is (yes|no)\\. Thank you\\."})";
  std::vector<int32_t> next_turn;
  std::vector<int32_t> parked_answer;
  std::string status;
  {
    Daemon d(wide, socket_,
             {"--tokenizer", tok, "--forward", "slots", "--batch-requests", "2", "--slot-context",
              "256", "--warmup", "off"});
    auto c = client::Client::Connect(socket_);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Generate(first).ok());
    const Ended answer = DrainOne(**c);
    ASSERT_EQ(answer.end.finish_reason, static_cast<uint16_t>(ipc::FinishReason::kStop));
    next_turn = {5, 6, 7};
    next_turn.insert(next_turn.end(), answer.tokens.begin(), answer.tokens.end());
    next_turn.insert(next_turn.end(), {9, 10});
    ASSERT_TRUE((*c)->Generate(Request(2, next_turn, 4)).ok());
    const Ended second = DrainOne(**c);
    ASSERT_TRUE(EndedDone(second));
    parked_answer = second.tokens;
    auto s = (*c)->GetStatus();
    ASSERT_TRUE(s.ok());
    status = *s;
  }
  // The forced text the grammar completes the turn with is emitted but never fed (the request
  // ends without another step), so the second turn resumes after the prompt and part of the
  // answer, at what the slot holds; its tokens must still be the layers forward's.
  const size_t at = status.find("\"prefix_cache_hit_tokens\":");
  ASSERT_NE(at, std::string::npos) << status;
  const long long resumed = std::stoll(status.substr(at + 26));
  EXPECT_GT(resumed, 3) << status;
  EXPECT_LT(resumed, static_cast<long long>(next_turn.size()) - 2) << status;
  Daemon layers(wide, dir_ / "layers.sock", {"--tokenizer", tok, "--warmup", "off"});
  auto c = client::Client::Connect(dir_ / "layers.sock");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Generate(Request(2, next_turn, 4)).ok());
  const Ended reference = DrainOne(**c);
  ASSERT_TRUE(EndedDone(reference));
  EXPECT_EQ(parked_answer, reference.tokens);
}

// A device fault (on the CPU reference, injected after three steps) fails the request that was
// running with an error after the tokens of the steps before it, and the daemon exits with code 1
// so that systemd restarts it, instead of staying ready and serving only errors.
TEST_F(DaemonTest, ADeviceFaultFailsTheRequestAndStopsTheDaemon) {
  setenv("DEEPINFER_FAULT_AFTER_STEPS", "3", 1);
  Daemon d(dir_ / "model", socket_,
           {"--forward", "slots", "--prefix-cache-bytes", "0", "--batch-requests", "2",
            "--slot-context", "128", "--warmup", "off"});
  unsetenv("DEEPINFER_FAULT_AFTER_STEPS");  // the daemon has its copy
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Generate(Request(1, {5, 6, 7}, 20)).ok());
  const Ended ended = DrainOne(**c);
  EXPECT_EQ(ended.end.kind, static_cast<uint16_t>(ipc::EventKind::kError));
  EXPECT_EQ(ended.tokens.size(), 3u);  // the prefill step's token and two decode steps'
  EXPECT_EQ(d.WaitExit(20), 1);
  // The hook takes step counts only: anything else stops startup with the reason.
  const std::string cmd = "DEEPINFER_FAULT_AFTER_STEPS=soon " + kBin + "/deepinferd --model " +
                          (dir_ / "model") + " --socket " + (dir_ / "bad.sock") +
                          " --tokenizer none --forward slots --prefix-cache-bytes 0 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  EXPECT_NE(pclose(p), 0);
  EXPECT_NE(out.find("DEEPINFER_FAULT_AFTER_STEPS: not a step count"), std::string::npos) << out;
}

}  // namespace
}  // namespace deepinfer
