// Number formats of the released DeepSeek-V4 weights and of the reference numerics:
// e4m3fn, ue8m0 and e2m1 decoding, quantise-dequantise (QDQ) with power-of-two block scales, and
// the Sylvester Hadamard transform the lightning indexer applies before FP4 rounding.
#pragma once

#include <cstdint>
#include <cstring>

namespace deepinfer {

inline float Bf16ToF32(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
/// Round-to-nearest-even float -> bf16 bits (NaN stays NaN).
uint16_t F32ToBf16(float f);
float F16ToF32(uint16_t v);

/// ue8m0 byte e -> 2^(e-127); 0xFF is NaN.
float E8M0ToF32(uint8_t e);
/// e4m3fn byte -> value (bias 7, no infinities, 0x7F/0xFF NaN, max 448).
float E4M3ToF32(uint8_t b);
/// value -> nearest e4m3fn byte, ties to even, saturating at +-448.
uint8_t F32ToE4M3(float f);
/// e2m1 nibble (bit 3 sign) -> value in {0, 0.5, 1, 1.5, 2, 3, 4, 6} with sign.
float E2M1ToF32(uint8_t nibble);
/// value -> nearest e2m1 nibble, ties to even, saturating at +-6.
uint8_t F32ToE2M1(float f);

/// Power-of-two scale 2^ceil(log2(amax / fmt_max)) with amax floored at `floor`, as an exponent.
int Pow2ScaleExponent(float amax, float fmt_max, float floor);

/// In-place FP8 e4m3 QDQ of `n` values in blocks of `block`, each with its own ue8m0 scale.
void QdqFp8Blocks(float* x, int n, int block, float amax_floor);
/// In-place FP4 e2m1 QDQ of `n` values in blocks of `block` (ue8m0 scale per block).
void QdqFp4Blocks(float* x, int n, int block);
/// In-place normalised Sylvester-Hadamard transform (scale n^-1/2); n must be a power of two.
void HadamardTransform(float* x, int n);

}  // namespace deepinfer
