// Element types that appear in DeepSeek-V4 safetensors checkpoints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace deepinfer {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,  // e4m3fn: dense weights
  kF8E8M0,  // ue8m0: power-of-two block scales
  kI8,      // packed FP4 e2m1, two values per byte (routed experts)
  kU8,
  kI32,
  kI64,  // tid2eid hash-routing table
};

/// Bytes per stored element (I8 counts one byte even when it holds two FP4 values).
size_t DTypeSize(DType t);
std::string_view DTypeName(DType t);
/// Parses a safetensors dtype string ("F32", "BF16", "F8_E4M3", ...).
std::optional<DType> ParseDType(std::string_view s);

}  // namespace deepinfer
