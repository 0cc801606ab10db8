// The part of token sampling the CPU sampler (engine/sampling/sampler.cc) and the GPU sampler
// (kernels/sampling.cu, sample_greedy.cu, sample_topk.cu) share, written once so their picks
// agree: the candidates' order key, the counter-based draw, the order in which the candidates'
// probabilities are summed, and the walks over them: min-p, top-p, then the draw over the
// candidates sorted, or the draw over them in id order where no cut needs the sort.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/exact_math.h"  // DI_HOST_DEVICE

namespace deepinfer {

/// One row's sampling parameters, for a draw made from its logits after the logit processors
/// (penalties, biases) have been applied: SamplingConfig's sampling part (engine/sampling/
/// sampler.h) and the counter of the draw (seed, the request's stream, the token's position).
struct SampleParams {
  float temperature = 1.0f;  // <= 0: greedy
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1]
  int32_t top_k = -1;        // <= 0: off
  uint64_t seed = 0, stream = 0, position = 0;
  // Nonzero: the draw also reports the chosen token's log-probability among the (masked)
  // logits, before temperature (engine/sampling/sampler.h's ComputeLogprobs).
  uint32_t logprob = 0;
};

/// Greedy decoding: the largest logit, lowest id among equals.
DI_HOST_DEVICE inline bool IsGreedy(float temperature, int32_t top_k) {
  return temperature <= 0.0f || top_k == 1;
}

/// A logit's place in the candidates' order as an unsigned key: ascending keys are descending
/// logits, -0 tied with +0, a positive NaN above +inf and a negative one below -inf (where float
/// comparisons leave NaN no place). Both samplers sort and compare candidates by these keys,
/// ties by lower id.
DI_HOST_DEVICE inline uint32_t DescendingKey(float f) {
#ifdef __CUDA_ARCH__
  if (f == 0.0f) f = 0.0f;  // -0 ties with +0
  uint32_t u = __float_as_uint(f);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return ~u;
#else
  // The same key without a branch: the host forms it for every id of a row, and random signs
  // mispredicted the sign's branch half the time (~6 ns an id on the dev VM; bench/RESULTS.md).
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  u = u == 0x80000000u ? 0u : u;  // -0 ties with +0
  const uint32_t flip = static_cast<uint32_t>(static_cast<int32_t>(u) >> 31) | 0x80000000u;
  return ~(u ^ flip);
#endif
}

