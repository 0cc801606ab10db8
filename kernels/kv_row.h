// The reference cache row on the device (reference/deepseek-v4.md §4.2): a finished KV or
// compressed row of 512 values held in 584 bytes — 448 e4m3 values (seven blocks of 64, each
// with a power-of-two e8m0 scale), the 64 RoPE values in bf16, the seven scale bytes and one pad
// byte, in that order within the row. The reference numerics round a row to exactly what these
// bytes hold (engine/model/attention.cc, QdqKvRow), so storing it loses nothing. Device pointers;
// `stream` is a cudaStream_t as void*; returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

constexpr int kKvRowValues = 512, kKvRopeValues = 64, kKvRowBytes = 584;
constexpr int kKvNopeValues = kKvRowValues - kKvRopeValues;  // 448: seven blocks of 64

/// Packs rows [n, 512] of fp32 values (after RMSNorm and RoPE) into n rows of kKvRowBytes at
/// packed + i * kKvRowBytes: each 64-block of the first 448 values scaled by 2^-e, e as
/// QdqFp8Blocks(row, 448, 64, 1e-4) picks it, rounded to e4m3 (nearest, ties to even); the RoPE
/// values rounded to bf16 (nearest even); scale byte e + 127; pad 0. rows 16-byte aligned,
/// packed 8-byte aligned (584 = 73 x 8, so every row is). Values must be finite (a finished row
/// is; NaN payloads and infinite scales are not reproduced). With `dest` (device, n entries) row i
/// goes to row dest[i] of `packed` instead, and nowhere when dest[i] < 0: the device cache's
/// ring slot or compressed-row page.
int PackKvRows(const float* rows, int64_t n, uint8_t* packed, void* stream,
               const int32_t* dest = nullptr);

/// The inverse: rows [n, 512] of fp32 values, each e4m3 value times its block's 2^e exactly.
/// With `src` (device, n entries) row i is read from row src[i] of `packed` (a gather).
int UnpackKvRows(const uint8_t* packed, int64_t n, float* rows, void* stream,
                 const int32_t* src = nullptr);

}  // namespace deepinfer::kernels
