// Writes a .safetensors file (used by make-tiny and by tests that build checkpoints).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/common/status.h"
#include "engine/model/dtype.h"

namespace deepinfer {

class SafetensorsWriter {
 public:
  void Add(const std::string& name, DType dtype, std::vector<int64_t> shape,
           std::vector<uint8_t> bytes);
  void AddF32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v);
  /// Writes tensors sorted by name; the header is padded to a multiple of 8 bytes.
  Status Write(const std::string& path) const;
  size_t size() const { return tensors_.size(); }

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> tensors_;
};

}  // namespace deepinfer
