#include "engine/sampling/sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "kernels/sample_pick.h"

namespace deepinfer {
namespace {

// Candidate a before b: descending logit by DescendingKey (kernels/sample_pick.h), ties by
// lower id.
inline bool Before(const float* logits, int32_t a, int32_t b) {
  const uint32_t ka = DescendingKey(logits[a]), kb = DescendingKey(logits[b]);
  return ka < kb || (ka == kb && a < b);
}

// The first candidate in that order: the float comparison's first maximum (-0 and +0 tie, so
// the lower id stays) unless the row holds a NaN, which only the keys place.
int32_t Argmax(const float* logits, int32_t vocab) {
  int32_t best = static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  uint32_t unordered = 0;  // a plain reduction, which the compiler vectorises
  for (int32_t i = 0; i < vocab; ++i) unordered |= logits[i] != logits[i];
  if (!unordered) return best;
  best = 0;
  uint32_t best_key = DescendingKey(logits[0]);
  for (int32_t i = 1; i < vocab; ++i) {
    const uint32_t key = DescendingKey(logits[i]);
    if (key < best_key) {
      best = i;
      best_key = key;
    }
  }
  return best;
}

// All ids by descending logit, ties by lower id: a stable LSD radix sort (11-bit digits) of ids
// taken in ascending order, the same order the comparison sort gives, in a few linear passes
// instead of n log n indirect comparisons (129K logits: ~1 ms instead of ~15 ms).
void SortByLogit(const float* logits, int32_t n, std::vector<int32_t>& order) {
  thread_local std::vector<uint32_t> keys, keys_tmp;
  thread_local std::vector<int32_t> ids_tmp;
  keys.resize(n);
  keys_tmp.resize(n);
  ids_tmp.resize(n);
  order.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    keys[i] = DescendingKey(logits[i]);
    order[i] = i;
  }
  for (int shift = 0; shift < 32; shift += 11) {
    std::array<uint32_t, 2049> count{};
    for (int32_t i = 0; i < n; ++i) ++count[((keys[i] >> shift) & 2047u) + 1];
    for (size_t d = 1; d < count.size(); ++d) count[d] += count[d - 1];
    for (int32_t i = 0; i < n; ++i) {
      const uint32_t at = count[(keys[i] >> shift) & 2047u]++;
      keys_tmp[at] = keys[i];
      ids_tmp[at] = order[i];
    }
    keys.swap(keys_tmp);
    order.swap(ids_tmp);
  }
}

// A top-p draw without top-k from the first kNucleusIds candidates only: the sorted draw's token
// exactly where the cut among them is decided, else -1 (and SampleToken sorts).
//
// Neither a sort nor every id's exponential. A histogram of the candidates' keys by their top 16
// bits finds the buckets holding the first kNucleusIds candidates and bounds every bucket's
// terms by its logits' bounds. The candidates' terms are formed exactly (the sorted draw's own
// values) with their running sums. Where those fall short of top_p times the least the total can
// be, the nucleus ends past them and the row goes to the sort. Otherwise the terms of every
// bucket that matters are formed exactly too, and the far buckets, whose terms together are too
// small for their bounds' spread to matter, enter the total as an interval. The sorted total then
// lies in an interval (widened by SumOrderSlack for the order of summing), and where every total
// in it cuts at the same candidate (TopPCutWithin's rule), that is the sorted draw's cut; the
// draw after it reads only the candidates' running sums.
constexpr int32_t kNucleusIds = 2048;
constexpr int kBucketShift = 16;
constexpr uint32_t kBuckets = 1u << (32 - kBucketShift);
// The far buckets' spread allowed in the total, relative to it.
constexpr double kTailSpread = 1e-10;
// Draws a thread sorts at once after two attempts in a row found no cut (flat rows).
constexpr int kNucleusBackoff = 16;

struct KeyBuckets {
  std::vector<int32_t> count;
  std::vector<double> lo, hi;  // the bounds of a bucket's terms
  uint32_t last = 0;           // the bucket of the known-th candidate
  double top = 0;              // the first candidate's logit
};

// The row's buckets and their terms' bounds; false for NaN logits or a non-finite first logit,
// whose draws the sort decides.
bool FillBuckets(const float* logits, int32_t vocab, int32_t known, double inv_t, KeyBuckets& k) {
  k.count.assign(kBuckets, 0);
  k.lo.resize(kBuckets);
  k.hi.resize(kBuckets);
  bool unordered = false;
  for (int32_t i = 0; i < vocab; ++i) {
    unordered |= logits[i] != logits[i];
    ++k.count[DescendingKey(logits[i]) >> kBucketShift];
  }
  if (unordered) return false;
  k.last = 0;
  for (int32_t seen = k.count[0]; seen < known; seen += k.count[++k.last]) {
  }
  k.top = *std::max_element(logits, logits + vocab);  // no NaN: Argmax's value, without its scan
  if (!std::isfinite(k.top)) return false;
  for (uint32_t b = 0; b < kBuckets; ++b) {
    if (k.count[b] == 0) continue;
    // -inf's bucket ends in NaN patterns, which no logit of the row holds: its terms are 0.
    const float lo = KeyLogit(b << kBucketShift | 0xffffu);
    k.hi[b] = std::exp((KeyLogit(b << kBucketShift) - k.top) * inv_t);
    k.lo[b] = lo != lo ? 0.0 : std::exp((lo - k.top) * inv_t);
  }
  return true;
}

int32_t NucleusAmongSelected(const float* logits, int32_t vocab, double inv_t, float min_p,
                             float top_p, double u) {
  thread_local KeyBuckets k;
  const int32_t known = std::min(kNucleusIds, vocab);
  if (!FillBuckets(logits, vocab, known, inv_t, k)) return -1;
  // The kept total's least (buckets whose every term is kept) and the candidates' buckets' most:
  // where even that most falls short of the share, the row is flat, decided in one pass. An error
  // in either only sends a row to the sort.
  double least = 0, most = 0;
  for (uint32_t b = 0; b < kBuckets; ++b) {
    if (k.count[b] == 0) continue;
    if (k.lo[b] >= min_p) least += k.count[b] * k.lo[b];
    if (b <= k.last) most += k.count[b] * k.hi[b];
  }
  if (most < top_p * least * (1.0 - 1e-6)) return -1;
  // The first `known` candidates in order, their exact terms and running sums.
  thread_local std::vector<uint64_t> keys;  // (key, id): the candidates' order, total
  keys.clear();
  for (int32_t i = 0; i < vocab; ++i) {
    const uint32_t key = DescendingKey(logits[i]);
    if ((key >> kBucketShift) <= k.last) keys.push_back(uint64_t{key} << 32 | uint32_t(i));
  }
  if (keys.size() > 2 * static_cast<size_t>(known)) {  // a crowded last bucket (ties, masks)
    std::nth_element(keys.begin(), keys.begin() + (known - 1), keys.end());
    std::sort(keys.begin(), keys.begin() + known);
  } else {
    std::sort(keys.begin(), keys.end());
  }
  thread_local std::vector<double> p, prefix;
  p.resize(known);
  prefix.resize(known);
  const auto id = [&](int32_t j) { return static_cast<int32_t>(static_cast<uint32_t>(keys[j])); };
  for (int32_t j = 0; j < known; ++j) p[j] = std::exp((logits[id(j)] - k.top) * inv_t);
  ChunkedPrefix(p.data(), known, prefix.data());
  if (known == vocab || (min_p > 0 && p[known - 1] < min_p)) {  // every kept term is at hand
    return id(PickCandidate(p.data(), prefix.data(), known, min_p, top_p, u));
  }
  const double slack = 2 * SumOrderSlack(vocab);
  if (prefix[known - 1] < top_p * least * (1.0 - slack)) return -1;  // the nucleus ends later
  // The far buckets, from the end while their spread stays small and (with a floor) their terms
  // all fall below it; every other id's term exactly.
  uint32_t exact_last = kBuckets - 1;
  double spread = 0, tail_lo = 0, tail_hi = 0;
  for (; exact_last > k.last; --exact_last) {
    const uint32_t b = exact_last;
    if (k.count[b] == 0) continue;
    const double more = k.count[b] * (k.hi[b] - k.lo[b]);
    // With a floor, a bucket stays out only if its every term falls below it (a margin for an
    // exponential one ulp off monotone: a misplaced term would change the kept total).
    if (min_p > 0 ? k.hi[b] * (1.0 + 1e-12) >= min_p : spread + more > kTailSpread * least) break;
    spread += more;
    if (min_p == 0) {
      tail_lo += k.count[b] * k.lo[b];
      tail_hi += k.count[b] * k.hi[b];
    }
  }
  double exact = 0;
  int32_t kept = 0, tail = 0;
  for (int32_t i = 0; i < vocab; ++i) {
    if ((DescendingKey(logits[i]) >> kBucketShift) > exact_last) {
      ++tail;
      continue;
    }
    const double t = std::exp((logits[i] - k.top) * inv_t);
    if (min_p > 0 && t < min_p) continue;  // PickCandidate's floor: min_p times the first's 1
    exact += t;
    ++kept;
  }
  if (min_p == 0) kept += tail;  // with a floor the far terms all fall below it
  if (kept <= known) return id(PickCandidate(p.data(), prefix.data(), kept, min_p, top_p, u));
  const int32_t cut =
      TopPCutBetween(prefix.data(), known, top_p * ((exact + tail_lo) * (1.0 - slack)),
                     top_p * ((exact + tail_hi) * (1.0 + slack)));
  if (cut < 0) return -1;
  const int32_t i = FirstPast(prefix.data(), cut + 1, u * prefix[cut], false);
  return id(i <= cut ? i : cut);
}

}  // namespace

