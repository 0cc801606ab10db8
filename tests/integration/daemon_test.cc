// deepinferd end to end: the daemon runs on a temporary socket with a tiny model and is driven
// through the client library and the CLI — concurrent clients, a client killed mid-stream, broken
// frames, a version mismatch, a slow reader and SIGTERM with requests in flight.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "client/client.h"
#include "engine/model/model.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

const std::string kBin = DEEPINFER_BIN_DIR;

class Daemon {
 public:
  Daemon(const std::string& model, const std::string& socket, std::vector<std::string> extra = {})
      : socket_(socket) {
    std::vector<std::string> args = {
        kBin + "/deepinferd", "--model", model,         "--socket", socket, "--tokenizer", "none",
        "--threads",          "1",       "--log-level", "warn"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 200; ++i) {  // up to 20 s for load and warm-up
      if (client::Client::Connect(socket_).ok()) return;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "deepinferd did not come up";
  }
  ~Daemon() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // SIGTERM; returns the exit status and how long it took.
  std::pair<int, double> Terminate() {
    const auto t0 = std::chrono::steady_clock::now();
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  }
  bool alive() const { return pid_ > 0 && kill(pid_, 0) == 0; }

 private:
  std::string socket_;
  pid_t pid_ = -1;
};

ipc::GenerateRequest Request(uint64_t id, std::vector<int32_t> prompt, int64_t max_tokens) {
  ipc::GenerateRequest r;
  r.id = id;
  r.prompt_kind = ipc::PromptKind::kIds;
  r.prompt_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.temperature = 0;
  return r;
}

// Reads a request's events to its end; returns the tokens and the final event.
std::pair<std::vector<int32_t>, ipc::TokenEvent> Drain(client::Client& c) {
  std::vector<int32_t> tokens;
  for (;;) {
    auto ev = c.NextEvent(30s);
    EXPECT_TRUE(ev.ok() && ev->has_value());
    if (!ev.ok() || !*ev) return {tokens, {}};
    if ((*ev)->kind == static_cast<uint16_t>(ipc::EventKind::kToken))
      tokens.push_back((*ev)->token);
    if ((*ev)->kind == static_cast<uint16_t>(ipc::EventKind::kDone) ||
        (*ev)->kind == static_cast<uint16_t>(ipc::EventKind::kError)) {
      return {tokens, **ev};
    }
  }
}

struct Ended {
  std::vector<int32_t> tokens;
  ipc::TokenEvent end;  // the request's final event (done or error)
};

// Reads events until `count` requests have ended; keyed by request id.
std::map<uint64_t, Ended> DrainRequests(client::Client& c, int count) {
  std::map<uint64_t, Ended> out;
  for (int open = count; open > 0;) {
    auto ev = c.NextEvent(60s);
    EXPECT_TRUE(ev.ok() && ev->has_value());
    if (!ev.ok() || !*ev) break;
    const auto& e = **ev;
    if (e.kind == static_cast<uint16_t>(ipc::EventKind::kToken))
      out[e.request_id].tokens.push_back(e.token);
    if (e.kind == static_cast<uint16_t>(ipc::EventKind::kDone) ||
        e.kind == static_cast<uint16_t>(ipc::EventKind::kError)) {
      out[e.request_id].end = e;
      --open;
    }
  }
  return out;
}

bool EndedDone(const Ended& r) {
  return r.end.kind == static_cast<uint16_t>(ipc::EventKind::kDone);
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeTinyCheckpoint(TinySpec{}, dir_ / "model").ok());
    socket_ = dir_ / "d.sock";
  }
  int32_t ReferenceNext(const std::vector<int32_t>& prompt) {
    auto ck = LoadCheckpoint(dir_ / "model");
    auto be = MakeCpuBackend(1);
    Model m(**ck, *be, Numerics::kExact);
    std::vector<float> logits(prompt.size() * 512);
    auto seq = m.NewSequence();
    EXPECT_TRUE(m.Forward(seq, prompt, logits.data(), nullptr).ok());
    const float* last = &logits[(prompt.size() - 1) * 512];
    return static_cast<int32_t>(std::max_element(last, last + 512) - last);
  }
  TempDir dir_;
  std::string socket_;
};

