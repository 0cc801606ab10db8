// Warp-level tensor-core and asynchronous-copy primitives (the expert, indexer and attention
// kernels): the e4m3 mma (sm_89 and later), the bf16 mma, cp.async into shared memory and
// ldmatrix out of it (sm_80 and later).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

/// d = A B over one m16n8k32 tile of e4m3 operands, fp32 accumulators starting at zero.
__device__ __forceinline__ void Mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                    uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.0f), "f"(0.0f), "f"(0.0f),
        "f"(0.0f));
}

/// d += A B over one m16n8k16 tile of bf16 operands with fp32 accumulators (a0..a3 as LdMatrixX4
/// gives a row-major 16 x 16 tile; b0, b1 the k halves of an 8-column tile).
__device__ __forceinline__ void MmaBf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                        uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/// 16 bytes global -> shared without a register round trip (both 16-byte aligned); the "memory"
/// clobbers keep the compiler from moving shared-memory accesses across the copy and its waits.
__device__ __forceinline__ void CpAsync16(void* smem, const void* global) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(global) : "memory");
}
/// 4 bytes global -> shared (both 4-byte aligned), through L1.
__device__ __forceinline__ void CpAsync4(void* smem, const void* global) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(global) : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/// 8 bytes global -> shared (both 8-byte aligned), through L1.
__device__ __forceinline__ void CpAsync8(void* smem, const void* global) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(dst), "l"(global) : "memory");
}
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

/// Four 8x8 b16 matrices from shared memory: lanes 8i .. 8i + 7 give the row addresses of matrix
/// i, and lane (g, t) receives word t of row g of each, the layout of an mma fragment.
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const uint8_t* smem) {
  const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}

/// The same four matrices transposed: lane (g, t) receives rows 2t and 2t + 1 of column g of each,
/// the B fragment of an mma whose k runs along the rows held in shared memory.
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const uint8_t* smem) {
  const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}

}  // namespace deepinfer::kernels
