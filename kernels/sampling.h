// Token sampling on the GPU: the same picks as engine/sampling/sampler.h's SampleToken, so a
// request's tokens do not depend on which backend ran it. Device pointers; `stream` is a
// cudaStream_t as void*; returns the CUDA error code (0 on success).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/sample_pick.h"

namespace deepinfer::kernels {

using SampleParams = ::deepinfer::SampleParams;  // one row's parameters (sample_pick.h)

/// Buffers for up to `rows` rows of `vocab` logits, allocated once (nothing is allocated per
/// call): the sorted keys and ids, the candidates' probabilities and their running sums, CUB's
/// temporary storage.
class SamplerWorkspace {
 public:
  SamplerWorkspace() = default;
  ~SamplerWorkspace();
  SamplerWorkspace(const SamplerWorkspace&) = delete;
  SamplerWorkspace& operator=(const SamplerWorkspace&) = delete;
  int Reserve(int64_t rows, int32_t vocab);

 private:
  friend int SampleRows(SamplerWorkspace&, const float*, int64_t, int32_t, const uint32_t*,
                        const SampleParams*, const int32_t*, int32_t*, float*, void*);
  friend int SortedRows(SamplerWorkspace&, const float*, int64_t, int32_t, const uint32_t*,
                        const SampleParams*, const int32_t*, int32_t*, float*, void*);
  friend int GreedyRows(SamplerWorkspace&, const float*, int64_t, int32_t, const uint32_t*,
                        const SampleParams*, const int32_t*, int32_t*, float*, void*);
  friend int TopKRows(SamplerWorkspace&, const float*, int64_t, int32_t, const uint32_t*,
                      const SampleParams*, const int32_t*, int32_t*, float*, void*);
  friend int NucleusRows(SamplerWorkspace&, const float*, int64_t, int32_t, const uint32_t*,
                         const SampleParams*, const int32_t*, int32_t*, float*, void*);
  friend int NucleusRowsWithoutWalks(SamplerWorkspace&, const float*, int64_t, int32_t,
                                     const uint32_t*, const SampleParams*, const int32_t*, int32_t*,
                                     float*, void*);
  friend int UnsortedPicks(SamplerWorkspace&, const float*, int64_t, int32_t, const uint32_t*,
                           const SampleParams*, const int32_t*, bool, int32_t*, float*, void*);
  friend struct SamplerAccess;          // kernels/sampling.cu's shared pick
  friend struct SamplerWorkspaceProbe;  // tests/gpu/sampling_gpu_test.cc reads the sums back
  int64_t rows_ = 0;
  int32_t vocab_ = 0;
  float* sorted_keys_ = nullptr;  // each row's masked logits, largest first
  int32_t *ids_ = nullptr, *sorted_ids_ = nullptr;
  // The sort's keys (or TopKRows' tiles: rows * ceil(vocab / 4096) * 128 keys, which fit from
  // vocab 128 on), then the candidates' probabilities; the sorted keys (or the tiles' merges),
  // then each candidate's running sum within its run.
  double* probs_ = nullptr;
  double* prefix_ = nullptr;
  double* run_sums_ = nullptr;       // [rows, kMaxSumRuns]: each run's sum (ChunkedPrefix)
  double* logprob_parts_ = nullptr;  // [rows, 32]: slices' sums of exponentials
  float* picked_keys_ = nullptr;     // each row's picked token's masked logit
  void* temp_ = nullptr;
  size_t temp_bytes_ = 0;
  void* greedy_best_ = nullptr;  // GreedyRows' slices: [rows, kGreedySplits] candidates
  void* greedy_sums_ = nullptr;  // and exp-sums
  // [rows, kNucleusPartsMax]: NucleusRows' sums of its nucleus rows' terms, by slice of the row.
  double* nucleus_parts_ = nullptr;
};

/// Slices a row at most for GreedyRows (one block each).
constexpr int kGreedySplits = 32;

/// out[r] = the token SampleToken picks from row rows_of[r] of logits [.., vocab] (rows_of: a
/// device array; null: row r) with params[r] (device array), after the tokens whose bit is clear
/// in row r of bitmask ([rows, ceil(vocab / 32)] words, bit i % 32 of word i / 32; null: no
/// mask) are removed. Candidates in the same order (descending logit, ties by lower id: a stable
/// radix sort; id order for rows without a cut, UnsortedPicks), probabilities in double summed
/// in the same sequence, the same counter-based
/// draw: the same token, except where the draw falls within a few ulps of double of a boundary
/// (exp in double may differ in its last bit). With `logprobs` (device array; null: none),
/// logprobs[r] for rows whose params ask (SampleParams::logprob) is the picked token's
/// log-probability among the masked logits: ComputeLogprobs' value, its sum of exponentials in
/// another order (within float rounding); 0 for the other rows.
int SampleRows(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
               const uint32_t* bitmask, const SampleParams* params, const int32_t* rows_of,
               int32_t* out, float* logprobs, void* stream);

/// SampleRows for steps none of whose draws walk in id order (WalksIdOrder): the same tokens and
/// log-probabilities without the walk's three launches, which such a step would run for nothing.
/// A draw that walks is left unwritten.
int SortedRows(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
               const uint32_t* bitmask, const SampleParams* params, const int32_t* rows_of,
               int32_t* out, float* logprobs, void* stream);

/// SampleRows for draws that are all greedy (IsGreedy: temperature <= 0 or top_k 1): the same
/// tokens (the largest masked logit, lowest id among equals: the sort's first candidate) and
/// log-probabilities (their sum of exponentials in another order), without the sort: one read of
/// each row's logits over up to kGreedySplits blocks a row. Every params[r] must be greedy.
int GreedyRows(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
               const uint32_t* bitmask, const SampleParams* params, const int32_t* rows_of,
               int32_t* out, float* logprobs, void* stream);

/// SampleRows for draws that are all greedy or walk their candidates in id order (WalksIdOrder,
/// kernels/sample_pick.h: no top-k or top-p cut, as V4's card samples): the same tokens and
/// log-probabilities without the sort. Each row is read twice: the argmax over its slices (as
/// GreedyRows), then its terms summed in runs of kSumChunk ids, a warp a run.
int IdOrderRows(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
                const uint32_t* bitmask, const SampleParams* params, const int32_t* rows_of,
                int32_t* out, float* logprobs, void* stream);

/// The part of SampleRows, IdOrderRows and NucleusRows that needs no sort: the picks (and
/// log-probabilities) of the rows that walk in id order, and of the greedy rows too with
/// `greedy_too`; other rows' out and logprobs are left alone.
int UnsortedPicks(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
                  const uint32_t* bitmask, const SampleParams* params, const int32_t* rows_of,
                  bool greedy_too, int32_t* out, float* logprobs, void* stream);

/// SampleRows for draws that are all greedy, walk in id order, keep at most kTopKMax candidates
/// (top_k) or cut a nucleus without a top-k (TriesNucleusAmongSelected), over a vocabulary of at
/// least kTopKMax ids: the first kTopKMax candidates selected as TopKRows does, the walks as
/// IdOrderRows makes them. A nucleus row's candidates' probabilities are also summed over the
/// whole row in a parallel order: the sorted total lies within the slack of another summing
/// order of it (SumOrderSlack), and a cut that every total in that interval makes at the same
/// one of the selected candidates (TopPCutWithin) is SampleRows' cut to the bit, and so is the
/// draw: the same tokens and log-probabilities. A row whose nucleus runs past the selected, or
/// whose cut lies within that slack, is not drawn here: out[r] is -1 (logprobs[r] 0), for the
/// caller to draw with SortedRows.
int NucleusRows(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
                const uint32_t* bitmask, const SampleParams* params, const int32_t* rows_of,
                int32_t* out, float* logprobs, void* stream);

/// NucleusRows for steps none of whose draws walk in id order (WalksIdOrder): the same tokens
/// and log-probabilities without the walk's three launches. A draw that walks is left unwritten.
int NucleusRowsWithoutWalks(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
                            const uint32_t* bitmask, const SampleParams* params,
                            const int32_t* rows_of, int32_t* out, float* logprobs, void* stream);

/// SampleRows for draws that are all greedy or keep at most kTopKMax candidates (1 <= top_k <=
/// kTopKMax and top_k < vocab: a top-k of the whole vocabulary walks in id order, which this
/// path does not draw; kernels/sample_topk.h) over a vocabulary of at least kTopKMax ids: the same
/// tokens and log-probabilities, the candidates selected in 4,096-id tiles instead of sorting each
/// row.
int TopKRows(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
             const uint32_t* bitmask, const SampleParams* params, const int32_t* rows_of,
             int32_t* out, float* logprobs, void* stream);

}  // namespace deepinfer::kernels
