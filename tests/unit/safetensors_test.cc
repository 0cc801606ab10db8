// Safetensors round trip through SafetensorsWriter, and header validation on hand-written files:
// every rejection must name the file (and the tensor where there is one).
#include "engine/model/safetensors.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/model/safetensors_writer.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/safetensors_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A file with an explicit header length field, header text and data section.
  std::string WriteRaw(const std::string& name, const std::string& header,
                       const std::vector<uint8_t>& data, uint64_t header_len) {
    const std::string path = dir_ + "/" + name;
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&header_len), 8);
    out << header;
    out.write(reinterpret_cast<const char*>(data.data()),
              static_cast<std::streamsize>(data.size()));
    return path;
  }
  std::string WriteRaw(const std::string& name, const std::string& header,
                       const std::vector<uint8_t>& data) {
    return WriteRaw(name, header, data, header.size());
  }

  // Opens `path`, expects it to fail with `code`, and returns the message.
  std::string OpenError(const std::string& path, ErrorCode code) {
    auto f = SafetensorsFile::Open(path);
    EXPECT_FALSE(f.ok());
    if (f.ok()) return "";
    EXPECT_EQ(f.status().code(), code) << f.status().message();
    EXPECT_NE(f.status().message().find(path), std::string::npos) << f.status().message();
    return f.status().message();
  }

  std::string dir_;
};

std::vector<uint8_t> Bytes(int n, int seed) {
  std::vector<uint8_t> b(n);
  for (int i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + 31 * i);
  return b;
}

void ExpectTensor(const TensorView* t, DType dtype, const std::vector<int64_t>& shape,
                  const std::vector<uint8_t>& bytes) {
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, dtype) << t->name;
  EXPECT_EQ(t->shape, shape) << t->name;
  ASSERT_EQ(t->nbytes, bytes.size()) << t->name;
  if (!bytes.empty()) {
    EXPECT_EQ(std::memcmp(t->data, bytes.data(), bytes.size()), 0) << t->name;
  }
}

TEST_F(SafetensorsTest, RoundTrip) {
  const std::vector<float> a = {1.5f, -2, 3, 4, 5, 6};
  std::vector<uint8_t> a_bytes(24);
  std::memcpy(a_bytes.data(), a.data(), 24);
  SafetensorsWriter w;
  w.AddF32("layers.0.a", {2, 3}, a);
  w.Add("b", DType::kBF16, {5}, Bytes(10, 1));  // odd byte count: next tensor unaligned
  w.Add("c.scale", DType::kF8E8M0, {2, 2}, Bytes(4, 2));
  w.Add("tid2eid", DType::kI64, {3, 1}, Bytes(24, 3));
  w.Add("empty", DType::kF8E4M3, {0, 4}, {});
  const std::string path = dir_ + "/model.safetensors";
  ASSERT_TRUE(w.Write(path).ok());

  std::ifstream in(path, std::ios::binary);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  EXPECT_EQ(header_len % 8, 0u);  // data section starts 8-aligned
  EXPECT_EQ(fs::file_size(path), 8 + header_len + 24 + 10 + 4 + 24);

  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  const auto& tensors = (*f)->tensors();
  ASSERT_EQ(tensors.size(), 5u);
  ExpectTensor(&tensors.at("layers.0.a"), DType::kF32, {2, 3}, a_bytes);
  ExpectTensor(&tensors.at("b"), DType::kBF16, {5}, Bytes(10, 1));
  ExpectTensor(&tensors.at("c.scale"), DType::kF8E8M0, {2, 2}, Bytes(4, 2));
  ExpectTensor(&tensors.at("tid2eid"), DType::kI64, {3, 1}, Bytes(24, 3));
  ExpectTensor(&tensors.at("empty"), DType::kF8E4M3, {0, 4}, {});
  EXPECT_EQ(tensors.at("b").numel(), 5);
  EXPECT_EQ(tensors.at("layers.0.a").ShapeString(), "[2, 3]");
  EXPECT_EQ(*tensors.at("b").file, path);

  auto store = TensorStore::OpenDir(dir_);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(store->file_count(), 1u);
  EXPECT_EQ(store->all().size(), 5u);
  ExpectTensor(store->Find("tid2eid"), DType::kI64, {3, 1}, Bytes(24, 3));
  EXPECT_EQ(store->Find("missing"), nullptr);
}