void TokenHistory::Bump(int32_t t, bool output) {
  if (t < 0) return;
  if (static_cast<size_t>(t) >= index_.size()) index_.resize(t + 1, 0);
  if (index_[t] == 0) {
    entries_.push_back({t, 0});
    index_[t] = static_cast<int32_t>(entries_.size());
  }
  if (output) entries_[index_[t] - 1].output_count++;
}

void ApplyLogitProcessors(float* logits, int32_t vocab, const SamplingConfig& cfg,
                          const TokenHistory& history) {
  for (const auto& [token, bias] : cfg.logit_bias) {
    if (token >= 0 && token < vocab) logits[token] += bias;
  }
  const bool repetition = cfg.repetition_penalty != 1.0f;
  if (!repetition && cfg.frequency_penalty == 0 && cfg.presence_penalty == 0) return;
  for (const auto& e : history.entries()) {
    if (e.token >= vocab) continue;
    float& l = logits[e.token];
    if (repetition) l = l > 0 ? l / cfg.repetition_penalty : l * cfg.repetition_penalty;
    if (e.output_count > 0) {
      l -= cfg.frequency_penalty * static_cast<float>(e.output_count) + cfg.presence_penalty;
    }
  }
}

void ComputeLogprobs(const float* logits, int32_t vocab, int32_t chosen, int top_n,
                     TokenLogprobs* out) {
  const float mx = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double log_z = mx + std::log(sum);
  out->chosen = static_cast<float>(logits[chosen] - log_z);
  out->top.clear();
  if (top_n <= 0) return;
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  const int n = std::min(top_n, vocab);
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    [logits](int32_t a, int32_t b) { return Before(logits, a, b); });
  for (int i = 0; i < n; ++i)
    out->top.emplace_back(order[i], static_cast<float>(logits[order[i]] - log_z));
}

