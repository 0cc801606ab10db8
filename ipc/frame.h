// Control-plane framing: every message on the Unix socket is a 4-byte little-endian unsigned
// length N followed by N bytes of JSON (docs/protocol.md). EncodeFrame writes one frame;
// FrameDecoder cuts a byte stream back into frames, however the bytes arrive.
//
//   FrameDecoder decoder(config.max_frame_bytes);
//   // on every read of n bytes at p:
//   Status st = decoder.FeedAll(p, n, [&](std::string frame) { return Handle(frame); });
//   if (!st.ok()) Close();  // framing broken (kDataLoss) or the handler's own error
//
// Memory is bounded: the decoder never holds more than one header and one frame body, and never
// reserves more than the length the header declared (itself at most max_frame_bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "engine/common/status.h"

namespace deepinfer::ipc {

inline constexpr size_t kFrameHeaderBytes = 4;
inline constexpr size_t kDefaultMaxFrameBytes = size_t{4} << 20;  // 4 MiB, docs/daemon.md

/// Appends one frame (header + body) to `out`. The body must be shorter than 4 GiB.
void AppendFrame(std::string* out, std::string_view json);
/// One frame: the 4-byte little-endian length of `json`, then `json`.
std::string EncodeFrame(std::string_view json);

/// Incremental frame decoder. Feed bytes as they arrive; take complete frames with Next().
/// A zero length or a length above max_frame_bytes is a kDataLoss error: the stream cannot be
/// resynchronised, the caller closes the connection. The error is sticky.
class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_frame_bytes = kDefaultMaxFrameBytes);

  /// Takes bytes from [data, data + n) up to the end of the current frame and returns how many
  /// it took (0 while a complete frame waits for Next(), or after an error). Call Next() and
  /// feed the rest again; FeedAll does this loop.
  [[nodiscard]] size_t Feed(const char* data, size_t n);

  /// The next complete frame body, nullopt when more bytes are needed, or the framing error.
  Result<std::optional<std::string>> Next();

  /// Feeds all n bytes, calling on_frame(std::string body) -> Status for every complete frame in
  /// order. Stops at, and returns, the first framing error or non-ok handler status.
  template <typename OnFrame>
  Status FeedAll(const char* data, size_t n, OnFrame&& on_frame);

  /// True when no partial frame is buffered: a peer that closes now closed cleanly.
  bool idle() const { return header_fill_ == 0 && !error_; }
  /// Bytes currently held (header and body); never above kFrameHeaderBytes + max_frame_bytes.
  size_t buffered() const { return header_fill_ + body_.size(); }
  size_t max_frame_bytes() const { return max_frame_bytes_; }

 private:
  void CheckHeader();

  size_t max_frame_bytes_;
  unsigned char header_[kFrameHeaderBytes] = {};
  size_t header_fill_ = 0;  // header bytes received for the current frame
  size_t body_len_ = 0;     // declared length, valid once header_fill_ == kFrameHeaderBytes
  std::string body_;
  std::optional<Status> error_;
};

template <typename OnFrame>
Status FrameDecoder::FeedAll(const char* data, size_t n, OnFrame&& on_frame) {
  while (true) {
    const size_t used = Feed(data, n);
    data += used;
    n -= used;
    Result<std::optional<std::string>> frame = Next();
    if (!frame.ok()) return frame.status();
    if (frame->has_value()) {
      Status st = on_frame(std::move(**frame));
      if (!st.ok()) return st;
    } else if (n == 0) {
      return Status::Ok();
    }
  }
}

}  // namespace deepinfer::ipc
