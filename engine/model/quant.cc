#include "engine/model/quant.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace deepinfer {

uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float F16ToF32(uint16_t v) {
  const int sign = (v >> 15) & 1, exp = (v >> 10) & 0x1f, man = v & 0x3ff;
  float r;
  if (exp == 0) {
    r = std::ldexp(static_cast<float>(man), -24);
  } else if (exp == 31) {
    r = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    r = std::ldexp(static_cast<float>(man | 0x400), exp - 25);
  }
  return sign ? -r : r;
}

float E8M0ToF32(uint8_t e) {
  if (e == 0xff) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(e) - 127);
}

namespace {

constexpr float Pow2(int e) {
  float r = 1.0f;
  for (; e > 0; --e) r *= 2.0f;
  for (; e < 0; ++e) r *= 0.5f;
  return r;
}

constexpr float DecodeE4M3(uint8_t b) {
  const int exp = (b >> 3) & 0xf, man = b & 0x7;
  if (exp == 0xf && man == 0x7) return std::numeric_limits<float>::quiet_NaN();
  const float r =
      exp == 0 ? static_cast<float>(man) * Pow2(-9) : static_cast<float>(8 + man) * Pow2(exp - 10);
  return (b & 0x80) ? -r : r;
}

struct E4M3Table {
  float v[256] = {};
  constexpr E4M3Table() {
    for (int i = 0; i < 256; ++i) v[i] = DecodeE4M3(static_cast<uint8_t>(i));
  }
};
// Decoding sits in every FP8 row dequantisation: a compile-time table, not ldexp.
constexpr E4M3Table kE4M3;

}  // namespace

float E4M3ToF32(uint8_t b) { return kE4M3.v[b]; }

namespace {

// Nearest representable value of a small float grid, ties to the even code (lower code index
// parity), which is what hardware and PyTorch casts do.
template <int N>
uint8_t NearestCode(float a, const float (&grid)[N]) {
  int best = 0;
  for (int i = 1; i < N; ++i) {
    float d_best = std::fabs(a - grid[best]), d = std::fabs(a - grid[i]);
    if (d < d_best || (d == d_best && (i % 2 == 0) && (best % 2 == 1))) best = i;
  }
  return static_cast<uint8_t>(best);
}

struct E4M3Grid {
  float v[127];  // codes 0x00..0x7E (positive, finite)
  E4M3Grid() {
    for (int i = 0; i < 127; ++i) v[i] = E4M3ToF32(static_cast<uint8_t>(i));
  }
};

}  // namespace

uint8_t F32ToE4M3(float f) {
  static const E4M3Grid grid;
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::min(std::fabs(f), 448.0f);
  // Binary search for the bracketing codes, then round to nearest, ties to even code.
  const float* it = std::lower_bound(grid.v, grid.v + 127, a);
  int hi = static_cast<int>(it - grid.v);
  if (hi >= 127) return sign | 0x7e;
  if (grid.v[hi] == a || hi == 0) return sign | static_cast<uint8_t>(hi);
  int lo = hi - 1;
  float dl = a - grid.v[lo], dh = grid.v[hi] - a;
  int code = dl < dh ? lo : (dh < dl ? hi : (lo % 2 == 0 ? lo : hi));
  return sign | static_cast<uint8_t>(code);
}

float E2M1ToF32(uint8_t nibble) {
  static const float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float m = kMag[nibble & 7];
  return (nibble & 8) ? -m : m;
}

uint8_t F32ToE2M1(float f) {
  static const float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const uint8_t sign = std::signbit(f) ? 8 : 0;
  return sign | NearestCode(std::min(std::fabs(f), 6.0f), kMag);
}

int Pow2ScaleExponent(float amax, float fmt_max, float floor) {
  const float a = std::max(amax, floor);
  return static_cast<int>(std::ceil(std::log2(a / fmt_max)));
}

void QdqFp8Blocks(float* x, int n, int block, float amax_floor) {
  for (int b0 = 0; b0 < n; b0 += block) {
    const int b1 = std::min(n, b0 + block);
    float amax = 0.0f;
    for (int i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(x[i]));
    const int e = Pow2ScaleExponent(amax, 448.0f, amax_floor);
    for (int i = b0; i < b1; ++i) {
      const float q = std::clamp(std::ldexp(x[i], -e), -448.0f, 448.0f);
      x[i] = std::ldexp(E4M3ToF32(F32ToE4M3(q)), e);
    }
  }
}

void QdqFp4Blocks(float* x, int n, int block) {
  const float floor = 6.0f * std::ldexp(1.0f, -126);
  for (int b0 = 0; b0 < n; b0 += block) {
    const int b1 = std::min(n, b0 + block);
    float amax = 0.0f;
    for (int i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(x[i]));
    const int e = Pow2ScaleExponent(amax, 6.0f, floor);
    for (int i = b0; i < b1; ++i) {
      const float q = std::clamp(std::ldexp(x[i], -e), -6.0f, 6.0f);
      x[i] = std::ldexp(E2M1ToF32(F32ToE2M1(q)), e);
    }
  }
}

void HadamardTransform(float* x, int n) {
  for (int len = 1; len < n; len <<= 1) {
    for (int i = 0; i < n; i += len << 1) {
      for (int j = i; j < i + len; ++j) {
        const float a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
    }
  }
  const float s = 1.0f / std::sqrt(static_cast<float>(n));
  for (int i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace deepinfer