double CounterUniform(uint64_t seed, uint64_t stream, uint64_t position) {
  return CounterDraw(seed, stream, position);
}

int32_t SampleToken(const float* logits, int32_t vocab, const SamplingConfig& cfg, uint64_t stream,
                    uint64_t position, std::vector<int32_t>& order) {
  if (IsGreedy(cfg.temperature, cfg.top_k)) return Argmax(logits, vocab);
  const double inv_t = 1.0 / cfg.temperature;
  thread_local std::vector<double> p, prefix;
  const double u = CounterUniform(cfg.seed, stream, position);
  if (WalksIdOrder(cfg.temperature, cfg.top_k, cfg.top_p, vocab)) {  // no cut: no sort
    const double top = logits[Argmax(logits, vocab)];
    p.resize(vocab);
    prefix.resize(vocab);
    for (int32_t i = 0; i < vocab; ++i) p[i] = IdOrderTerm(logits[i], top, inv_t, cfg.min_p);
    ChunkedPrefix(p.data(), vocab, prefix.data());
    return PickInIdOrder(prefix.data(), vocab, u);
  }
  // Candidates by descending logit; ties by lower id, so the order is fully determined.
  const int32_t n = CandidateCount(cfg.top_k, vocab);
  if (TriesNucleusAmongSelected(cfg.temperature, cfg.top_k, cfg.top_p, vocab)) {
    // Flat rows cost the attempt and then the sort: after two misses in a row this thread sorts
    // the next kNucleusBackoff draws at once (the same tokens either way), as the GPU's draws do.
    thread_local int misses = 0, skip = 0;
    if (skip > 0) {
      --skip;
    } else {
      const int32_t id = NucleusAmongSelected(logits, vocab, inv_t, cfg.min_p, cfg.top_p, u);
      if (id >= 0) {
        misses = 0;
        return id;
      }
      if (++misses == 2) {
        misses = 0;
        skip = kNucleusBackoff;
      }
    }
  }
  if (n <= 1024) {  // a small top-k: selecting beats sorting everything
    order.resize(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + n, order.end(),
                      [logits](int32_t a, int32_t b) { return Before(logits, a, b); });
  } else {
    SortByLogit(logits, vocab, order);
  }
  const double top = logits[order[0]];
  p.resize(n);
  prefix.resize(n);
  for (int32_t i = 0; i < n; ++i) p[i] = std::exp((logits[order[i]] - top) * inv_t);
  ChunkedPrefix(p.data(), n, prefix.data());
  return order[PickCandidate(p.data(), prefix.data(), n, cfg.min_p, cfg.top_p, u)];
}

int32_t NucleusDraw(const float* logits, int32_t vocab, const SamplingConfig& cfg, uint64_t stream,
                    uint64_t position) {
  if (vocab < 1 || !TriesNucleusAmongSelected(cfg.temperature, cfg.top_k, cfg.top_p, vocab)) {
    return -1;
  }
  return NucleusAmongSelected(logits, vocab, 1.0 / cfg.temperature, cfg.min_p, cfg.top_p,
                              CounterUniform(cfg.seed, stream, position));
}

int32_t SampleToken(const float* logits, int32_t vocab, const SampleParams& p,
                    std::vector<int32_t>& scratch) {
  SamplingConfig cfg;
  cfg.temperature = p.temperature;
  cfg.top_p = p.top_p;
  cfg.top_k = p.top_k;
  cfg.min_p = p.min_p;
  cfg.seed = p.seed;
  return SampleToken(logits, vocab, cfg, p.stream, p.position, scratch);
}

}  // namespace deepinfer
