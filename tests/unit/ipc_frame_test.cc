// Frame codec: layout, limits, and decoding however the bytes are split.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ipc/frame.h"

namespace deepinfer::ipc {
namespace {

// Decodes everything in `stream`, feeding it in pieces of the given sizes (cycled).
Result<std::vector<std::string>> DecodeAll(FrameDecoder& d, const std::string& stream,
                                           const std::vector<size_t>& pieces) {
  std::vector<std::string> frames;
  size_t pos = 0, k = 0;
  while (pos < stream.size()) {
    const size_t n = std::min(pieces[k++ % pieces.size()], stream.size() - pos);
    Status st = d.FeedAll(stream.data() + pos, n, [&](std::string f) {
      frames.push_back(std::move(f));
      return Status::Ok();
    });
    if (!st.ok()) return st;
    EXPECT_LE(d.buffered(), kFrameHeaderBytes + d.max_frame_bytes());
    pos += n;
  }
  return frames;
}

TEST(FrameTest, EncodeIsLittleEndianLengthThenBody) {
  EXPECT_EQ(EncodeFrame("{}"), std::string("\x02\x00\x00\x00{}", 6));
  std::string body(0x010203, 'x');
  std::string f = EncodeFrame(body);
  ASSERT_EQ(f.size(), 4 + body.size());
  EXPECT_EQ(f.substr(0, 4), std::string("\x03\x02\x01\x00", 4));
  EXPECT_EQ(f.substr(4), body);
  std::string two = "prefix";
  AppendFrame(&two, "a");
  EXPECT_EQ(two, std::string("prefix\x01\x00\x00\x00"
                             "a",
                             11));
}

TEST(FrameTest, DecodesOneFrame) {
  FrameDecoder d(64);
  std::string f = EncodeFrame(R"({"op":"health"})");
  EXPECT_EQ(d.Feed(f.data(), f.size()), f.size());
  auto next = d.Next();
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ(**next, R"({"op":"health"})");
  EXPECT_TRUE(d.idle());
  next = d.Next();
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value());
}

TEST(FrameTest, FeedStopsAtTheEndOfEachFrame) {
  FrameDecoder d(64);
  std::string s = EncodeFrame("one") + EncodeFrame("two");
  const size_t first = d.Feed(s.data(), s.size());
  EXPECT_EQ(first, 7u);
  EXPECT_EQ(d.Feed(s.data() + first, s.size() - first), 0u);  // "one" not taken yet
  EXPECT_EQ(**d.Next(), "one");
  EXPECT_EQ(d.Feed(s.data() + first, s.size() - first), 7u);
  EXPECT_EQ(**d.Next(), "two");
}

TEST(FrameTest, ByteAtATimeAndAllAtOnceGiveTheSameFrames) {
  std::vector<std::string> bodies = {"a", std::string(1000, 'b'), "{}", std::string(64, 'c')};
  std::string stream;
  for (auto& b : bodies) stream += EncodeFrame(b);
  for (std::vector<size_t> pieces : std::vector<std::vector<size_t>>{
           {1}, {2}, {3}, {5, 1, 7}, {4}, {stream.size()}, {1000}, {4096}}) {
    FrameDecoder d(1000);
    auto frames = DecodeAll(d, stream, pieces);
    ASSERT_TRUE(frames.ok()) << frames.status().ToString();
    EXPECT_EQ(*frames, bodies);
    EXPECT_TRUE(d.idle());
  }
}

TEST(FrameTest, RandomSplits) {
  std::mt19937 rng(7);
  std::vector<std::string> bodies;
  std::string stream;
  for (int i = 0; i < 200; ++i) {
    bodies.emplace_back(1 + rng() % 300, static_cast<char>('a' + i % 26));
    stream += EncodeFrame(bodies.back());
  }
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<size_t> pieces;
    for (int i = 0; i < 50; ++i) pieces.push_back(1 + rng() % 700);
    FrameDecoder d(300);
    auto frames = DecodeAll(d, stream, pieces);
    ASSERT_TRUE(frames.ok());
    EXPECT_EQ(*frames, bodies);
  }
}

TEST(FrameTest, ExactlyMaxIsAcceptedOneMoreIsNot) {
  FrameDecoder ok(10);
  auto frames = DecodeAll(ok, EncodeFrame(std::string(10, 'x')), {3});
  ASSERT_TRUE(frames.ok());
  EXPECT_EQ(frames->size(), 1u);

  FrameDecoder d(10);
  std::string f = EncodeFrame(std::string(11, 'x'));
  EXPECT_EQ(d.Feed(f.data(), f.size()), 4u);  // the header, then nothing
  auto next = d.Next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), ErrorCode::kDataLoss);
  EXPECT_EQ(next.status().message(), "frame: length 11 exceeds the limit of 10 bytes");
  EXPECT_FALSE(d.idle());
  // Sticky: nothing more is taken and the error repeats.
  EXPECT_EQ(d.Feed(f.data() + 4, 7), 0u);
  EXPECT_FALSE(d.Next().ok());
}

TEST(FrameTest, ZeroLengthIsAnError) {
  FrameDecoder d(10);
  std::string s = EncodeFrame("ok") + std::string(4, '\0') + EncodeFrame("never");
  std::vector<std::string> got;
  Status st = d.FeedAll(s.data(), s.size(), [&](std::string f) {
    got.push_back(std::move(f));
    return Status::Ok();
  });
  EXPECT_EQ(st.code(), ErrorCode::kDataLoss);
  EXPECT_EQ(st.message(), "frame: zero length");
  EXPECT_EQ(got, std::vector<std::string>{"ok"});
}

TEST(FrameTest, HugeDeclaredLengthFailsBeforeAnyBodyIsBuffered) {
  FrameDecoder d;  // 4 MiB
  const char header[4] = {'\xff', '\xff', '\xff', '\xff'};
  for (char c : header) EXPECT_EQ(d.Feed(&c, 1), 1u);
  EXPECT_FALSE(d.Next().ok());
  EXPECT_EQ(d.buffered(), 4u);
}

TEST(FrameTest, PartialFrameIsNotIdleAndMemoryGrowsWithTheBytes) {
  FrameDecoder d(1 << 20);
  std::string f = EncodeFrame(std::string(1 << 20, 'z'));
  EXPECT_TRUE(d.idle());
  EXPECT_EQ(d.Feed(f.data(), 2), 2u);
  EXPECT_FALSE(d.idle());
  EXPECT_EQ(d.Feed(f.data() + 2, 1000), 1000u);
  EXPECT_EQ(d.buffered(), 1002u);
  EXPECT_FALSE(d.Next()->has_value());
  EXPECT_EQ(d.Feed(f.data() + 1002, f.size() - 1002), f.size() - 1002);
  EXPECT_EQ((**d.Next()).size(), size_t{1} << 20);
  EXPECT_TRUE(d.idle());
}

TEST(FrameTest, HandlerErrorStopsFeedAll) {
  FrameDecoder d(10);
  std::string s = EncodeFrame("a") + EncodeFrame("b") + EncodeFrame("c");
  int calls = 0;
  Status st = d.FeedAll(s.data(), s.size(), [&](std::string f) {
    ++calls;
    return f == "b" ? InvalidArgument("stop") : Status::Ok();
  });
  EXPECT_EQ(st.message(), "stop");
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace deepinfer::ipc
