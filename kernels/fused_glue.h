// Fused steps of the production (stage 2) device forward: a norm, RoPE, SwiGLU or the reference
// numerics' FP8 round trip that would otherwise each be a launch of their own between two
// products. Each gives bit for bit what its separate kernels give in sequence (RmsNormFast of
// kernels/norm_fast.h, which is RmsNormRopeQdq without RoPE or FP8 output; Rope and SwiGlu of
// kernels/ops.h, QdqFp8Rows of kernels/forward_glue.h, PackKvRows of kernels/kv_row.h); a decode
// step launches seven fewer kernels per layer. Device pointers; `stream` is a
// cudaStream_t as void*; each returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

/// Where a fused kernel applies RoPE: the trailing rope_dim channels of every head of
/// head_dim, at positions[row] (inv_freq has rope_dim / 2 entries), inverse to undo it.
struct RopeArgs {
  int heads = 1;
  int head_dim = 0;
  int rope_dim = 0;
  const float* inv_freq = nullptr;
  const int64_t* positions = nullptr;
  bool inverse = false;
};

/// RmsNormFast(x, weight, rows, dim, eps, y); then with `rope` (else null) RoPE of each row as a
/// head of Rope(y, rows / rope.heads, rope.heads, dim, ...) rotates it (rope.head_dim == dim; row
/// r at positions[r / rope.heads]); then with `y_fp8` (else null) QdqFp8Rows(y, rows, dim, y_fp8).
/// y may alias x.
int RmsNormRopeQdq(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                   const RopeArgs* rope, float* y, float* y_fp8, void* stream);

/// One RmsNormRopeQdq as a job of RmsNormRopeQdqPair. With `kv_packed` (dim 512, y 16-byte
/// aligned, no y_fp8) the job then packs its rows into the cache as PackKvRows(y, rows, kv_packed,
/// stream, kv_dest) would (kernels/kv_row.h): the kv row's norm, rotation and packing in one.
struct NormJob {
  const float* x = nullptr;
  const float* weight = nullptr;
  int64_t rows = 0;
  int64_t dim = 0;
  float eps = 0;
  const RopeArgs* rope = nullptr;
  float* y = nullptr;
  float* y_fp8 = nullptr;
  uint8_t* kv_packed = nullptr;
  const int32_t* kv_dest = nullptr;
};

/// Two independent jobs in one launch (the query latent's norm and the kv row's, which the
/// decode step needs at the same point): each job's outputs bit for bit as its own launch would
/// write them. The jobs must not write what the other reads.
int RmsNormRopeQdqPair(const NormJob& a, const NormJob& b, void* stream);

/// SwiGlu(gate, up, rows * width, limit, out) then QdqFp8Rows(out, rows, width, out_fp8).
int SwiGluQdq(const float* gate, const float* up, int64_t rows, int64_t width, float limit,
              float* out, float* out_fp8, void* stream);

}  // namespace deepinfer::kernels
