// The fused launches of kernels/fused_glue.h give, bit for bit, what their separate kernels give
// in sequence, on fresh random data of several shapes (tile remainders, heads that straddle the
// FP8 round trip's 128-wide blocks), outputs poisoned before each launch. (RmsNormFast is the
// fused norm without its extras; decode_kernels_gpu_test.cc checks it against the CPU.)
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda_available.h"
#include "kernels/forward_glue.h"
#include "kernels/fused_glue.h"
#include "kernels/kv_row.h"
#include "kernels/norm_fast.h"
#include "kernels/ops.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;

void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want,
                    const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t g, w;
    std::memcpy(&g, &got[i], 4);
    std::memcpy(&w, &want[i], 4);
    ASSERT_EQ(g, w) << what << " at " << i << ": " << got[i] << " vs " << want[i];
  }
}

class FusedGlueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  std::vector<float> Values(size_t n, float scale) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = rng_() % 29 == 0 ? 0.0f : normal(rng_);
    return v;
  }
  // V4's RoPE frequencies for rope_dim channels, and positions up to 100K.
  std::vector<float> InvFreq(int rope_dim) {
    std::vector<float> f(rope_dim / 2);
    for (int i = 0; i < rope_dim / 2; ++i) {
      f[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / rope_dim));
    }
    return f;
  }
  std::vector<int64_t> Positions(int64_t n) {
    std::vector<int64_t> p(n);
    for (auto& x : p) x = static_cast<int64_t>(rng_() % 100000);
    return p;
  }
  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(FusedGlueTest, NormAndFp8RoundTripMatchTheSeparateKernels) {
  for (int64_t dim : {1024, 200, 4096}) {
    for (int64_t rows : {1, 3, 7}) {
      for (bool weighted : {true, false}) {
        DeviceVector<float> x(Values(rows * dim, 3.0f)), w(Values(dim, 1.0f));
        const float* weight = weighted ? w.get() : nullptr;
        auto y = DeviceVector<float>::Poisoned(rows * dim);
        auto yq = DeviceVector<float>::Poisoned(rows * dim);
        auto want_y = DeviceVector<float>::Poisoned(rows * dim);
        auto want_q = DeviceVector<float>::Poisoned(rows * dim);
        ASSERT_EQ(kernels::RmsNormRopeQdq(x.get(), weight, rows, dim, 1e-6f, nullptr, y.get(),
                                          yq.get(), nullptr),
                  0);
        ASSERT_EQ(kernels::RmsNormFast(x.get(), weight, rows, dim, 1e-6f, want_y.get(), nullptr),
                  0);
        ASSERT_EQ(kernels::QdqFp8Rows(want_y.get(), rows, dim, want_q.get(), nullptr), 0);
        ExpectSameBits(y.ToHost(), want_y.ToHost(), "normed");
        ExpectSameBits(yq.ToHost(), want_q.ToHost(), "FP8 round trip");
      }
    }
  }
}

TEST_F(FusedGlueTest, NormAndRopeInPlaceMatchTheSeparateKernels) {
  struct Shape {
    int64_t tokens;
    int heads, head_dim, rope_dim;
  };
  // 2,048 channels: a row longer than the launch keeps in registers (kernels/fused_glue.cu).
  for (const Shape& sh :
       {Shape{1, 64, 512, 64}, Shape{5, 3, 96, 16}, Shape{2, 1, 512, 64}, Shape{3, 1, 2048, 64}}) {
    const int64_t rows = sh.tokens * sh.heads, dim = sh.head_dim;
    const auto values = Values(rows * dim, 2.0f);
    DeviceVector<float> x(values), want(values), w(Values(dim, 1.0f));
    DeviceVector<float> inv_freq(InvFreq(sh.rope_dim));
    DeviceVector<int64_t> pos(Positions(sh.tokens));
    const kernels::RopeArgs rope{sh.heads,       sh.head_dim, sh.rope_dim,
                                 inv_freq.get(), pos.get(),   false};
    const float* weight = sh.heads == 1 ? w.get() : nullptr;  // kv rows are weighted, q heads not
    ASSERT_EQ(kernels::RmsNormRopeQdq(x.get(), weight, rows, dim, 1e-6f, &rope, x.get(), nullptr,
                                      nullptr),
              0);
    ASSERT_EQ(kernels::RmsNormFast(want.get(), weight, rows, dim, 1e-6f, want.get(), nullptr), 0);
    ASSERT_EQ(kernels::Rope(want.get(), sh.tokens, sh.heads, sh.head_dim, sh.rope_dim,
                            inv_freq.get(), pos.get(), false, nullptr),
              0);
    ExpectSameBits(x.ToHost(), want.ToHost(), "normed and rotated");
  }
}

TEST_F(FusedGlueTest, SwiGluAndFp8RoundTripMatchTheSeparateKernels) {
  for (int64_t width : {2048, 300}) {
    for (int64_t rows : {1, 9}) {
      for (float limit : {7.0f, 0.0f}) {
        DeviceVector<float> g(Values(rows * width, 6.0f)), u(Values(rows * width, 6.0f));
        auto out = DeviceVector<float>::Poisoned(rows * width);
        auto q = DeviceVector<float>::Poisoned(rows * width);
        auto want = DeviceVector<float>::Poisoned(rows * width);
        auto want_q = DeviceVector<float>::Poisoned(rows * width);
        ASSERT_EQ(
            kernels::SwiGluQdq(g.get(), u.get(), rows, width, limit, out.get(), q.get(), nullptr),
            0);
        ASSERT_EQ(kernels::SwiGlu(g.get(), u.get(), rows * width, limit, want.get(), nullptr), 0);
        ASSERT_EQ(kernels::QdqFp8Rows(want.get(), rows, width, want_q.get(), nullptr), 0);
        ExpectSameBits(out.ToHost(), want.ToHost(), "SwiGLU");
        ExpectSameBits(q.ToHost(), want_q.ToHost(), "FP8 round trip");
      }
    }
  }
}

