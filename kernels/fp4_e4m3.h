// MXFP4 weights as e4m3 tensor-core operands, shared by the expert kernels and their host tests.
// e2m1 (sign, 2 exponent bits, 1 mantissa bit; 0, 0.5, 1, 1.5, 2, 3, 4, 6) placed at e4m3's bits
// 4..2 is exactly 2^-6 times its value, the subnormal 0.5 included. Shifting that byte up by d
// binades is exact for every e2m1 value while d <= 12 (6 * 2^-6 * 2^12 = 384 < 448, e4m3's
// largest): what lets a 128-wide block of four e8m0 scales become one scale, the four blocks'
// exponents folded into the operand relative to their smallest (docs/gpu.md, "Expert GEMM").
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define DI_FP4_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define DI_FP4_HOST_DEVICE inline
#endif

namespace deepinfer::kernels {

/// Eight e2m1 nibbles (one 32-bit word, weight 0 lowest) as two registers of four e4m3 bytes,
/// each 2^-6 times its weight: the even weights (0, 2, 4, 6) and the odd ones. The sign moves to
/// bit 7. Seven integer instructions per eight weights.
DI_FP4_HOST_DEVICE void Fp4ToE4m3(uint32_t w, uint32_t* even, uint32_t* odd) {
  *even = ((w << 4) & 0x80808080u) | ((w << 2) & 0x1c1c1c1cu);
  *odd = (w & 0x80808080u) | ((w >> 2) & 0x1c1c1c1cu);
}

/// Four e4m3 bytes as Fp4ToE4m3 makes them, each times 2^shift (0 <= shift <= 12), exactly: a
/// nonzero byte's exponent field grows by shift, and the subnormal 2^-7 (e2m1's 0.5) becomes the
/// normal 2^(shift - 7). Byte-parallel integer arithmetic: no carry crosses a byte, since the
/// field stays <= 15 below the sign bit.
DI_FP4_HOST_DEVICE uint32_t ShiftE4m3(uint32_t x, uint32_t shift) {
  const uint32_t magnitude = x & 0x7c7c7c7cu;  // field (bits 6..3) and mantissa (bit 2)
  const uint32_t nonzero = ((magnitude + 0x7c7c7c7cu) & 0x80808080u) >> 7;
  const uint32_t field_nonzero = (((x & 0x78787878u) + 0x78787878u) & 0x80808080u) >> 7;
  const uint32_t subnormal = nonzero & ~field_nonzero;  // 0x01 per byte holding 2^-7
  return x + nonzero * (shift << 3) - (shift > 0 ? subnormal * 4u : 0u);
}

/// The fold of four consecutive e8m0 scales (one 128-wide block of a row): *base their smallest
/// exponent and shifts[j] = scale[j] - *base. False when the four cannot fold exactly (a spread
/// above 12, or a NaN scale 0xff), or when the base exceeds 248: the folded kernel scales by
/// 2^(base - 127) * 64, which must stay finite in fp32.
DI_FP4_HOST_DEVICE bool FoldScales(const uint8_t* scale4, uint8_t* base, uint8_t* shifts) {
  uint8_t lo = scale4[0], hi = scale4[0];
  for (int j = 1; j < 4; ++j) {
    lo = scale4[j] < lo ? scale4[j] : lo;
    hi = scale4[j] > hi ? scale4[j] : hi;
  }
  *base = lo;
  for (int j = 0; j < 4; ++j) shifts[j] = static_cast<uint8_t>(scale4[j] - lo);
  return hi != 0xff && hi - lo <= 12 && lo <= 248;
}

/// Whether every 128-wide block of an MXFP4 matrix's e8m0 scales [out, in / 32] folds
/// (FoldScales); in % 128 == 0. What a loader checks before choosing a folded expert kernel.
inline bool ScalesFold(const uint8_t* scales, int64_t out, int64_t in) {
  uint8_t base, shifts[4];
  for (int64_t i = 0; i < out * (in / 32); i += 4) {
    if (!FoldScales(scales + i, &base, shifts)) return false;
  }
  return true;
}

}  // namespace deepinfer::kernels
