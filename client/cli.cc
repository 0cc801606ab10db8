// deepinfer: the command-line client of deepinferd.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "client/bench.h"
#include "client/client.h"
#include "engine/common/json_writer.h"

namespace deepinfer::client {
namespace {

constexpr const char* kUsage = R"(usage: deepinfer [--socket PATH] COMMAND [options]

commands:
  generate (--prompt TEXT | --messages FILE.json | --prompt-ids 1,2,3) [--max-tokens N]
           [--temperature T] [--top-p P] [--top-k K] [--min-p P] [--seed S] [--stop S]...
           [--stop-id ID]... [--repetition-penalty R] [--frequency-penalty F]
           [--presence-penalty P] [--logit-bias ID:BIAS]... [--format text|ids|jsonl]
           [--response-format JSON] [--logprobs]
      Streams the generated tokens as they arrive. Ctrl-C cancels the request.
      The penalties and --logit-bias (a token id and the bias added to its logit, -100 to 100)
      are applied before the draw, as OpenAI's fields of those names.
      --logprobs asks for each token's log-probability (jsonl prints it as "logprob").
      --response-format constrains the output: {"type": "json_object"}, {"type": "json_schema",
      "json_schema": {"schema": {...}}}, {"type": "regex", "regex": "..."}, {"type": "grammar",
      "grammar": "root ::= ..."}.
  status [--json]      The daemon's counters.
  health               Exit 0 when the daemon is healthy.
  cancel ID            Cancels request ID of this connection (useful only for scripting tests).
  bench [--clients N] [--requests N] [--rate R] [--turns | --own-ids N] [--prompt-ids 1,2,3]
        [--max-tokens N] [generate's sampling options: --temperature, --top-p, --logprobs, ...]
      N client connections, N x requests in all; closed loop (each client's next request after
      its previous one), or with --rate R open loop: Poisson arrivals at R requests/s overall.
      --turns: each client's requests are the turns of one conversation (closed loop): a
      request's prompt is the previous prompt, its answer, then the --prompt-ids tokens; the
      first turn opens with the client's own token (its index + 1).
      --own-ids N: each request's prompt is the --prompt-ids tokens, then N ids of its own
      (1 .. 500), so requests share exactly the --prompt-ids prefix (a system prompt).
      Prints tokens/s and TTFT, inter-token and request latency percentiles (one JSON line).
An option the command does not read is an error (exit 2).
The socket defaults to $DEEPINFER_SOCKET or /run/deepinfer/deepinfer.sock.
)";

std::atomic<bool> g_interrupted{false};

struct Args {
  std::string socket;
  std::string command;
  std::multimap<std::string, std::string> opts;
  std::vector<std::string> positional;
  std::string Get(const std::string& k, const std::string& def = "") const {
    auto it = opts.find(k);
    return it == opts.end() ? def : it->second;
  }
};

Result<Args> Parse(int argc, char** argv) {
  Args a;
  const char* env = std::getenv("DEEPINFER_SOCKET");
  a.socket = env ? env : "/run/deepinfer/deepinfer.sock";
  const std::vector<std::string> bare = {"--json", "--turns", "--logprobs"};
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k.rfind("--", 0) == 0) {
      if (std::find(bare.begin(), bare.end(), k) != bare.end()) {
        a.opts.emplace(k, "1");
        continue;
      }
      if (i + 1 >= argc) return InvalidArgument(k + " needs a value");
      if (k == "--socket")
        a.socket = argv[++i];
      else
        a.opts.emplace(k, argv[++i]);
    } else if (a.command.empty()) {
      a.command = k;
    } else {
      a.positional.push_back(k);
    }
  }
  if (a.command.empty()) return InvalidArgument("no command");
  return a;
}

Result<long long> Int(const std::string& flag, const std::string& s) {
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used == s.size()) return v;
  } catch (...) {
  }
  return InvalidArgument(flag + ": expected an integer, got '" + s + "'");
}

Result<double> Double(const std::string& flag, const std::string& s) {
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (...) {
  }
  return InvalidArgument(flag + ": expected a number, got '" + s + "'");
}

