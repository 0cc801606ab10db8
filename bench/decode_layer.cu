#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "bench/decode_layer.h"
#include "kernels/kv_row.h"

namespace deepinfer::bench {
namespace {

__device__ uint32_t Hash(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull ^ seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<uint32_t>(x);
}

__global__ void FillBytesKernel(uint8_t* p, size_t n, uint32_t seed, uint8_t and_mask,
                                uint8_t or_mask) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    p[i] = static_cast<uint8_t>((Hash(i, seed) & and_mask) | or_mask);
  }
}

__global__ void FillBf16Kernel(uint16_t* p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const float v = scale * (static_cast<float>(Hash(i, seed) >> 8) * 0x1p-23f - 1.0f);
    p[i] = static_cast<uint16_t>(__float_as_uint(v) >> 16);  // truncated: any bf16 will do
  }
}

__global__ void FillFloatsKernel(float* p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    p[i] = scale * (static_cast<float>(Hash(i, seed) >> 8) * 0x1p-23f - 1.0f);
  }
}

bool MakeFp8(DeviceArena& a, int64_t out, int64_t in, uint32_t seed, Fp8Weight* w) {
  *w = {a.Take<uint8_t>(out * in), a.Take<uint8_t>((out / 128) * (in / 128)),
        a.Take<float>(kernels::Fp8WeightScaleCount(out, in)), out, in};
  if (!w->w || !w->scale || !w->scale_f32) return false;
  FillBytes(w->w, out * in, seed, 0x77, 0);  // & 0x77: never the NaN code 0x7f
  FillBytes(w->scale, (out / 128) * (in / 128), seed + 1, 0x3, 0x7c);
  return kernels::Fp8WeightScalesToF32(w->scale, out, in, w->scale_f32, nullptr) == 0;
}

bool MakeBf16(DeviceArena& a, int64_t out, int64_t in, uint32_t seed, Bf16Weight* w) {
  *w = {a.Take<uint16_t>(out * in), out, in};
  if (!w->w) return false;
  // Bytes (low: mantissa, high: sign and exponent 0x3c..0x3f) give values of magnitude < 2.
  FillBytes(reinterpret_cast<uint8_t*>(w->w), 2 * out * in, seed, 0xbf, 0x3c);
  return true;
}

// Expert tensors of one kind for all experts: one block of bytes, and the pointer tables.
bool MakeExperts(DeviceArena& a, int64_t out, int64_t in, uint32_t seed, const uint8_t*** w,
                 const uint8_t*** s) {
  const size_t wb = out * in / 2, sb = out * in / 32;
  uint8_t* wall = a.Take<uint8_t>(wb * kExperts);
  uint8_t* sall = a.Take<uint8_t>(sb * kExperts);
  *w = a.Take<const uint8_t*>(kExperts);
  *s = a.Take<const uint8_t*>(kExperts);
  if (!wall || !sall || !*w || !*s) return false;
  FillBytes(wall, wb * kExperts, seed, 0xff, 0);
  FillBytes(sall, sb * kExperts, seed + 1, 0x3, 0x7c);
  std::vector<const uint8_t*> hw(kExperts), hs(kExperts);
  for (int e = 0; e < kExperts; ++e) {
    hw[e] = wall + e * wb;
    hs[e] = sall + e * sb;
  }
  cudaMemcpy(*w, hw.data(), kExperts * sizeof(void*), cudaMemcpyHostToDevice);
  cudaMemcpy(*s, hs.data(), kExperts * sizeof(void*), cudaMemcpyHostToDevice);
  return true;
}

}  // namespace

DeviceArena::DeviceArena(size_t bytes) {
  if (cudaMalloc(reinterpret_cast<void**>(&base_), bytes) == cudaSuccess) size_ = bytes;
}
DeviceArena::~DeviceArena() {
  if (base_) cudaFree(base_);
}
void* DeviceArena::Alloc(size_t bytes) {
  const size_t at = (used_ + 255) / 256 * 256;
  if (at + bytes > size_) return nullptr;
  used_ = at + bytes;
  return base_ + at;
}

void FillBytes(uint8_t* p, size_t n, uint32_t seed, uint8_t and_mask, uint8_t or_mask) {
  FillBytesKernel<<<1024, 256>>>(p, n, seed, and_mask, or_mask);
}
void FillFloats(float* p, size_t n, uint32_t seed, float scale) {
  FillFloatsKernel<<<1024, 256>>>(p, n, seed, scale);
}