TEST_F(DaemonTest, ConcurrentClientsGetTheReferenceGreedyToken) {
  Daemon d(dir_ / "model", socket_);
  constexpr int kClients = 24;
  std::vector<std::vector<int32_t>> prompts(kClients);
  std::vector<int32_t> got(kClients, -1);
  for (int i = 0; i < kClients; ++i) prompts[i] = {1 + i, 7 * i % 512, 3, (i * 37) % 512};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto c = client::Client::Connect(socket_);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      ASSERT_TRUE((*c)->Generate(Request(1, prompts[i], 1)).ok());
      auto [tokens, done] = Drain(**c);
      ASSERT_EQ(tokens.size(), 1u);
      EXPECT_EQ(done.finish_reason, static_cast<uint16_t>(ipc::FinishReason::kLength));
      got[i] = tokens[0];
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(got[i], ReferenceNext(prompts[i])) << "client " << i;
  // The CLI prints the same token.
  FILE* p = popen((kBin + "/deepinfer --socket " + socket_ +
                   " generate --prompt-ids 1,0,3,0 "
                   "--max-tokens 1 --temperature 0 --format ids")
                      .c_str(),
                  "r");
  char buf[64] = {};
  ASSERT_NE(fgets(buf, sizeof(buf), p), nullptr);
  EXPECT_EQ(pclose(p), 0);
  EXPECT_EQ(std::stoi(buf), ReferenceNext({1, 0, 3, 0}));
}

TEST_F(DaemonTest, BrokenFramesAndVersionMismatchDoNotDisturbOthers) {
  Daemon d(dir_ / "model", socket_);
  auto good = client::Client::Connect(socket_);
  ASSERT_TRUE(good.ok());
  for (std::string garbage :
       {std::string("\xff\xff\xff\xff garbage"), std::string("\x05\x00\x00\x00{\"op", 9),
        std::string("\x02\x00\x00\x00[]", 6), std::string(1000, '\0')}) {
    auto raw = client::Client::Connect(socket_);
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE((*raw)->SendRaw(garbage).ok());
  }
  // Random bytes on fresh connections, before any hello.
  for (int i = 0; i < 20; ++i) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    std::string junk(64 + i * 13, '\0');
    for (auto& ch : junk) ch = static_cast<char>(rand());
    (void)!write(fd, junk.data(), junk.size());
    close(fd);
  }
  // A bad request on a good connection is a typed error, and the connection stays usable.
  auto bad = (*good)->Generate(Request(5, {1, 99999}, 1));
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("invalid_argument"), std::string::npos)
      << bad.status().ToString();
  ASSERT_TRUE((*good)->Generate(Request(6, {1, 2}, 2)).ok());
  EXPECT_EQ(Drain(**good).first.size(), 2u);
  // Version mismatch: a typed refusal.
  {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    const std::string hello = ipc::EncodeFrame("{\"op\": \"hello\", \"protocol\": 99}");
    ASSERT_EQ(write(fd, hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
    std::string reply(4096, '\0');
    const ssize_t n = read(fd, reply.data(), reply.size());
    ASSERT_GT(n, 4);
    EXPECT_NE(reply.find("version_mismatch"), std::string::npos);
    close(fd);
  }
  auto status = (*good)->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_NE(status->find("\"bad_frames\""), std::string::npos);
  EXPECT_TRUE(d.alive());
}

TEST_F(DaemonTest, KilledClientIsCleanedUpAndOthersContinue) {
  Daemon d(dir_ / "model", socket_);
  pid_t child = fork();
  if (child == 0) {
    auto c = client::Client::Connect(socket_);
    if (!c.ok() || !(*c)->Generate(Request(1, {1, 2, 3}, 100000)).ok()) _exit(1);
    for (;;) (void)(*c)->NextEvent(1s);
  }
  std::this_thread::sleep_for(500ms);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Generate(Request(2, {4, 5}, 3)).ok());
  EXPECT_EQ(Drain(**c).first.size(), 3u);
  // The dead client's request was cancelled: nothing stays in flight.
  for (int i = 0; i < 50; ++i) {
    auto s = (*c)->GetStatus();
    if (s.ok() && (s->find("\"in_flight_requests\":0") != std::string::npos ||
                   s->find("\"in_flight_requests\": 0") != std::string::npos)) {
      return;
    }
    std::this_thread::sleep_for(100ms);
  }
  ADD_FAILURE() << "the killed client's request is still in flight";
}

