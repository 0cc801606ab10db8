// Warpgroup-level (sm_90a) tensor-core primitives of the folded MXFP4 expert GEMM
// (kernels/expert_fp4_wgmma.cu): shared-memory operand descriptors for 128-byte-swizzled K-major
// tiles, the e4m3 wgmma of a 64 x 64 x 32 tile with A from registers, and the fences that order
// it against shared-memory writes and against the registers it reads and writes.
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

/// Byte offset of 16-byte chunk `chunk` (0..7) of row `row` in a K-major tile of 128-byte rows
/// under the 128-byte swizzle: rows in atoms of eight (1,024 bytes, the tile 1,024-aligned), the
/// chunk index XORed with the row's place in its atom, as the hardware reads it.
__device__ __forceinline__ int SwizzledChunk(int row, int chunk) {
  return (row >> 3) * 1024 + (row & 7) * 128 + ((chunk ^ (row & 7)) << 4);
}

/// The descriptor of a K-major, 128-byte-swizzled operand starting at `smem` (a tile's start plus
/// 32 k-bytes per k step; the tile 1,024-aligned): leading offset unused, stride 1,024 bytes
/// between atoms of eight rows.
__device__ __forceinline__ uint64_t SwizzledDesc(const void* smem) {
  const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((a & 0x3ffff) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

/// Shared-memory writes (stores, cp.async) made visible to the tensor cores' reads (then a
/// barrier).
__device__ __forceinline__ void FenceSharedForAsyncProxy() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void WgmmaWaitAll() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
/// Keeps the compiler from moving reads or writes of an accumulator across the asynchronous mma.
__device__ __forceinline__ void PinAccumulator(float& r) { asm volatile("" : "+f"(r)::"memory"); }

/// d (+)= A B for A 64 x 32 e4m3 from registers and B 32 x 64 e4m3 (K-major in shared memory, its
/// descriptor b), fp32 accumulators in the m64nN layout: element (16 w + lane / 4 + 8 (i / 2 % 2),
/// 8 (i / 4) + 2 (lane % 4) + i % 2) in d[i] of warp w's lane; accumulate = 0 starts from zero.
/// a[0..3] of warp w's lane hold A's bytes (rows 16 w + lane / 4 and 16 w + lane / 4 + 8, columns
/// 4 (lane % 4) .. + 3 and 16 + 4 (lane % 4) .. + 3, as mma.sync's m16n8k32 fragment). They must
/// stay unchanged until the mma is waited for (PinOperand after the wait keeps the compiler from
/// reusing them).
__device__ __forceinline__ void WgmmaE4m3M64N64K32Rs(float (&d)[32], const uint32_t (&a)[4],
                                                     uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31}, {%32, %33, %34, %35}, "
      "%36, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}
/// Keeps an mma's register operand alive (and unmoved) up to this point.
__device__ __forceinline__ void PinOperand(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

}  // namespace deepinfer::kernels