TEST_F(SafetensorsTest, TruncatedFile) {
  SafetensorsWriter w;
  w.AddF32("a", {2}, {1, 2});
  w.AddF32("z", {4}, {1, 2, 3, 4});  // sorted last: its data ends the file
  const std::string path = dir_ + "/model.safetensors";
  ASSERT_TRUE(w.Write(path).ok());
  fs::resize_file(path, fs::file_size(path) - 3);
  const std::string msg = OpenError(path, ErrorCode::kDataLoss);
  EXPECT_NE(msg.find("'z'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST_F(SafetensorsTest, HeaderLongerThanFile) {
  const std::string path = WriteRaw("x.safetensors", "{}", {}, 1000);
  const std::string msg = OpenError(path, ErrorCode::kDataLoss);
  EXPECT_NE(msg.find("1000"), std::string::npos) << msg;
}

TEST_F(SafetensorsTest, ShorterThanEightBytes) {
  const std::string path = dir_ + "/short.safetensors";
  std::ofstream(path, std::ios::binary) << "abcde";
  OpenError(path, ErrorCode::kDataLoss);
}

TEST_F(SafetensorsTest, HeaderNotJson) {
  OpenError(WriteRaw("x.safetensors", "{\"a\": nope", {}), ErrorCode::kDataLoss);
  OpenError(WriteRaw("y.safetensors", "[1, 2]", {}), ErrorCode::kDataLoss);  // not an object
}

TEST_F(SafetensorsTest, OffsetsBeyondData) {
  const std::string path = WriteRaw(
      "x.safetensors", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", Bytes(4, 0));
  const std::string msg = OpenError(path, ErrorCode::kDataLoss);
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
}

TEST_F(SafetensorsTest, SizeDoesNotMatchShape) {
  const std::string path = WriteRaw(
      "x.safetensors", R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})", Bytes(8, 0));
  const std::string msg = OpenError(path, ErrorCode::kDataLoss);
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3]"), std::string::npos) << msg;
  // Reversed offsets are rejected too, not read as a huge size.
  const std::string rev = WriteRaw(
      "y.safetensors", R"({"v":{"dtype":"U8","shape":[4],"data_offsets":[8,4]}})", Bytes(8, 0));
  EXPECT_NE(OpenError(rev, ErrorCode::kDataLoss).find("'v'"), std::string::npos);
}

TEST_F(SafetensorsTest, UnknownDtype) {
  const std::string path = WriteRaw(
      "x.safetensors",
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})",
      Bytes(1, 0));
  const std::string msg = OpenError(path, ErrorCode::kDataLoss);
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("F4"), std::string::npos) << msg;
}

TEST_F(SafetensorsTest, ShardedDirectory) {
  SafetensorsWriter s1, s2;
  s1.AddF32("a", {2}, {1, 2});
  s2.AddF32("b", {1}, {7});
  s2.Add("c", DType::kU8, {3}, Bytes(3, 9));
  const std::string f1 = dir_ + "/model-00001-of-00002.safetensors";
  const std::string f2 = dir_ + "/model-00002-of-00002.safetensors";
  ASSERT_TRUE(s1.Write(f1).ok());
  ASSERT_TRUE(s2.Write(f2).ok());
  std::ofstream(dir_ + "/model.safetensors.index.json")
      << R"({"metadata":{"total_size":15},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
      << R"("b":"model-00002-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}})";
  auto store = TensorStore::OpenDir(dir_);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(store->file_count(), 2u);
  EXPECT_EQ(store->all().size(), 3u);
  const float one_two[2] = {1, 2};
  ExpectTensor(store->Find("a"), DType::kF32, {2},
               std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(one_two),
                                    reinterpret_cast<const uint8_t*>(one_two) + 8));
  ExpectTensor(store->Find("c"), DType::kU8, {3}, Bytes(3, 9));
  EXPECT_EQ(*store->Find("a")->file, f1);
  EXPECT_EQ(*store->Find("b")->file, f2);
}

TEST_F(SafetensorsTest, ShardsWithoutIndexAreAllRead) {
  SafetensorsWriter s1, s2;
  s1.AddF32("a", {1}, {1});
  s2.AddF32("b", {1}, {2});
  ASSERT_TRUE(s1.Write(dir_ + "/part-1.safetensors").ok());
  ASSERT_TRUE(s2.Write(dir_ + "/part-2.safetensors").ok());
  auto store = TensorStore::OpenDir(dir_);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(store->file_count(), 2u);
  EXPECT_NE(store->Find("a"), nullptr);
  EXPECT_NE(store->Find("b"), nullptr);
}

TEST_F(SafetensorsTest, SameTensorInTwoShards) {
  SafetensorsWriter s1, s2;
  s1.AddF32("dup", {1}, {1});
  s2.AddF32("dup", {1}, {2});
  ASSERT_TRUE(s1.Write(dir_ + "/s1.safetensors").ok());
  ASSERT_TRUE(s2.Write(dir_ + "/s2.safetensors").ok());
  std::ofstream(dir_ + "/model.safetensors.index.json")
      << R"({"weight_map":{"dup":"s1.safetensors","other":"s2.safetensors"}})";
  auto store = TensorStore::OpenDir(dir_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kDataLoss);
  const std::string& msg = store.status().message();
  EXPECT_NE(msg.find("'dup'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("s1.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("s2.safetensors"), std::string::npos) << msg;
}

TEST_F(SafetensorsTest, DirectoryWithoutSafetensors) {
  std::ofstream(dir_ + "/config.json") << "{}";
  auto store = TensorStore::OpenDir(dir_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(store.status().message().find(dir_), std::string::npos);
  auto missing = TensorStore::OpenDir(dir_ + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
}

TEST_F(SafetensorsTest, BadShardInDirectoryFailsTheStore) {
  std::ofstream(dir_ + "/model.safetensors", std::ios::binary) << "abc";
  auto store = TensorStore::OpenDir(dir_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kDataLoss);
  EXPECT_NE(store.status().message().find("model.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