Result<std::vector<int32_t>> Ids(const std::string& flag, const std::string& s) {
  std::vector<int32_t> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, ',');) {
    DI_ASSIGN_OR_RETURN(long long v, Int(flag, part));
    if (v < 0 || v > INT32_MAX) return InvalidArgument(flag + ": id out of range: " + part);
    out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

Result<ipc::GenerateRequest> BuildRequest(const Args& a, uint64_t id) {
  ipc::GenerateRequest r;
  r.id = id;
  const int kinds =
      a.opts.count("--prompt") + a.opts.count("--messages") + a.opts.count("--prompt-ids");
  if (kinds != 1) return InvalidArgument("give exactly one of --prompt, --messages, --prompt-ids");
  if (a.opts.count("--prompt")) {
    r.prompt_kind = ipc::PromptKind::kText;
    r.prompt = a.Get("--prompt");
  } else if (a.opts.count("--messages")) {
    std::ifstream in(a.Get("--messages"));
    if (!in) return NotFound(a.Get("--messages") + ": cannot read");
    r.prompt_kind = ipc::PromptKind::kMessages;
    r.messages_json.assign(std::istreambuf_iterator<char>(in), {});
  } else {
    r.prompt_kind = ipc::PromptKind::kIds;
    DI_ASSIGN_OR_RETURN(r.prompt_ids, Ids("--prompt-ids", a.Get("--prompt-ids")));
  }
  if (a.opts.count("--max-tokens")) {
    DI_ASSIGN_OR_RETURN(r.max_tokens, Int("--max-tokens", a.Get("--max-tokens")));
  } else
    r.max_tokens = 64;
  if (a.opts.count("--temperature")) {
    DI_ASSIGN_OR_RETURN(r.temperature, Double("--temperature", a.Get("--temperature")));
  }
  if (a.opts.count("--top-p")) {
    DI_ASSIGN_OR_RETURN(r.top_p, Double("--top-p", a.Get("--top-p")));
  }
  if (a.opts.count("--top-k")) {
    DI_ASSIGN_OR_RETURN(long long k, Int("--top-k", a.Get("--top-k")));
    r.top_k = static_cast<int32_t>(k);
  }
  if (a.opts.count("--min-p")) {
    DI_ASSIGN_OR_RETURN(r.min_p, Double("--min-p", a.Get("--min-p")));
  }
  if (a.opts.count("--repetition-penalty")) {
    DI_ASSIGN_OR_RETURN(r.repetition_penalty,
                        Double("--repetition-penalty", a.Get("--repetition-penalty")));
  }
  if (a.opts.count("--frequency-penalty")) {
    DI_ASSIGN_OR_RETURN(r.frequency_penalty,
                        Double("--frequency-penalty", a.Get("--frequency-penalty")));
  }
  if (a.opts.count("--presence-penalty")) {
    DI_ASSIGN_OR_RETURN(r.presence_penalty,
                        Double("--presence-penalty", a.Get("--presence-penalty")));
  }
  for (auto [it, end] = a.opts.equal_range("--logit-bias"); it != end; ++it) {
    const size_t colon = it->second.find(':');
    if (colon == std::string::npos) {
      return InvalidArgument("--logit-bias: expected ID:BIAS, got '" + it->second + "'");
    }
    DI_ASSIGN_OR_RETURN(long long id, Int("--logit-bias", it->second.substr(0, colon)));
    if (id < 0 || id > INT32_MAX) return InvalidArgument("--logit-bias: no token id " + it->second);
    DI_ASSIGN_OR_RETURN(double bias, Double("--logit-bias", it->second.substr(colon + 1)));
    r.logit_bias.emplace_back(static_cast<int32_t>(id), bias);
  }
  if (a.opts.count("--seed")) {
    DI_ASSIGN_OR_RETURN(long long s, Int("--seed", a.Get("--seed")));
    r.seed = static_cast<uint64_t>(s);
  }
  for (auto [it, end] = a.opts.equal_range("--stop"); it != end; ++it) r.stop.push_back(it->second);
  if (a.opts.count("--response-format")) r.response_format_json = a.Get("--response-format");
  r.logprobs = a.opts.count("--logprobs") > 0;
  for (auto [it, end] = a.opts.equal_range("--stop-id"); it != end; ++it) {
    DI_ASSIGN_OR_RETURN(long long v, Int("--stop-id", it->second));
    r.stop_ids.push_back(static_cast<int32_t>(v));
  }
  return r;
}

const char* FinishName(uint16_t r) {
  switch (static_cast<ipc::FinishReason>(r)) {
    case ipc::FinishReason::kStop:
      return "stop";
    case ipc::FinishReason::kLength:
      return "length";
    case ipc::FinishReason::kCancelled:
      return "cancelled";
    case ipc::FinishReason::kClientTooSlow:
      return "client_too_slow";
    case ipc::FinishReason::kError:
      return "error";
    default:
      return "none";
  }
}

// The options each command reads: any other is refused, so a misspelt one (--temprature) cannot
// quietly leave its setting at the default.
Status KnownOptions(const Args& a) {
  static const std::vector<std::string> kSampling = {"--prompt",
                                                     "--messages",
                                                     "--prompt-ids",
                                                     "--max-tokens",
                                                     "--temperature",
                                                     "--top-p",
                                                     "--top-k",
                                                     "--min-p",
                                                     "--seed",
                                                     "--stop",
                                                     "--stop-id",
                                                     "--response-format",
                                                     "--logprobs",
                                                     "--repetition-penalty",
                                                     "--frequency-penalty",
                                                     "--presence-penalty",
                                                     "--logit-bias"};
  std::vector<std::string> known;
  if (a.command == "generate") {
    known = kSampling;
    known.push_back("--format");
  } else if (a.command == "bench") {
    known = kSampling;
    known.insert(known.end(), {"--clients", "--requests", "--rate", "--turns", "--own-ids"});
  } else if (a.command == "status") {
    known = {"--json"};
  } else if (a.command != "health" && a.command != "cancel") {
    return Status::Ok();  // RunCommand names the unknown command
  }
  for (const auto& [flag, value] : a.opts) {
    if (std::find(known.begin(), known.end(), flag) == known.end()) {
      return InvalidArgument(a.command + " has no option " + flag + " (deepinfer help)");
    }
  }
  return Status::Ok();
}

// Flags without values (--logprobs, --turns) cannot take one: a stray word is an error.
Status NoPositional(const Args& a) {
  if (a.positional.empty()) return Status::Ok();
  return InvalidArgument(a.command + " takes no positional arguments ('" + a.positional[0] +
                         "'); --json, --turns and --logprobs take no value");
}

Status Generate(const Args& a) {
  DI_RETURN_IF_ERROR(NoPositional(a));
  const std::string format = a.Get("--format", "text");
  if (format != "text" && format != "ids" && format != "jsonl") {
    return InvalidArgument("--format must be text, ids or jsonl");
  }
  DI_ASSIGN_OR_RETURN(ipc::GenerateRequest req, BuildRequest(a, 1));
  DI_ASSIGN_OR_RETURN(auto client, Client::Connect(a.socket));
  DI_ASSIGN_OR_RETURN(ipc::Accepted accepted, client->Generate(req));
  (void)accepted;
  bool first = true, cancel_sent = false;
  for (;;) {
    if (g_interrupted && !cancel_sent) {
      DI_RETURN_IF_ERROR(client->Cancel(req.id));
      cancel_sent = true;
    }
    DI_ASSIGN_OR_RETURN(auto ev, client->NextEvent(std::chrono::milliseconds(200)));
    if (!ev) continue;
    const auto kind = static_cast<ipc::EventKind>(ev->kind);
    const std::string text(ev->text, ev->text_len);
    if (kind == ipc::EventKind::kToken || kind == ipc::EventKind::kText) {
      if (format == "text") {
        std::fwrite(text.data(), 1, text.size(), stdout);
      } else if (format == "ids" && kind == ipc::EventKind::kToken) {
        std::printf("%s%d", first ? "" : ",", ev->token);
        first = false;
      } else if (format == "jsonl") {
        std::string line = "{\"token\": " + std::to_string(ev->token);
        if (a.opts.count("--logprobs") && kind == ipc::EventKind::kToken) {
          char lp[32];
          std::snprintf(lp, sizeof(lp), "%.9g", ev->logprob);  // a float's every digit
          line += ", \"logprob\": " + std::string(lp);
        }
        line += ", \"text\": ";
        AppendJsonString(&line, text);
        std::printf("%s}\n", line.c_str());
      }
      std::fflush(stdout);
    } else if (kind == ipc::EventKind::kDone || kind == ipc::EventKind::kError) {
      if (format == "jsonl")
        std::printf("{\"finish_reason\": \"%s\"}\n", FinishName(ev->finish_reason));
      else
        std::printf("\n");
      if (kind == ipc::EventKind::kError) return Internal("the request failed: " + text);
      return Status::Ok();
    }
  }
}

Status Bench(const Args& a) {
  DI_RETURN_IF_ERROR(NoPositional(a));
  BenchOptions o;
  o.socket = a.socket;
  DI_ASSIGN_OR_RETURN(o.clients, Int("--clients", a.Get("--clients", "4")));
  DI_ASSIGN_OR_RETURN(o.requests, Int("--requests", a.Get("--requests", "4")));
  DI_ASSIGN_OR_RETURN(o.rate, Double("--rate", a.Get("--rate", "0")));
  o.turns = a.opts.count("--turns") > 0;
  DI_ASSIGN_OR_RETURN(o.own_ids, Int("--own-ids", a.Get("--own-ids", "0")));
  if (o.own_ids > 0 && a.opts.count("--prompt")) {
    return InvalidArgument("--own-ids needs --prompt-ids (the ids follow the shared ones)");
  }
  if (o.turns && a.opts.count("--prompt")) {
    return InvalidArgument("--turns needs --prompt-ids (each turn repeats the earlier tokens)");
  }
  Args base = a;
  if (!base.opts.count("--prompt-ids") && !base.opts.count("--prompt"))
    base.opts.emplace("--prompt-ids", "1,2,3,4");
  if (!base.opts.count("--max-tokens")) base.opts.emplace("--max-tokens", "16");
  DI_ASSIGN_OR_RETURN(std::string line,
                      RunBench(o, [&](uint64_t id) { return BuildRequest(base, id); }));
  std::printf("%s\n", line.c_str());
  return Status::Ok();
}

// The command itself, its options known.
Status RunCommand(const Args& a) {
  Status st;
  if (a.command == "generate") {
    st = Generate(a);
  } else if (a.command == "status") {
    auto c = Client::Connect(a.socket);
    auto s = c.ok() ? (*c)->GetStatus() : Result<std::string>(c.status());
    if (s.ok()) {
      if (a.opts.count("--json")) {
        std::printf("%s\n", s->c_str());
      } else {
        std::string t = *s;  // one "key: value" per line for people
        std::replace(t.begin(), t.end(), ',', '\n');
        t.erase(std::remove_if(t.begin(), t.end(),
                               [](char ch) { return ch == '{' || ch == '}' || ch == '"'; }),
                t.end());
        std::printf("%s\n", t.c_str());
      }
    }
    st = s.status();
  } else if (a.command == "health") {
    auto c = Client::Connect(a.socket);
    auto h = c.ok() ? (*c)->Health() : Result<ipc::HealthReply>(c.status());
    if (h.ok() && !h->ok)
      st = Internal("unhealthy: " + h->reason);
    else
      st = h.status();
    if (st.ok()) std::printf("ok\n");
  } else if (a.command == "cancel") {
    if (a.positional.size() != 1) {
      st = InvalidArgument("cancel needs one request id");
    } else {
      auto id = Int("cancel", a.positional[0]);
      auto c = Client::Connect(a.socket);
      st = !id.ok() ? id.status() : !c.ok() ? c.status() : (*c)->Cancel(static_cast<uint64_t>(*id));
    }
  } else if (a.command == "bench") {
    st = Bench(a);
  } else {
    st = InvalidArgument("unknown command '" + a.command + "'");
  }
  return st;
}

int Main(int argc, char** argv) {
  auto args = Parse(argc, argv);
  if (!args.ok() || args->command == "help") {
    std::fputs(kUsage, args.ok() ? stdout : stderr);
    return args.ok() ? 0 : 2;
  }
  const Args& a = *args;
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_interrupted = true; };
  sigaction(SIGINT, &sa, nullptr);
  Status st = KnownOptions(a);
  if (st.ok()) st = RunCommand(a);
  if (!st.ok()) {
    std::fprintf(stderr, "deepinfer %s: %s\n", a.command.c_str(), st.ToString().c_str());
    return st.code() == ErrorCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}

}  // namespace
}  // namespace deepinfer::client

int main(int argc, char** argv) { return deepinfer::client::Main(argc, argv); }
