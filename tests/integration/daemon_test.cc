// deepinferd end to end, protocol and lifecycle: concurrent clients get the reference token, a
// client killed mid-stream, broken frames, a version mismatch, a slow reader, SIGTERM with
// requests in flight, Ctrl-C and ring cancellation, seeded sampling, log-probabilities when asked
// (through the CLI too), logit processors, socket activation.
#include <cstdlib>
#include <cstring>

#include "tests/integration/daemon_harness.h"

namespace deepinfer {
namespace {

using namespace daemon_testing;  // NOLINT: the harness is this file's vocabulary

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
    // Greedy: this model's greedy tokens after 1,2,3 never reach EOS (a draw may, and end the
    // request before the signal), so the request runs until its context is full (~2 s).
    execl((kBin + "/deepinfer").c_str(), "deepinfer", "--socket", socket_.c_str(), "generate",
          "--prompt-ids", "1,2,3", "--max-tokens", "30000", "--temperature", "0", "--format", "ids",
          nullptr);
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

// Token events carry the token's log-probability only for a request that asked for it (the
// log-softmax costs ~1 ms a token at V4's vocabulary); the tokens are the same either way; a
// request for alternatives (top_logprobs) is refused.
TEST_F(DaemonTest, LogprobsAreReportedWhenAskedFor) {
  Daemon d(dir_ / "model", socket_);
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  auto r = Request(1, {4, 9, 2}, 8);
  ASSERT_TRUE((*c)->Generate(r).ok());
  const Ended plain = DrainOne(**c);
  r.id = 2;
  r.logprobs = true;
  ASSERT_TRUE((*c)->Generate(r).ok());
  const Ended asked = DrainOne(**c);
  ASSERT_EQ(plain.tokens.size(), 8u);
  EXPECT_EQ(asked.tokens, plain.tokens);
  for (float lp : plain.logprobs) EXPECT_EQ(lp, 0.0f);
  ASSERT_EQ(asked.logprobs.size(), 8u);
  for (float lp : asked.logprobs) {
    EXPECT_LE(lp, 0.0f);
    EXPECT_GT(lp, -20.0f);  // greedy: the most likely token
  }
  EXPECT_NE(asked.logprobs, plain.logprobs);
  // The CLI asks with --logprobs and prints each one in full (jsonl): the same values.
  FILE* p = popen((kBin + "/deepinfer --socket " + socket_ +
                   " generate --prompt-ids 4,9,2 --max-tokens 8 --temperature 0 --logprobs"
                   " --format jsonl")
                      .c_str(),
                  "r");
  ASSERT_NE(p, nullptr);
  std::vector<float> printed;
  char line[256];
  while (fgets(line, sizeof(line), p)) {
    const char* at = std::strstr(line, "\"logprob\": ");
    if (at) printed.push_back(std::strtof(at + 11, nullptr));
  }
  EXPECT_EQ(pclose(p), 0);
  EXPECT_EQ(printed, asked.logprobs);
  // --logprobs takes no value: a stray one is refused (exit 2), not silently dropped.
  EXPECT_EQ(std::system((kBin + "/deepinfer --socket " + socket_ +
                         " generate --prompt-ids 4 --logprobs 5 >/dev/null 2>&1")
                            .c_str()),
            2 << 8);
  // Alternatives cannot be reported: asked for, the request is refused, not quietly served.
  r.id = 3;
  r.top_logprobs = 2;
  const auto refused = (*c)->Generate(r);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("unsupported: top_logprobs"), std::string::npos)
      << refused.status().message();
}

// A request's logit processors reach the sampler: a +100 bias makes its token every greedy pick,
// a -100 bias on the greedy first token moves it, the CLI's --logit-bias does what the field does;
// a penalty out of range is refused, naming the field, and a misspelt CLI option too.
TEST_F(DaemonTest, LogitProcessorsReachTheSampler) {
  Daemon d(dir_ / "model", socket_);
  auto c = client::Client::Connect(socket_);
  ASSERT_TRUE(c.ok());
  auto r = Request(1, {4, 9, 2}, 6);
  ASSERT_TRUE((*c)->Generate(r).ok());
  const std::vector<int32_t> plain = DrainOne(**c).tokens;
  ASSERT_EQ(plain.size(), 6u);
  r.id = 2;
  r.logit_bias = {{300, 100.0}};
  r.repetition_penalty = 1.2;  // processors together, as the host sampler applies them
  r.frequency_penalty = 0.5;
  ASSERT_TRUE((*c)->Generate(r).ok());
  EXPECT_EQ(DrainOne(**c).tokens, std::vector<int32_t>(6, 300));
  r = Request(3, {4, 9, 2}, 6);
  r.logit_bias = {{plain[0], -100.0}};
  ASSERT_TRUE((*c)->Generate(r).ok());
  const std::vector<int32_t> moved = DrainOne(**c).tokens;
  ASSERT_FALSE(moved.empty());
  EXPECT_NE(moved[0], plain[0]);
  r = Request(4, {4, 9, 2}, 6);
  r.presence_penalty = 3.0;
  const auto refused = (*c)->Generate(r);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("presence_penalty: must be in [-2, 2], got 3"),
            std::string::npos)
      << refused.status().message();
  FILE* p = popen((kBin + "/deepinfer --socket " + socket_ +
                   " generate --prompt-ids 4,9,2 --max-tokens 3 --temperature 0 --format ids"
                   " --logit-bias 300:100")
                      .c_str(),
                  "r");
  ASSERT_NE(p, nullptr);
  char buf[64] = {};
  ASSERT_NE(fgets(buf, sizeof(buf), p), nullptr);
  EXPECT_EQ(pclose(p), 0);
  EXPECT_EQ(std::string(buf), "300,300,300\n");
  // A misspelt option is refused (exit 2), not dropped with its setting left at the default.
  EXPECT_EQ(std::system((kBin + "/deepinfer --socket " + socket_ +
                         " generate --prompt-ids 4 --presence-penalt 1 >/dev/null 2>&1")
                            .c_str()),
            2 << 8);
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