bool MakeLayerCache(DeviceArena& a, bool cpu_order, int64_t rows, int64_t keys, uint32_t seed,
                    float* scratch, int64_t scratch_rows, LayerCache* c) {
  keys = std::max<int64_t>(1, keys);
  if (cpu_order) {
    c->rows = a.Take<float>(rows * kHeadDim);
    c->keys = a.Take<float>(keys * kIndexDim);
    if (!c->rows || !c->keys) return false;
    FillFloats(c->rows, rows * kHeadDim, seed, 1.0f);
    FillFloats(c->keys, keys * kIndexDim, seed + 7, 1.0f);
    return true;
  }
  c->rows8 = a.Take<uint8_t>(rows * kernels::kKvRowBytes);
  c->keys16 = a.Take<uint16_t>(keys * kIndexDim);
  if (!c->rows8 || !c->keys16 || !scratch || scratch_rows < 1) return false;
  const int64_t chunk = scratch_rows;  // random fp32 rows, packed a chunk at a time
  FillBf16Kernel<<<1024, 256>>>(c->keys16, keys * kIndexDim, seed + 7, 1.0f);
  for (int64_t r = 0; r < rows; r += chunk) {
    const int64_t n = std::min(chunk, rows - r);
    FillFloats(scratch, n * kHeadDim, seed + static_cast<uint32_t>(r), 1.0f);
    if (kernels::PackKvRows(scratch, n, c->rows8 + r * kernels::kKvRowBytes, nullptr)) return false;
  }
  return true;
}

bool MakeLayer(DeviceArena& a, bool csa, uint32_t seed, LayerWeights* l) {
  l->csa = csa;
  const int64_t comp = csa ? 2 * 2 * kHeadDim : 2 * kHeadDim;  // wkv|wgate, two series for CSA
  bool ok = MakeFp8(a, kQLora, kHidden, seed + 1, &l->wq_a) &&
            MakeFp8(a, kHeads * kHeadDim, kQLora, seed + 2, &l->wq_b) &&
            MakeFp8(a, kHeadDim, kHidden, seed + 3, &l->wkv) &&
            MakeFp8(a, kOGroups * kOLora, kHeads * kHeadDim / kOGroups, seed + 4, &l->wo_a) &&
            MakeFp8(a, kHidden, kOGroups * kOLora, seed + 5, &l->wo_b) &&
            MakeFp8(a, kMoeInter, kHidden, seed + 6, &l->shared_w1) &&
            MakeFp8(a, kMoeInter, kHidden, seed + 7, &l->shared_w3) &&
            MakeFp8(a, kHidden, kMoeInter, seed + 8, &l->shared_w2) &&
            MakeBf16(a, comp, kHidden, seed + 9, &l->compressor) &&
            MakeBf16(a, kExperts, kHidden, seed + 10, &l->gate);
  if (csa) {
    ok = ok && MakeFp8(a, kIndexHeads * kIndexDim, kQLora, seed + 11, &l->index_wq_b) &&
         MakeBf16(a, 2 * 2 * kIndexDim, kHidden, seed + 12, &l->index_compressor) &&
         MakeBf16(a, kIndexHeads, kHidden, seed + 13, &l->index_weights);
  }
  const int64_t flat = kHc * kHidden;
  l->hc_attn_fn = a.Take<float>(kHcMix * flat);
  l->hc_ffn_fn = a.Take<float>(kHcMix * flat);
  l->hc_base = a.Take<float>(kHcMix);
  l->hc_scale = a.Take<float>(3);
  l->norm = a.Take<float>(kHeads * kHeadDim);
  l->sinks = a.Take<float>(kHeads);
  l->inv_freq = a.Take<float>(kRopeDim / 2);
  ok = ok && l->hc_attn_fn && l->hc_ffn_fn && l->hc_base && l->hc_scale && l->norm && l->sinks &&
       l->inv_freq;
  if (!ok) return false;
  FillFloats(l->hc_attn_fn, kHcMix * flat, seed + 14, 0.01f);
  FillFloats(l->hc_ffn_fn, kHcMix * flat, seed + 15, 0.01f);
  FillFloats(l->hc_base, kHcMix, seed + 16, 1.0f);
  FillFloats(l->hc_scale, 3, seed + 17, 1.0f);
  FillFloats(l->norm, kHeads * kHeadDim, seed + 18, 1.0f);
  FillFloats(l->sinks, kHeads, seed + 19, 1.0f);
  FillFloats(l->inv_freq, kRopeDim / 2, seed + 20, 0.5f);
  return MakeExperts(a, kMoeInter, kHidden, seed + 21, &l->w1, &l->s1) &&
         MakeExperts(a, kMoeInter, kHidden, seed + 23, &l->w3, &l->s3) &&
         MakeExperts(a, kHidden, kMoeInter, seed + 25, &l->w2, &l->s2);
}

}  // namespace deepinfer::bench
