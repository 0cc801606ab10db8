// The device forward's step as a sequence of kernel launches on device buffers only (internal to
// device_forward.cc): everything a step of `rows` tokens reads — token ids, positions,
// slots and the cache addresses derived from them — sits in one input block the host uploads
// before the launch, so the same launches replay as a CUDA graph for any step of that size.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/cuda/device_weights.h"
#include "engine/model/config.h"
#include "kernels/expert_fp4.h"
#include "kernels/gemm_bf16.h"
#include "kernels/gemm_fp8.h"

namespace deepinfer {

/// Per step and row, the addresses in the caches of one compress ratio (every layer of that
/// ratio has the same layout). Pool rows: the compressed rows of slot s at s * R .. s * R + R - 1,
/// then the rings, slot s's `ring` rows from (slots + 1) * R + s * ring (step_rows.h).
struct RatioInputs {
  int ratio = 0;
  int64_t rows_per_slot = 0;     // R: compressed rows a slot holds (max_context / ratio)
  int64_t* comp_pos = nullptr;   // position of the window's first token (the row's RoPE)
  int32_t* ring_row = nullptr;   // pool row of the row's ring slot 0
  int32_t* ring_dest = nullptr;  // pool row its new KV row goes to
  int32_t* page = nullptr;       // its page of compressed rows (the slot)
  int32_t* visible = nullptr;    // compressed rows it may see after this step
  int32_t* comp_dest = nullptr;  // pool row of the row it closes, or -1
};

struct StepInputs {
  int32_t* tokens = nullptr;
  int32_t* slot = nullptr;
  int64_t* pos = nullptr;
  int64_t* seg_begin = nullptr;  // segment k (a run of one slot's rows): seg_begin[k] .. [k + 1]
  int32_t* seg_slot = nullptr;   // segment k's slot
  int32_t* out_rows = nullptr;   // the rows whose logits the step returns (EnqueueHead)
  std::vector<RatioInputs> ratios;
};

/// One layer's caches on the device (every slot's, plus a spare slot the padding rows use).
struct DeviceLayerCache {
  int ratio_index = 0;                               // into StepInputs::ratios
  uint8_t* pool = nullptr;                           // 584-byte rows: compressed rows, then rings
  uint16_t* keys = nullptr;                          // indexer keys, bf16 [slots + 1][R][128]
  float *comp_kv = nullptr, *comp_gate = nullptr;    // compressor states per slot
  float *index_kv = nullptr, *index_gate = nullptr;  // the indexer's compressor
};

/// Activations and scratch, sized for the largest step.
struct StepBuffers {
  float *X, *X2, *post, *comb, *h, *x, *xq, *y, *act, *hc_scratch;
  float *q_lat, *q_res, *q, *kv, *o, *oq, *z;
  float *comp_kv, *comp_gate, *pooled, *pooled_n;
  int32_t* emitted;
  float *iq, *iw, *scores;
  int32_t* topk;
  void* topk_ws;
  int32_t* row_index;
  int64_t* offsets;
  float* attn_scratch;
  float *gathered, *pair_g, *pair_u;  // CPU-order mode; pair_g and pair_u the experts' too
  // Activations in e4m3 with their scales for the tensor cores (experts; dense above kGemvMaxRows).
  uint8_t *act8, *pair8;
  float *act8_scale, *pair8_scale;
  // One-row steps: the experts' inputs as integer limbs (kernels/expert_fp4_limbs.h), the row's
  // then its pairs'.
  uint8_t* limbs;
  float* limb_scale;
  uint16_t* split;  // the bf16 halves of a bf16 product's activations (kernels/gemm_bf16.h)
  float *gate_logits, *route_w, *pair_act, *pair_out, *sg, *su, *sa, *hs;
  int32_t *route_e, *rank, *n_live;
  kernels::ExpertGroup *up, *down;
  float* logits;
};

struct StepPlan;

/// Concurrent branches of steps of up to kGemvMaxRows rows (DeviceForwardOptions::branches),
/// where most kernels are too small to fill the GPU: while the main stream runs the query path
/// and the routed experts, side stream 0 runs the compressors (then the shared expert) and side
/// stream 1 the indexer's query and selection. Each side has its own plan: the main one with its
/// own FP8 scratch (act, act8, act8_scale), so no two concurrent kernels write one buffer. Events
/// fork and join the streams, in a graph's capture as well as eagerly.
struct StepBranches {
  void* streams[2] = {};          // cudaStream_t
  void* events[4] = {};           // cudaEvent_t
  const StepPlan* plans[2] = {};  // null: no branches
};

struct StepPlan {
  const ModelConfig* cfg = nullptr;
  const DeviceModel* model = nullptr;
  std::vector<DeviceLayerCache> caches;
  StepInputs in;
  StepBuffers buf{};
  int window = 0;                           // sliding-window positions a query reads
  int ring = 0;                             // ring rows per slot: window + max_chunk - 1 (RingRows)
  bool cpu_order = false;                   // kernels that sum in the CPU's order (bit-exact, slow)
  bool dense_mma = true;                    // DeviceForwardOptions::dense_mma
  bool folded_experts = false;              // DeviceForwardOptions::folded_experts
  kernels::Fp8GemmContext* gemm = nullptr;  // set when a bucket exceeds kGemvMaxRows
  kernels::Bf16GemmContext* bf16 = nullptr;  // set with gemm: bf16 products above it
  StepBranches branches;
};

/// Rows up to which dense FP8 products take the GEMV; above, cuBLASLt's block-scaled FP8 GEMM on
/// the tensor cores. (The MXFP4 experts take the tensor cores from two rows on.)
constexpr int kGemvMaxRows = 8;

/// Allocates every layer's caches for `slots` slots plus the padding rows' spare one, laid out
/// as DeviceLayerCache and RatioInputs describe (plan.in's ratios already set).
Status AllocLayerCaches(const StepPlan& plan, int slots, DeviceMemory& mem,
                        std::vector<DeviceLayerCache>* caches);

/// Allocates `out` from `mem` for steps of up to max_batch rows of `plan` (its caches and inputs
/// already set up).
Status AllocStepBuffers(const StepPlan& plan, int max_batch, DeviceMemory& mem, StepBuffers* out);

/// A side branch's buffers (StepBranches): plan.buf's, but with FP8 scratch of its own for steps
/// of up to kGemvMaxRows rows.
Status AllocSideBuffers(const StepPlan& plan, int max_batch, DeviceMemory& mem, StepBuffers* out);

/// Launches one step of `rows` tokens on `stream` (a cudaStream_t) up to the final norm (b.x);
/// returns the first CUDA error code (0 on success). No host synchronisation, no allocation:
/// capturable as a graph.
int EnqueueBody(const StepPlan& plan, int rows, void* stream);
/// The LM head after EnqueueBody: logits [n_out, vocab] of rows plan.in.out_rows[0 .. n_out)
/// (chosen_rows false: of rows 0 .. n_out - 1) into plan.buf.logits. The device forward captures
/// it in the graphs of up to kGemvMaxRows rows, on all their rows; larger buckets run it after
/// the graph on the asked rows only, so that a chunk there pays the head for those rows alone.
int EnqueueHead(const StepPlan& plan, bool chosen_rows, int n_out, void* stream);

/// Largest attention splits per query MqaDecodeFp8Rows gets at `rows` queries.
int AttentionSplits(int rows);
/// Rows per expert group at `rows` tokens (kernels/route.h's group_rows): 1 for the CUDA-core
/// experts of a one-token step, else the tensor-core kernel's 8.
int ExpertGroupRows(int rows);
/// The folded GEMM's window (kFoldedWindowGroups) where a step of `pairs` token-expert pairs takes
/// it (folded_experts and experts averaging 64 tokens or more), else 1. Each expert's groups are
/// padded to a multiple of it (kernels/route.h's align), so no window is split between experts.
int FoldedExpertWindow(bool folded_experts, int64_t pairs, int experts);
/// Compressed rows a query reads at most (besides its window) in the layer whose cache is `c`.
int64_t CompressedRowsRead(const ModelConfig& cfg, const StepInputs& in, const DeviceLayerCache& c,
                           bool csa);

}  // namespace deepinfer