/// The logit a DescendingKey was made from (+0 for either zero).
DI_HOST_DEVICE inline float KeyLogit(uint32_t key) {
  const uint32_t ascending = ~key;
  const uint32_t u = (ascending & 0x80000000u) ? (ascending & 0x7fffffffu) : ~ascending;
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

/// How many of the sorted candidates sampling considers.
DI_HOST_DEVICE inline int32_t CandidateCount(int32_t top_k, int32_t vocab) {
  return top_k > 0 && top_k < vocab ? top_k : vocab;
}

/// Whether a draw walks its candidates in id order: not greedy, and no top-k or top-p cut, which
/// only the sorted order can make (V4's card samples so: temperature 1, top_p 1). Where no prefix
/// of the sorted candidates is cut, any fixed order draws each token with its probability, and
/// the id order needs no sort: both samplers then skip it (docs/gpu-sampler.md).
DI_HOST_DEVICE inline bool WalksIdOrder(float temperature, int32_t top_k, float top_p,
                                        int32_t vocab) {
  return !IsGreedy(temperature, top_k) && CandidateCount(top_k, vocab) == vocab && !(top_p < 1.0f);
}

/// Whether NucleusRows (kernels/sampling.h) tries a draw's top-p cut among the first selected
/// candidates, bounding their sorted total by the same terms summed in another order
/// (TopPCutWithin): a top-p cut and no top-k (a top-k's candidates are all selected or all
/// sorted anyway).
DI_HOST_DEVICE inline bool TriesNucleusAmongSelected(float temperature, int32_t top_k, float top_p,
                                                     int32_t vocab) {
  return !IsGreedy(temperature, top_k) && CandidateCount(top_k, vocab) == vocab && top_p < 1.0f;
}

/// A token's term in the id-order walk: exp((logit - top) / T) in double, where top is the first
/// candidate's logit, and 0 below the min-p floor (min_p times the first's term, which is 1).
DI_HOST_DEVICE inline double IdOrderTerm(float logit, double top, double inv_t, float min_p) {
  const double p = exp((logit - top) * inv_t);
  return min_p > 0 && p < min_p ? 0.0 : p;
}

/// splitmix64's finaliser.
DI_HOST_DEVICE inline uint64_t SplitMix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A uniform double in [0, 1) from (seed, stream, position).
DI_HOST_DEVICE inline double CounterDraw(uint64_t seed, uint64_t stream, uint64_t position) {
  const uint64_t bits = SplitMix(SplitMix(SplitMix(seed) ^ stream) ^ position);
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

/// Terms per run of the candidates' sum (see ChunkedPrefix).
constexpr int32_t kSumChunk = 512;
/// Runs a row may have on the GPU sampler (its block keeps their bases in shared memory): the
/// largest vocabulary it draws from, kSumChunk * kMaxSumRuns = 524,288 ids.
constexpr int32_t kMaxSumRuns = 1024;

/// prefix[i]: the running sum of the candidates' probabilities p[0 .. i] in the one order both
/// samplers add them — from zero within each run of kSumChunk terms, each partial sum added to
/// the sum of the whole runs before it (those added in order from zero). The runs let the GPU
/// add them in parallel and still agree with the host to the last bit; the prefix sums never
/// fall (sums of non-negative terms), so the walks below are binary searches.
DI_HOST_DEVICE inline void ChunkedPrefix(const double* p, int32_t n, double* prefix) {
  double base = 0;
  for (int32_t c0 = 0; c0 < n; c0 += kSumChunk) {
    const int32_t end = n - c0 < kSumChunk ? n : c0 + kSumChunk;
    double within = 0;
    for (int32_t i = c0; i < end; ++i) {
      within += p[i];
      prefix[i] = base + within;
    }
    base += within;
  }
}

/// The first index in [0, n) whose v passes x (above x, or at least x with `or_equal`), else n;
/// v must not fall.
DI_HOST_DEVICE inline int32_t FirstPast(const double* v, int32_t n, double x, bool or_equal) {
  int32_t lo = 0, hi = n;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (or_equal ? v[mid] >= x : x < v[mid]) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

/// The index of the candidate drawn from p[0 .. n) (unnormalised probabilities, most likely
/// first, so they never rise) and their running sums (ChunkedPrefix): drop those below min_p
/// times the first, keep the smallest prefix whose mass reaches top_p of what is left, then take
/// the first candidate whose running sum passes the draw u in [0, 1) times the kept mass.
DI_HOST_DEVICE inline int32_t PickCandidate(const double* p, const double* prefix, int32_t n,
                                            float min_p, float top_p, double u) {
  int32_t keep = n;
  if (min_p > 0) {  // the terms below the floor are a suffix; the first always stays
    const double floor = min_p * p[0];
    int32_t lo = 1, hi = n;
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo) / 2;
      if (p[mid] < floor) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    keep = lo;
  }
  double sum = prefix[keep - 1];
  if (top_p < 1.0f) {
    const int32_t i = FirstPast(prefix, keep, top_p * sum, true);
    if (i < keep) {
      keep = i + 1;
      sum = prefix[i];
    }
  }
  const int32_t i = FirstPast(prefix, keep, u * sum, false);
  return i < keep ? i : keep - 1;
}

/// The id drawn by the id-order walk from prefix[0 .. n) (ChunkedPrefix of IdOrderTerm in id
/// order): the first whose running sum passes the draw u in [0, 1) times the total (u times a
/// positive total is below it, so one always does). Sums of 0 cannot arise from a row (the
/// first candidate's term is 1) and draw id 0; NaN sums (NaN logits, or every token masked,
/// which the engine refuses before drawing) draw the last id.
DI_HOST_DEVICE inline int32_t PickInIdOrder(const double* prefix, int32_t n, double u) {
  const double total = prefix[n - 1];
  const int32_t i = FirstPast(prefix, n, u * total, false);
  if (i < n) return i;
  return total == 0 ? 0 : n - 1;
}

/// How far apart, relative to either, two sums of the same n non-negative doubles taken in
/// different orders can land: each is within (n - 1)u / (1 - (n - 1)u) of the exact sum (u =
/// 2^-53), so apart by at most twice that; padded so that rounding the bounds formed from it
/// (a product or two) cannot move them inside.
DI_HOST_DEVICE inline double SumOrderSlack(int32_t n) {
  const double g = (n > 1 ? n - 1 : 0) * 0x1p-53;
  return 2.0 * g / (1.0 - g) * 1.0001 + 0x1p-50;
}

/// Where top_p times the candidates' sorted total lies when the same terms summed in another
/// order came to `total` (within `slack` of it relatively: SumOrderSlack): between *lo and *hi.
DI_HOST_DEVICE inline void TopPShareBounds(double total, double slack, float top_p, double* lo,
                                           double* hi) {
  *lo = top_p * (total * (1.0 - slack));
  *hi = top_p * (total * (1.0 + slack));
}

/// PickCandidate's top-p cut (the first i whose prefix[i] reaches top_p times the candidates'
/// total), where only prefix[0 .. known) is at hand, exact, and top_p times the total is only
/// known to lie in [lo_share, hi_share]: i when every share in that interval cuts at the same
/// i < known, else -1 (the cut depends on where the share lies, or falls past the known prefix).
/// The draw after the cut reads prefix[0 .. i] only, so it is then PickCandidate's too.
DI_HOST_DEVICE inline int32_t TopPCutBetween(const double* prefix, int32_t known, double lo_share,
                                             double hi_share) {
  const int32_t lo = FirstPast(prefix, known, lo_share, true);
  const int32_t hi = FirstPast(prefix, known, hi_share, true);
  return lo == hi && hi < known ? hi : -1;
}

/// PickCandidate's top-p cut where the total is known to lie within `slack` of `total`
/// (relatively: another order's sum, SumOrderSlack): TopPCutBetween the shares of that interval.
DI_HOST_DEVICE inline int32_t TopPCutWithin(const double* prefix, int32_t known, double total,
                                            double slack, float top_p) {
  double lo_share, hi_share;
  TopPShareBounds(total, slack, top_p, &lo_share, &hi_share);
  return TopPCutBetween(prefix, known, lo_share, hi_share);
}

}  // namespace deepinfer