TEST_F(DaemonTest, SlowReaderEndsAsClientTooSlow) {
  Daemon d(dir_ / "model", socket_, {"--event-ring-slots", "16", "--max-backlog-events", "8"});
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Generate(Request(1, {1, 2}, 500)).ok());
  std::this_thread::sleep_for(3s);  // never read while the engine produces
  auto [tokens, done] = Drain(**c);
  EXPECT_LT(tokens.size(), 500u);
  EXPECT_EQ(done.finish_reason, static_cast<uint16_t>(ipc::FinishReason::kClientTooSlow));
  ASSERT_TRUE((*c)->Generate(Request(2, {1, 2}, 2)).ok());  // the connection still works
  EXPECT_EQ(Drain(**c).first.size(), 2u);
}

TEST_F(DaemonTest, SigtermDrainsAndExitsZero) {
  Daemon d(dir_ / "model", socket_, {"--drain-timeout-seconds", "2"});
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Generate(Request(1, {1, 2}, 30000)).ok());
  std::this_thread::sleep_for(300ms);
  auto [code, seconds] = d.Terminate();
  EXPECT_EQ(code, 0);
  EXPECT_LT(seconds, 15.0);
}

// Ctrl-C in the CLI cancels its request: the daemon stops generating for it.
TEST_F(DaemonTest, CtrlCInTheCliCancelsTheRequest) {
  Daemon d(dir_ / "model", socket_);
  pid_t cli = fork();
  if (cli == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    execl((kBin + "/deepinfer").c_str(), "deepinfer", "--socket", socket_.c_str(), "generate",
          "--prompt-ids", "1,2,3", "--max-tokens", "30000", "--format", "ids", nullptr);
    _exit(127);
  }
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  auto in_flight = [&] {
    auto s = (*c)->GetStatus();
    return s.ok() && (s->find("\"in_flight_requests\":1") != std::string::npos ||
                      s->find("\"in_flight_requests\": 1") != std::string::npos);
  };
  for (int i = 0; i < 100 && !in_flight(); ++i) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(in_flight());
  kill(cli, SIGINT);
  int status = 0;
  waitpid(cli, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_TRUE((*c)->Generate(Request(9, {3, 4}, 2)).ok());  // runs only once the other ended
  EXPECT_EQ(Drain(**c).first.size(), 2u);
}

TEST_F(DaemonTest, CancelThroughTheSubmissionRing) {
  Daemon d(dir_ / "model", socket_);
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Generate(Request(3, {1, 2}, 30000)).ok());
  auto first = (*c)->NextEvent(10s);
  ASSERT_TRUE(first.ok() && first->has_value());
  ASSERT_TRUE((*c)->CancelViaRing(3).ok());
  auto [tokens, done] = Drain(**c);
  EXPECT_LT(tokens.size(), 30000u);
  EXPECT_EQ(done.finish_reason, static_cast<uint16_t>(ipc::FinishReason::kCancelled));
}

TEST_F(DaemonTest, SeededSamplingIsReproducible) {
  Daemon d(dir_ / "model", socket_);
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  auto run = [&](uint64_t id, uint64_t seed) {
    auto r = Request(id, {1, 2, 3}, 12);
    r.temperature = 1.0;
    r.seed = seed;
    EXPECT_TRUE((*c)->Generate(r).ok());
    return Drain(**c).first;
  };
  const auto a = run(1, 42);
  run(2, 7);  // other traffic in between does not matter
  EXPECT_EQ(run(3, 42), a);
  EXPECT_NE(run(4, 43), a);
}

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
  const std::string tok = std::string(DEEPINFER_SOURCE_DIR) + "/deps/tokenizer-v4-test";
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
    std::string text;
    for (;;) {
      auto ev = (*c)->NextEvent(30s);
      if (!ev.ok() || !*ev) return std::make_pair(text, uint16_t{0});
      if ((*ev)->kind == static_cast<uint16_t>(ipc::EventKind::kToken) ||
          (*ev)->kind == static_cast<uint16_t>(ipc::EventKind::kText)) {
        text.append((*ev)->text, (*ev)->text_len);
      } else {
        return std::make_pair(text, (*ev)->finish_reason);
      }
    }
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

