#include "ipc/frame.h"

#include <algorithm>
#include <cassert>

namespace deepinfer::ipc {

void AppendFrame(std::string* out, std::string_view json) {
  assert(json.size() <= UINT32_MAX);
  const auto n = static_cast<uint32_t>(json.size());
  const char header[kFrameHeaderBytes] = {
      static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
      static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
  out->reserve(out->size() + kFrameHeaderBytes + json.size());
  out->append(header, kFrameHeaderBytes);
  out->append(json);
}

std::string EncodeFrame(std::string_view json) {
  std::string out;
  AppendFrame(&out, json);
  return out;
}

FrameDecoder::FrameDecoder(size_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {}

void FrameDecoder::CheckHeader() {
  body_len_ = size_t{header_[0]} | size_t{header_[1]} << 8 | size_t{header_[2]} << 16 |
              size_t{header_[3]} << 24;
  if (body_len_ == 0) {
    error_ = DataLoss("frame: zero length");
  } else if (body_len_ > max_frame_bytes_) {
    error_ = DataLoss("frame: length " + std::to_string(body_len_) + " exceeds the limit of " +
                      std::to_string(max_frame_bytes_) + " bytes");
  }
}

size_t FrameDecoder::Feed(const char* data, size_t n) {
  size_t used = 0;
  if (error_) return 0;
  if (header_fill_ < kFrameHeaderBytes) {
    const size_t take = std::min(n, kFrameHeaderBytes - header_fill_);
    std::copy(data, data + take, header_ + header_fill_);
    header_fill_ += take;
    used = take;
    if (header_fill_ < kFrameHeaderBytes) return used;
    CheckHeader();
    if (error_) return used;
  }
  const size_t take = std::min(n - used, body_len_ - body_.size());
  if (take == 0) return used;
  const size_t want = body_.size() + take;
  if (body_.capacity() < want) {
    // Grow geometrically but never past the declared length: a peer that announces a large
    // frame and then trickles bytes costs memory only as fast as it sends.
    // (libstdc++ rounds a reserve below twice the old capacity up to twice, so the last step
    // to the exact length goes through a fresh string.)
    const size_t cap = std::min(body_len_, std::max(want, 2 * body_.capacity()));
    std::string grown;
    grown.reserve(cap);
    grown.append(body_);
    body_.swap(grown);
  }
  body_.append(data + used, take);
  return used + take;
}

Result<std::optional<std::string>> FrameDecoder::Next() {
  if (error_) return *error_;
  if (header_fill_ < kFrameHeaderBytes || body_.size() < body_len_) {
    return std::optional<std::string>();
  }
  std::string frame = std::move(body_);
  body_ = std::string();
  header_fill_ = 0;
  body_len_ = 0;
  return std::optional<std::string>(std::move(frame));
}

}  // namespace deepinfer::ipc
