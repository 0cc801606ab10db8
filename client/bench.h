// The `deepinfer bench` load generator: N client connections, closed loop (each client sends its
// next request when the previous ends) or open loop (requests arrive at a fixed mean rate, Poisson,
// whether or not earlier ones have ended: latency against offered load).
#pragma once

#include <functional>
#include <string>

#include "engine/common/status.h"
#include "ipc/protocol.h"

namespace deepinfer::client {

struct BenchOptions {
  std::string socket;
  long long clients = 4;
  long long requests = 4;        // per client
  double rate = 0;               // requests per second over all clients; 0 = closed loop
  long long max_in_flight = 16;  // per client in the open loop (the daemon's per-client limit)
  // Each client's requests are the turns of one conversation (closed loop, token-id prompts):
  // request k's prompt is request k - 1's prompt, its answer, then the request's own prompt ids;
  // the first opens with the client's own token (its index + 1), so clients share no prefix.
  bool turns = false;
  // Without turns: each request's prompt ends with this many ids of its own (made from the
  // client's index and the request id, each in 1 .. 500), so requests share the prompt ids as a
  // prefix and nothing after it (a system prompt and different questions).
  long long own_ids = 0;
};

/// Runs the load; make_request(id) builds the request with that id. Returns one JSON object:
/// clients, requests, rate, failures, tokens, tokens_per_s, ttft/itl/latency p50 and p99 (ms).
/// In the open loop TTFT and latency count from the request's scheduled arrival, so time spent
/// waiting for a free slot at the client is included.
Result<std::string> RunBench(
    const BenchOptions& options,
    const std::function<Result<ipc::GenerateRequest>(uint64_t)>& make_request);

}  // namespace deepinfer::client
