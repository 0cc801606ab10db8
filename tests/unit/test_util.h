// Helpers shared by the model tests: temporary directories, tiny checkpoints, comparisons.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/model/safetensors.h"
#include "engine/model/safetensors_writer.h"
#include "engine/model/tiny_checkpoint.h"
#include "engine/model/weights.h"

namespace deepinfer::testing {

/// A view of FP8 e4m3 bytes [out, in] with e8m0 scales per 128x128 block, as the checkpoint
/// loader makes one for the released dense weights.
inline LinearWeight Fp8BlockView(int64_t out, int64_t in, const uint8_t* data,
                                 const uint8_t* scale) {
  LinearWeight w;
  w.format = WeightFormat::kFp8Block;
  w.out = out;
  w.in = in;
  w.data = data;
  w.scale = scale;
  w.block_out = w.block_in = 128;
  return w;
}

/// A view of MXFP4 bytes [out, in / 2] with e8m0 scales [out, in / 32] (the routed experts).
inline LinearWeight Fp4BlockView(int64_t out, int64_t in, const uint8_t* data,
                                 const uint8_t* scale) {
  LinearWeight w;
  w.format = WeightFormat::kFp4Block;
  w.out = out;
  w.in = in;
  w.data = data;
  w.scale = scale;
  w.block_out = 1;
  w.block_in = 32;
  return w;
}

/// A fresh directory under the test temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "deepinfer-XXXXXX";
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
    EXPECT_FALSE(path_.empty());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

/// Occurrences of `word` in `text` (overlapping ones too).
inline size_t CountOf(const std::string& text, const std::string& word) {
  size_t n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  out << data;
}

/// Rewrites DIR/model.safetensors through `edit`, which sees every tensor and may drop (return
/// false) or change it.
inline void RewriteCheckpoint(
    const std::string& dir,
    const std::function<bool(std::string& name, DType& dtype, std::vector<int64_t>& shape,
                             std::vector<uint8_t>& bytes)>& edit) {
  SafetensorsWriter w;
  {
    auto store = TensorStore::OpenDir(dir);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    for (const auto& [name, t] : store->all()) {
      std::string n = name;
      DType dt = t->dtype;
      std::vector<int64_t> shape = t->shape;
      std::vector<uint8_t> bytes(t->data, t->data + t->nbytes);
      if (edit(n, dt, shape, bytes)) w.Add(n, dt, shape, std::move(bytes));
    }
  }
  const std::string tmp = dir + "/model.safetensors.tmp";
  ASSERT_TRUE(w.Write(tmp).ok());
  std::filesystem::rename(tmp, dir + "/model.safetensors");
}

/// Largest per-row relative error ||a - b|| / ||b|| over rows of width `width`.
inline double MaxRowRelError(const float* a, const float* b, int64_t rows, int64_t width) {
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double num = 0, den = 0;
    for (int64_t c = 0; c < width; ++c) {
      const double d = static_cast<double>(a[r * width + c]) - b[r * width + c];
      num += d * d;
      den += static_cast<double>(b[r * width + c]) * b[r * width + c];
    }
    worst = std::max(worst, std::sqrt(num / std::max(den, 1e-300)));
  }
  return worst;
}

/// Fraction of rows whose argmax agrees.
inline double ArgmaxAgreement(const float* a, const float* b, int64_t rows, int64_t width) {
  int64_t same = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = a + r * width;
    const float* y = b + r * width;
    same += std::max_element(x, x + width) - x == std::max_element(y, y + width) - y;
  }
  return static_cast<double>(same) / static_cast<double>(rows);
}

/// What a shell command printed (its redirections are the caller's) and its exit code (-1: it
/// did not exit normally or could not start).
struct CommandRun {
  int code;
  std::string out;
};
inline CommandRun RunCommand(const std::string& cmd) {
  CommandRun r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::vector<int32_t> ReadTokens(const std::string& path) {
  std::vector<int32_t> out;
  std::string text = ReadFile(path), cur;
  for (char c : text + ",") {
    if (c >= '0' && c <= '9') {
      cur += c;
    } else if (!cur.empty()) {
      out.push_back(std::stoi(cur));
      cur.clear();
    }
  }
  return out;
}

}  // namespace deepinfer::testing
