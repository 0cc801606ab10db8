#include "engine/model/weights.h"

#include <algorithm>
#include <cstring>

#include "engine/model/quant.h"

namespace deepinfer {

const char* WeightFormatName(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32:
      return "f32";
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kF16:
      return "f16";
    case WeightFormat::kFp8Block:
      return "fp8-e4m3-block";
    case WeightFormat::kFp4Block:
      return "fp4-e2m1-block32";
  }
  return "?";
}

size_t LinearWeight::bytes() const {
  const size_t n = static_cast<size_t>(out) * static_cast<size_t>(in);
  switch (format) {
    case WeightFormat::kF32:
      return 4 * n;
    case WeightFormat::kBF16:
    case WeightFormat::kF16:
      return 2 * n;
    case WeightFormat::kFp8Block:
      return n;
    case WeightFormat::kFp4Block:
      return n / 2;
  }
  return 0;
}

namespace {

float ScaleAt(const LinearWeight& w, size_t index) {
  if (w.scale_dtype == DType::kF32) {
    float f;
    std::memcpy(&f, w.scale + 4 * index, 4);
    return f;
  }
  return E8M0ToF32(w.scale[index]);
}

}  // namespace

void DequantizeRow(const LinearWeight& w, int64_t row, float* out) {
  const int64_t in = w.in;
  switch (w.format) {
    case WeightFormat::kF32:
      std::memcpy(out, w.data + static_cast<size_t>(row) * in * 4, in * 4);
      return;
    case WeightFormat::kBF16: {
      const uint8_t* p = w.data + static_cast<size_t>(row) * in * 2;
      for (int64_t i = 0; i < in; ++i) {
        uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = Bf16ToF32(b);
      }
      return;
    }
    case WeightFormat::kF16: {
      const uint8_t* p = w.data + static_cast<size_t>(row) * in * 2;
      for (int64_t i = 0; i < in; ++i) {
        uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = F16ToF32(b);
      }
      return;
    }
    case WeightFormat::kFp8Block: {
      const uint8_t* p = w.data + static_cast<size_t>(row) * in;
      const int64_t scale_cols = (in + w.block_in - 1) / w.block_in;
      const size_t scale_row = static_cast<size_t>(row / w.block_out) * scale_cols;
      for (int64_t b = 0; b < scale_cols; ++b) {
        const float s = ScaleAt(w, scale_row + b);
        const int64_t end = std::min(in, (b + 1) * w.block_in);
        for (int64_t i = b * w.block_in; i < end; ++i) out[i] = E4M3ToF32(p[i]) * s;
      }
      return;
    }
    case WeightFormat::kFp4Block: {
      const uint8_t* p = w.data + static_cast<size_t>(row) * (in / 2);
      const size_t scale_row = static_cast<size_t>(row) * (in / 32);
      for (int64_t b = 0; b < in / 32; ++b) {
        const float s = ScaleAt(w, scale_row + b);
        for (int64_t i = b * 32; i < b * 32 + 32; i += 2) {
          const uint8_t byte = p[i / 2];
          out[i] = E2M1ToF32(byte & 0xf) * s;
          out[i + 1] = E2M1ToF32(byte >> 4) * s;
        }
      }
      return;
    }
  }
}

}  // namespace deepinfer
