// Fuzz target for the control plane's input path: arbitrary bytes through FrameDecoder, in chunk
// sizes derived from the input, and every decoded frame through ParseRequest (and ParseReply).
// Input layout: byte 0 picks max_frame_bytes, byte 1 seeds the chunk sizes, the rest is the
// stream. Besides not crashing it checks invariants and aborts when one breaks:
//   - the decoder never holds more than one header and one max frame;
//   - a frame that parses re-serializes (ToJson) to a frame that parses to the same value.
// Built with -fsanitize=fuzzer under clang (frame_fuzz); frame_fuzz_smoke drives it under gcc.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ipc/frame.h"
#include "ipc/protocol.h"

namespace {

using deepinfer::Result;
using deepinfer::Status;
using namespace deepinfer::ipc;  // NOLINT

// Counters for the smoke driver's summary (how deep the inputs got).
struct Stats {
  long long frames = 0, requests_ok = 0, replies_ok = 0;
} stats;

[[noreturn]] void Fail(const char* what, const std::string& frame) {
  std::fprintf(stderr, "frame_fuzz: %s\nframe (%zu bytes): %.*s\n", what, frame.size(),
               static_cast<int>(std::min<size_t>(frame.size(), 2000)), frame.c_str());
  std::abort();
}

RequestLimits Limits() {
  RequestLimits l;
  l.max_prompt_bytes = 4096;
  l.max_prompt_ids = 512;
  l.max_messages_bytes = 4096;
  l.max_response_format_bytes = 1024;
  l.max_tokens = 4096;
  l.vocab_size = 1000;
  return l;
}

void CheckFrame(const std::string& frame) {
  static const RequestLimits limits = Limits();
  ++stats.frames;
  Result<Request> req = ParseRequest(frame, limits);
  if (req.ok()) {
    ++stats.requests_ok;
    const std::string again = ToJson(*req);
    Result<Request> back = ParseRequest(again, limits);
    if (!back.ok()) Fail(("re-serialized request does not parse: " + again).c_str(), frame);
    if (!(*back == *req)) Fail(("re-serialized request differs: " + again).c_str(), frame);
  } else {
    (void)ToJson(MakeErrorReply(frame, req.status()));
  }
  Result<Reply> reply = ParseReply(frame);
  if (reply.ok()) {
    ++stats.replies_ok;
    const std::string again = ToJson(*reply);
    Result<Reply> back = ParseReply(again);
    if (!back.ok()) Fail(("re-serialized reply does not parse: " + again).c_str(), frame);
    if (!(*back == *reply)) Fail(("re-serialized reply differs: " + again).c_str(), frame);
  }
}

}  // namespace

extern "C" void FrameFuzzStats(long long* frames, long long* requests_ok, long long* replies_ok) {
  *frames = stats.frames;
  *requests_ok = stats.requests_ok;
  *replies_ok = stats.replies_ok;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static constexpr size_t kMaxFrames[] = {1, 7, 64, 300, 4096, 65536, 1 << 20, 4 << 20};
  const size_t max_frame = kMaxFrames[data[0] % 8];
  uint32_t rng = 0x9e3779b9u ^ (uint32_t{data[1]} * 0x01000193u) ^ static_cast<uint32_t>(size);
  const char* p = reinterpret_cast<const char*>(data) + 2;
  size_t left = size - 2;
  FrameDecoder decoder(max_frame);
  while (left > 0) {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    // Mostly small chunks (1..16 bytes), sometimes large ones.
    const size_t want = (rng & 3) ? 1 + (rng >> 8) % 16 : 1 + (rng >> 8) % 8192;
    const size_t chunk = std::min(left, want);
    Status st = decoder.FeedAll(p, chunk, [&](std::string frame) {
      if (frame.empty() || frame.size() > max_frame) Fail("frame size out of bounds", frame);
      CheckFrame(frame);
      return Status::Ok();
    });
    if (decoder.buffered() > kFrameHeaderBytes + max_frame) Fail("decoder over its bound", "");
    if (!st.ok()) break;  // framing broken: the server would close here
    p += chunk;
    left -= chunk;
  }
  return 0;
}