// The decode step's pair: the query latent's norm with its FP8 round trip, and the kv rows' norm
// and rotation packed into cache rows (some rows stored nowhere: destination -1).
TEST_F(FusedGlueTest, NormPairWithTheKvPackMatchesTheSeparateKernels) {
  for (int64_t rows : {1, 3, 6}) {
    const int64_t q_dim = 1024, kv_dim = kernels::kKvRowValues, cache_rows = 9;
    DeviceVector<float> q_lat(Values(rows * q_dim, 3.0f)), q_norm(Values(q_dim, 1.0f));
    const auto kv_values = Values(rows * kv_dim, 2.0f);
    // The kv job out of place here (the step's is in place), so a pack of x instead of y shows.
    DeviceVector<float> kv(kv_values), want_kv(kv_values), kv_norm(Values(kv_dim, 1.0f));
    auto kv_y = DeviceVector<float>::Poisoned(rows * kv_dim);
    DeviceVector<float> inv_freq(InvFreq(64));
    DeviceVector<int64_t> pos(Positions(rows));
    std::vector<int32_t> dest(rows);
    for (int64_t r = 0; r < rows; ++r) dest[r] = r == 1 ? -1 : static_cast<int32_t>(8 - r);
    DeviceVector<int32_t> d_dest(dest);
    const kernels::RopeArgs rope{1, static_cast<int>(kv_dim), 64, inv_freq.get(), pos.get(), false};
    auto y = DeviceVector<float>::Poisoned(rows * q_dim);
    auto yq = DeviceVector<float>::Poisoned(rows * q_dim);
    auto want_y = DeviceVector<float>::Poisoned(rows * q_dim);
    auto want_q = DeviceVector<float>::Poisoned(rows * q_dim);
    auto packed = DeviceVector<uint8_t>::Poisoned(cache_rows * kernels::kKvRowBytes);
    auto want_packed = DeviceVector<uint8_t>::Poisoned(cache_rows * kernels::kKvRowBytes);
    kernels::NormJob q_job, kv_job;
    q_job = {q_lat.get(), q_norm.get(), rows, q_dim, 1e-6f, nullptr, y.get(), yq.get()};
    kv_job = {kv.get(), kv_norm.get(), rows,    kv_dim,       1e-6f,
              &rope,    kv_y.get(),    nullptr, packed.get(), d_dest.get()};
    ASSERT_EQ(kernels::RmsNormRopeQdqPair(q_job, kv_job, nullptr), 0);
    ASSERT_EQ(kernels::RmsNormRopeQdq(q_lat.get(), q_norm.get(), rows, q_dim, 1e-6f, nullptr,
                                      want_y.get(), want_q.get(), nullptr),
              0);
    ASSERT_EQ(kernels::RmsNormRopeQdq(want_kv.get(), kv_norm.get(), rows, kv_dim, 1e-6f, &rope,
                                      want_kv.get(), nullptr, nullptr),
              0);
    ASSERT_EQ(kernels::PackKvRows(want_kv.get(), rows, want_packed.get(), nullptr, d_dest.get()),
              0);
    ExpectSameBits(y.ToHost(), want_y.ToHost(), "query latent normed");
    ExpectSameBits(yq.ToHost(), want_q.ToHost(), "query latent's FP8 round trip");
    ExpectSameBits(kv_y.ToHost(), want_kv.ToHost(), "kv normed and rotated");
    ExpectSameBits(kv.ToHost(), kv_values, "kv input untouched");
    const auto got = packed.ToHost(), want = want_packed.ToHost();
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << rows << " rows: packed";
    // The row stored nowhere left its would-be place poisoned; the others were written.
    for (int64_t r = 0; r < rows; ++r) {
      if (dest[r] < 0) continue;
      EXPECT_NE(got[dest[r] * kernels::kKvRowBytes + kernels::kKvRowBytes - 1], 0xff);
    }
  }
}

TEST_F(FusedGlueTest, ShapesTheKernelsCannotTakeAreRejected) {
  DeviceVector<float> x(Values(64, 1.0f)), inv_freq(InvFreq(16));
  DeviceVector<int64_t> pos(Positions(1));
  const kernels::RopeArgs rope{1, 64, 16, inv_freq.get(), pos.get(), false};
  const kernels::RopeArgs odd{1, 64, 15, inv_freq.get(), pos.get(), false};
  EXPECT_NE(
      kernels::RmsNormRopeQdq(x.get(), nullptr, 2, 32, 1e-6f, &rope, x.get(), nullptr, nullptr),
      0);  // rope.head_dim != dim
  EXPECT_NE(
      kernels::RmsNormRopeQdq(x.get(), nullptr, 1, 64, 1e-6f, &odd, x.get(), nullptr, nullptr), 0);
  EXPECT_NE(kernels::SwiGluQdq(x.get(), x.get(), 1, 64, 0.0f, x.get(), nullptr, nullptr), 0);
  // Packing needs whole 512-value cache rows and no FP8 round trip beside it.
  auto cache = DeviceVector<uint8_t>::Poisoned(kernels::kKvRowBytes);
  kernels::NormJob narrow, fine;
  narrow = {x.get(), nullptr, 1, 64, 1e-6f, nullptr, x.get(), nullptr, cache.get(), nullptr};
  EXPECT_NE(kernels::RmsNormRopeQdqPair(narrow, fine, nullptr), 0);
}

}  // namespace
}  // namespace deepinfer
