#include "bench/decode_experts.h"
#include "kernels/expert_fp4_limbs.h"
#include "kernels/expert_fp4_wgmma.h"
#include "kernels/gemm_fp8.h"
#include "kernels/ops.h"

namespace deepinfer::bench {

bool TakeRoutedExpertBuffers(DeviceArena& a, int64_t pairs, RoutedExpertsStep* e) {
  e->pairs = pairs;
  e->gate = a.Take<float>(pairs * kMoeInter);
  e->upv = a.Take<float>(pairs * kMoeInter);
  e->act = a.Take<float>(pairs * kMoeInter);
  e->out = a.Take<float>(pairs * kHidden);
  e->pairs_padded = kernels::Fp8GemmPaddedRows(pairs);
  e->act_q = a.Take<uint8_t>(e->pairs_padded * kMoeInter);
  // One-token steps: the experts' inputs as integer limbs (the row's, then its pairs').
  e->limbs = a.Take<uint8_t>(3 * (kHidden + pairs * kMoeInter));
  e->limb_scales = a.Take<float>((kHidden + pairs * kMoeInter) / 128);
  e->act_s = a.Take<float>(kernels::Fp8ActScaleCount(pairs, kMoeInter));
  return e->gate && e->upv && e->act && e->out && e->act_q && e->limbs && e->limb_scales &&
         e->act_s;
}

int LaunchRoutedExperts(const RoutedExpertsStep& e, const LayerWeights& l, cudaStream_t s) {
  const int64_t pairs = e.pairs;
  const int window = kernels::ExpertMmaWindow(pairs, kExperts);  // for the mma.sync kernel
  // Batch 1: exact integer sums, as the device forward's one-row steps (ActLimbsFp8 rounds xn
  // through FP8 itself, as the forward's input already is).
  if (e.cuda_core && e.batch == 1 && !e.cpu_order) {
    uint8_t* pair_limbs = e.limbs + 3 * kHidden;
    float* pair_scales = e.limb_scales + kHidden / 128;
    if (const int r = kernels::ActLimbsFp8(e.xn, 1, kHidden, e.limbs, e.limb_scales, s)) return r;
    if (const int r = kernels::Fp4ExpertGateUpLimbs(l.w1, l.s1, l.w3, l.s3, kMoeInter, kHidden,
                                                    e.up, e.n_groups, 10.0f, e.limbs, e.limb_scales,
                                                    e.act, s, e.n_live))
      return r;
    if (const int r = kernels::ActLimbsFp8(e.act, pairs, kMoeInter, pair_limbs, pair_scales, s))
      return r;
    return kernels::Fp4ExpertGemvLimbs(l.w2, l.s2, kHidden, kMoeInter, e.down, e.n_groups,
                                       pair_limbs, pair_scales, e.out, s, e.n_live);
  }
  if (e.cuda_core) {  // fp32 activations on CUDA cores
    // Gate and up products and the SwiGLU in one launch.
    if (const int r =
            kernels::Fp4ExpertGateUp(l.w1, l.s1, l.w3, l.s3, kMoeInter, kHidden, e.up, e.n_groups,
                                     e.max_rows, 10.0f, e.xn, e.act, s, e.n_live))
      return r;
    return kernels::Fp4ExpertGemv(l.w2, l.s2, kHidden, kMoeInter, e.down, e.n_groups, e.max_rows,
                                  e.act, e.out, s, e.n_live);
  }
  // FP8 activations (the reference numerics) on tensor cores.
  if (const int r = kernels::QuantizeActFp8(e.xn, e.batch, kHidden, e.xq, e.xs, s)) return r;
  const bool folded = e.kind == ExpertKernels::kFolded;
  if (const int r = folded ? kernels::Fp4ExpertWgmmaPair(l.w1, l.s1, e.gate, l.w3, l.s3, e.upv,
                                                         kMoeInter, kHidden, e.up, e.n_groups, e.xq,
                                                         e.xs, e.xq_rows, s, e.n_live)
                           : kernels::Fp4ExpertMmaPair(l.w1, l.s1, e.gate, l.w3, l.s3, e.upv,
                                                       kMoeInter, kHidden, e.up, e.n_groups, e.xq,
                                                       e.xs, e.xq_rows, s, e.n_live, window))
    return r;
  if (const int r = kernels::SwiGlu(e.gate, e.upv, pairs * kMoeInter, 10.0f, e.act, s)) return r;
  if (const int r = kernels::QuantizeActFp8(e.act, pairs, kMoeInter, e.act_q, e.act_s, s)) return r;
  return folded ? kernels::Fp4ExpertWgmma(l.w2, l.s2, kHidden, kMoeInter, e.down, e.n_groups,
                                          e.act_q, e.act_s, e.pairs_padded, e.out, s, e.n_live)
                : kernels::Fp4ExpertMma(l.w2, l.s2, kHidden, kMoeInter, e.down, e.n_groups, e.act_q,
                                        e.act_s, e.pairs_padded, e.out, s, e.n_live, window);
}

}  // namespace deepinfer::bench
