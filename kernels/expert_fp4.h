// The routed experts' products in their released format, MXFP4 (e2m1 nibbles with one e8m0
// scale per 32 weights), dequantised in registers: no wider copy of an expert ever exists. One
// launch covers every expert a batch routes to. Device pointers; `stream` is a cudaStream_t as
// void*; returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

/// One expert and up to kExpertGroupRows of the token rows routed to it (more rows: more groups
/// of the same expert).
constexpr int kExpertGroupRows = 8;
struct ExpertGroup {
  int32_t expert;
  int32_t rows;
  int32_t x_row[kExpertGroupRows];  // rows of x to multiply
  int32_t y_row[kExpertGroupRows];  // rows of y to write
};

/// For every group g and each of its rows r: y[y_row[r], o] = sum_i x[x_row[r], i] * W_e[o, i],
/// e = groups[g].expert, o < out. weights[e] is expert e's [out, in / 2] bytes (byte c holds
/// columns 2c in its low nibble and 2c + 1 in its high nibble), scales[e] its [out, in / 32]
/// e8m0 bytes; `weights`, `scales` and `groups` are device arrays. in must be a multiple of 32
/// and rows 16-byte aligned (in / 2 a multiple of 16 bytes follows). max_rows (1..8) bounds every
/// group's `rows` (a group with more writes nothing): the kernel's registers are sized by it, so
/// decode at batch 1 (all groups of one row) streams at full occupancy: the device forward takes
/// it for one-row steps, where it is faster than Fp4ExpertMma (bench/RESULTS-gpu.md). With
/// live_groups (a
/// device count, as BuildExpertGroups in kernels/route.h writes it) n_groups is the capacity the
/// grid covers and only groups below *live_groups run, so a captured graph serves any routing.
int Fp4ExpertGemv(const uint8_t* const* weights, const uint8_t* const* scales, int64_t out,
                  int64_t in, const ExpertGroup* groups, int n_groups, int max_rows, const float* x,
                  float* y, void* stream, const int32_t* live_groups = nullptr);

/// An expert's gate and up products and its clamped SwiGLU in one launch: y[y_row[r], o] =
/// SwiGluF(g, u, limit) (kernels/exact_math.h) with g and u what Fp4ExpertGemv gives for w1 and
/// w3 (the same sums, bit for bit). Arguments as for Fp4ExpertGemv.
int Fp4ExpertGateUp(const uint8_t* const* w1, const uint8_t* const* s1, const uint8_t* const* w3,
                    const uint8_t* const* s3, int64_t out, int64_t in, const ExpertGroup* groups,
                    int n_groups, int max_rows, float limit, const float* x, float* y, void* stream,
                    const int32_t* live_groups = nullptr);

/// The same products on tensor cores for the reference numerics, where activations are FP8:
/// xq [x_rows, in] e4m3 with x_scale [in / 128, x_rows] (QuantizeActFp8's layout, kernels/
/// gemm_fp8.h; x_rows its padded row count), group rows index xq's rows. Every group's rows <= 8
/// (the mma's N; a group with more writes nothing). Products of each 32-weight block are exact,
/// accumulated by the mma (gpu_tests bound the result at 1e-5 of the products' magnitudes), then
/// scaled in fp32: each 32-weight block's product times its weight scale into a sum per 128
/// columns, which times the activation scale goes into the total. Both scales are powers of two,
/// so each product is exact (barring underflow) and a fused or a separate multiply-add rounds
/// alike: the sums do not depend on how the compiler contracts them. in % 128 == 0; xq and
/// weights[e] 16-byte and scales[e] 4-byte aligned (the kernel copies 16-byte pieces of both and
/// loads four scales at a time). live_groups as for Fp4ExpertGemv. window_groups (1, 2, 4 or 8)
/// consecutive groups share a block, and runs of one expert among them share each weight load:
/// more reuse, fewer blocks; groups sorted by expert (as BuildExpertGroups writes them) make the
/// runs long. Every token's sums are the same, bit for bit, whatever the window, the order and
/// the group it shares with other tokens.
int Fp4ExpertMma(const uint8_t* const* weights, const uint8_t* const* scales, int64_t out,
                 int64_t in, const ExpertGroup* groups, int n_groups, const uint8_t* xq,
                 const float* x_scale, int64_t x_rows, float* y, void* stream,
                 const int32_t* live_groups = nullptr, int window_groups = 1);

/// Fp4ExpertMma of two matrices of one shape over the same groups and activations in one launch
/// (an expert's gate and up weights into y1 and y3): each matrix's sums as Fp4ExpertMma gives them.
int Fp4ExpertMmaPair(const uint8_t* const* w1, const uint8_t* const* s1, float* y1,
                     const uint8_t* const* w3, const uint8_t* const* s3, float* y3, int64_t out,
                     int64_t in, const ExpertGroup* groups, int n_groups, const uint8_t* xq,
                     const float* x_scale, int64_t x_rows, void* stream,
                     const int32_t* live_groups = nullptr, int window_groups = 1);

/// The window for `pairs` token-expert pairs over `experts` experts: as many groups as an expert
/// averages (full groups of kExpertGroupRows), 1 to 8, a power of two (1 without pairs or
/// experts). Small steps keep one group a block, for enough blocks to fill the GPU; from ~2,700
/// tokens over 256 experts at top-6, each weight load is shared 8 ways.
int ExpertMmaWindow(int64_t pairs, int experts);

}  // namespace deepinfer::kernels
