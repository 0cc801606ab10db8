// The integer forms of the exact one-token expert GEMV (kernels/expert_fp4_limbs.cu), shared with
// their host test: e2m1 nibbles as signed bytes holding twice their values, and an activation's
// integer q (|q| <= 448 * 512) as three bytes for DP4A. Host and device code, so the decode is
// checked on the host for every input.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define DI_LIMBS_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define DI_LIMBS_HOST_DEVICE inline
#endif

namespace deepinfer::kernels {

/// PRMT in its default mode (__byte_perm on the device): byte k of the result is byte
/// (s >> 4k) & 7 of the pair {y, x} (x bytes 0..3, y bytes 4..7), or, where bit 4k + 3 of s is
/// set, that byte's sign bit copied to all eight bits.
DI_LIMBS_HOST_DEVICE uint32_t BytePerm(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(x, y, s);
#else
  const uint64_t pair = (uint64_t{y} << 32) | x;
  uint32_t out = 0;
  for (int k = 0; k < 4; ++k) {
    const uint32_t sel = (s >> (4 * k)) & 0xf;
    uint32_t byte = static_cast<uint32_t>(pair >> (8 * (sel & 7))) & 0xff;
    if (sel & 8) byte = (byte & 0x80) ? 0xff : 0x00;
    out |= byte << (8 * k);
  }
  return out;
#endif
}

/// Four e2m1 nibbles (the low 16 bits of nib, first weight lowest) as signed bytes holding twice
/// their values (0, ±1, ±2, ±3, ±4, ±6, ±8, ±12): the magnitudes' codes pick from a positive and
/// a negative table, the sign bits pick between the two. Six integer instructions.
DI_LIMBS_HOST_DEVICE uint32_t DoubledE2m1x4(uint32_t nib) {
  const uint32_t code = nib & 0x7777u;  // selector bit 3 would sign-extend
  const uint32_t pos = BytePerm(0x03020100u, 0x0C080604u, code);  // 0 1 2 3 | 4 6 8 12
  const uint32_t neg = BytePerm(0xFDFEFF00u, 0xF4F8FAFCu, code);  // their negatives
  return BytePerm(pos, neg, ((nib >> 1) & 0x4444u) | 0x3210u);
}

/// The eight e2m1 nibbles of a word (first weight lowest) as DoubledE2m1x4 decodes its halves:
/// lo = DoubledE2m1x4(word), hi = DoubledE2m1x4(word >> 16). The mask and the sign selectors are
/// formed once for both halves: eleven integer instructions where the two calls take thirteen.
DI_LIMBS_HOST_DEVICE void DoubledE2m1x8(uint32_t word, uint32_t* lo, uint32_t* hi) {
  const uint32_t code = word & 0x77777777u;  // selector bit 3 would sign-extend
  const uint32_t sel = ((word >> 1) & 0x44444444u) | 0x32103210u;
  const uint32_t code_hi = code >> 16, sel_hi = sel >> 16;
  *lo = BytePerm(BytePerm(0x03020100u, 0x0C080604u, code), BytePerm(0xFDFEFF00u, 0xF4F8FAFCu, code),
                 sel);
  *hi = BytePerm(BytePerm(0x03020100u, 0x0C080604u, code_hi),
                 BytePerm(0xFDFEFF00u, 0xF4F8FAFCu, code_hi), sel_hi);
}

/// q's bytes for the three limb planes: bits 0-7 and 8-15 (unsigned), the rest (signed, -4..3
/// for |q| <= 229,376). q = (int8_t)top * 65536 + mid * 256 + low.
DI_LIMBS_HOST_DEVICE void SplitLimbs(int32_t q, uint32_t* low, uint32_t* mid, uint32_t* top) {
  *low = static_cast<uint32_t>(q) & 0xff;
  *mid = (static_cast<uint32_t>(q) >> 8) & 0xff;
  *top = static_cast<uint32_t>(q >> 16) & 0xff;  // arithmetic shift: two's complement byte
}

/// The block sum from the three planes' DP4A sums.
DI_LIMBS_HOST_DEVICE int32_t JoinLimbSums(int32_t low, int32_t mid, int32_t top) {
  return top * 65536 + mid * 256 + low;
}

}  // namespace deepinfer::kernels
