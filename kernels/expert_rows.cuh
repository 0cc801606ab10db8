// The weight rows a warp of the MXFP4 expert GEMVs takes (kernels/expert_fp4.cu,
// kernels/expert_fp4_limbs.cu): one 16-byte chunk of 32 weights a lane and step, so the rows are
// addressed as uint4 chunks, with one e8m0 scale byte per chunk.
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

/// The Outs rows from o0 of a [out, in] MXFP4 matrix w with scales s (Paired: Outs / 2 rows of w
/// and the same rows of w2 with scales s2). Rows past the end re-read the last row: their results
/// are not stored.
template <int Outs, bool Paired>
__device__ __forceinline__ void WarpWeightRows(const uint8_t* w, const uint8_t* s,
                                               const uint8_t* w2, const uint8_t* s2, int64_t out,
                                               int64_t in, int64_t o0, const uint4* (&wr)[Outs],
                                               const uint8_t* (&sr)[Outs]) {
  constexpr int kPerMat = Paired ? Outs / 2 : Outs;
#pragma unroll
  for (int j = 0; j < Outs; ++j) {
    const int64_t o = o0 + j % kPerMat < out ? o0 + j % kPerMat : out - 1;
    const bool up = Paired && j >= kPerMat;
    wr[j] = reinterpret_cast<const uint4*>((up ? w2 : w) + o * (in / 2));
    sr[j] = (up ? s2 : s) + o * (in / 32);
  }
}

}  // namespace deepinfer::kernels