// --device cuda without a GPU: the daemon refuses to start and says why (never a silent CPU run).
TEST_F(DaemonTest, CudaDeviceWithoutAGpuFailsToStart) {
  if (std::filesystem::exists("/dev/nvidiactl")) GTEST_SKIP() << "a GPU is present";
  const std::string cmd = kBin + "/deepinferd --model " + (dir_ / "model") + " --socket " +
                          socket_ + " --tokenizer none --device cuda 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof(buf), p)) out += buf;
  const int status = pclose(p);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("CUDA"), std::string::npos) << out;
}

// Text the grammar forces is appended as tokens and fed as one chunk: fewer model steps than
// tokens, and the text is exactly the constrained one. Needs a model whose rows cover the
// tokenizer's ids (the demo's shape: 129,280 rows, hidden 64).
TEST_F(DaemonTest, JumpForwardInsertsForcedTextWithoutModelSteps) {
  TinySpec spec;
  spec.vocab = 129280;
  spec.hidden = 64;
  spec.quantize = "fp8-fp4";
  ASSERT_TRUE(MakeTinyCheckpoint(spec, dir_ / "wide").ok());
  const std::string tok = std::string(DEEPINFER_SOURCE_DIR) + "/deps/tokenizer-v4-test";
  Daemon d(dir_ / "wide", socket_, {"--tokenizer", tok});
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
  std::string text;
  for (;;) {
    auto ev = (*c)->NextEvent(30s);
    ASSERT_TRUE(ev.ok() && *ev);
    if ((*ev)->kind == static_cast<uint16_t>(ipc::EventKind::kToken) ||
        (*ev)->kind == static_cast<uint16_t>(ipc::EventKind::kText)) {
      text.append((*ev)->text, (*ev)->text_len);
      continue;
    }
    EXPECT_EQ((*ev)->finish_reason, static_cast<uint16_t>(ipc::FinishReason::kStop));
    break;
  }
  EXPECT_TRUE(text == "The answer to the question is yes. Thank you." ||
              text == "The answer to the question is no. Thank you.")
      << text;
  const long long steps = counter("engine_steps") - steps0;
  const long long tokens = counter("tokens_served") - tokens0;
  EXPECT_GE(tokens, 10) << "the forced words are tokens of the output";
  EXPECT_LE(steps, 4) << steps << " steps for " << tokens << " tokens";
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
  const std::string tok = std::string(DEEPINFER_SOURCE_DIR) + "/deps/tokenizer-v4-test";
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
    Result<std::string> status = std::string();
    for (int i = 0; i < 100; ++i) {
      status = (*c)->GetStatus();
      if (!status.ok() || status->find("\"kv_blocks_in_use\":0,") != std::string::npos) break;
      std::this_thread::sleep_for(20ms);
    }
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

// Under systemd socket activation the daemon adopts the listening socket it is given.
TEST_F(DaemonTest, SocketActivation) {
  const std::string sock = dir_ / "activated.sock";
  pid_t pid = fork();
  if (pid == 0) {
    execl("/usr/bin/systemd-socket-activate", "systemd-socket-activate", "-l", sock.c_str(),
          (kBin + "/deepinferd").c_str(), "--model", (dir_ / "model").c_str(), "--tokenizer",
          "none", "--threads", "1", "--log-level", "warn", nullptr);
    _exit(127);
  }
  std::unique_ptr<client::Client> c;
  for (int i = 0; i < 200 && !c; ++i) {
    auto r = client::Client::Connect(sock);
    if (r.ok())
      c = std::move(r).value();
    else
      std::this_thread::sleep_for(100ms);
  }
  ASSERT_NE(c, nullptr) << "no daemon behind the activated socket";
  ASSERT_TRUE(c->Generate(Request(1, {1, 2, 3}, 1)).ok());
  auto [tokens, done] = Drain(*c);
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(tokens[0], ReferenceNext({1, 2, 3}));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace deepinfer
