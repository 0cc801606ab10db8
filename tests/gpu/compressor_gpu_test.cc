// The device compressor (kernels/compress.h) against the CPU's CompressorPoolToken: CSA's
// overlapping windows and HCA's long ones, widths that are not multiples of the block, sequences
// resumed mid-window from a random state, segments crossing several window ends, one empty
// segment, states in a shuffled pool — pooled rows, flags and final states bit for bit.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/model/compressor_pool.h"
#include "kernels/compress.h"
#include "kernels/cuda_available.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;

bool SameBits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

class CompressorGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  std::mt19937 rng_{std::random_device{}()};

  void Check(int ratio, int width, bool overlap) {
    const kernels::CompressorShape shape{ratio, width, overlap};
    const int proj = shape.proj();
    const int64_t state = shape.state_floats();
    CompressorWeights w;
    w.ratio = ratio;
    w.width = width;
    w.overlap = overlap;
    std::normal_distribution<float> normal(0.0f, 1.5f);
    w.ape.resize(static_cast<size_t>(ratio) * proj);
    for (float& v : w.ape) v = normal(rng_);
    const std::vector<int64_t> lengths = {1, 3 * ratio + 2, 0, 9, 2 * ratio};
    const int64_t S = static_cast<int64_t>(lengths.size()), pool = S + 2;
    std::vector<int64_t> seg_begin(S + 1, 0), pos;
    std::vector<int32_t> slot(S);
    for (int64_t i = 0; i < S; ++i) {
      seg_begin[i + 1] = seg_begin[i] + lengths[i];
      slot[i] = static_cast<int32_t>(pool - 1 - i);  // not the segment order
      const int64_t first = rng_() % 1000;           // resumed anywhere, mid-window too
      for (int64_t j = 0; j < lengths[i]; ++j) pos.push_back(first + j);
    }
    const int64_t T = seg_begin[S];
    // One fused wkv|wgate product: kv and gate halves of each row, as the step computes them.
    std::vector<float> fused(T * 2 * proj);
    for (float& v : fused) v = normal(rng_);
    // Random states, the earlier rows partly -inf as after a fresh start.
    std::vector<CompressorState> cpu(S);
    std::vector<float> kv_pool(pool * state), gate_pool(pool * state);
    for (int64_t i = 0; i < S; ++i) {
      cpu[i].Init(w);
      for (float& v : cpu[i].kv) v = normal(rng_);
      for (size_t j = 0; j < cpu[i].gate.size(); ++j)
        cpu[i].gate[j] = (i % 2 == 0 && j < cpu[i].gate.size() / 2) ? -INFINITY : normal(rng_);
      std::copy(cpu[i].kv.begin(), cpu[i].kv.end(), &kv_pool[slot[i] * state]);
      std::copy(cpu[i].gate.begin(), cpu[i].gate.end(), &gate_pool[slot[i] * state]);
    }
    DeviceVector<float> d_fused(fused), d_ape(w.ape), d_kv_pool(kv_pool), d_gate_pool(gate_pool);
    DeviceVector<int64_t> d_pos(pos), d_begin(seg_begin);
    DeviceVector<int32_t> d_slot(slot);
    auto d_pooled = DeviceVector<float>::Poisoned(T * width);
    auto d_emitted = DeviceVector<int32_t>::Poisoned(T);
    ASSERT_EQ(
        kernels::CompressorPool(shape, d_fused.get(), d_fused.get() + proj, 2 * proj, d_ape.get(),
                                d_pos.get(), d_begin.get(), S, d_slot.get(), d_kv_pool.get(),
                                d_gate_pool.get(), d_pooled.get(), d_emitted.get(), nullptr),
        0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto pooled = d_pooled.ToHost(), kv_after = d_kv_pool.ToHost(),
               gate_after = d_gate_pool.ToHost();
    const auto emitted = d_emitted.ToHost();
    std::vector<float> want(width), scratch;
    int windows = 0;
    for (int64_t i = 0; i < S; ++i) {
      for (int64_t t = seg_begin[i]; t < seg_begin[i + 1]; ++t) {
        const bool closes =
            CompressorPoolToken(w, cpu[i], &fused[t * 2 * proj], &fused[t * 2 * proj + proj],
                                pos[t], want.data(), scratch);
        ASSERT_EQ(emitted[t], closes ? 1 : 0) << "token " << t;
        if (!closes) continue;
        ++windows;
        EXPECT_TRUE(SameBits(&pooled[t * width], want.data(), width))
            << "pooled row of token " << t << ", ratio " << ratio << " width " << width;
      }
      EXPECT_TRUE(SameBits(&kv_after[slot[i] * state], cpu[i].kv.data(), state))
          << "kv state " << i;
      EXPECT_TRUE(SameBits(&gate_after[slot[i] * state], cpu[i].gate.data(), state))
          << "gate state " << i;
    }
    EXPECT_GE(windows, 4);  // the segments above close at least this many windows
  }
};

TEST_F(CompressorGpuTest, PoolsWhatTheCpuPools) {
  Check(4, 512, true);     // CSA's KV compressor
  Check(4, 128, true);     // CSA's indexer compressor
  Check(4, 72, true);      // a width that is no multiple of the block
  Check(128, 512, false);  // HCA
  Check(128, 40, false);
}

TEST_F(CompressorGpuTest, RejectsBadArguments) {
  const kernels::CompressorShape none{0, 512, true};
  EXPECT_NE(kernels::CompressorPool(none, nullptr, nullptr, 1024, nullptr, nullptr, nullptr, 1,
                                    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
            0);
}

}  // namespace
}  // namespace deepinfer
