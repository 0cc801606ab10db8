// Reading and writing float32 .npy arrays (NumPy format 1.0, C order), for logits and golden data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/common/status.h"

namespace deepinfer {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

Status WriteNpy(const std::string& path, const float* data, const std::vector<int64_t>& shape);
/// Reads a little-endian float32 ('<f4') C-order array; anything else is an error.
Result<NpyArray> ReadNpy(const std::string& path);

}  // namespace deepinfer
