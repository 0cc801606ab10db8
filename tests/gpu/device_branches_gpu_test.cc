// The device forward's concurrent branches (StepBranches, engine/backend/cuda/device_step.h):
// the compressors, the indexer and the shared expert on side streams must give the one-stream
// forward's logits bit for bit — the same kernels on the same inputs, so any difference is a
// race on a buffer or a missing edge between the streams. Prompt chunks of 4 rows, then decode
// steps of 1, 3 and 6 rows, cover the one-row paths and the tensor-core ones up to kGemvMaxRows,
// as graphs and eagerly. The chunks ask for two of their rows' logits: a graph of up to 8 rows
// runs the LM head on all its rows, the eager step on the asked ones, and both must agree.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "engine/backend/cuda/device_forward.h"
#include "kernels/cuda_available.h"
#include "tests/gpu/kernel_shaped_spec.h"

namespace deepinfer {
namespace {

// Sequence 0 first takes a prompt of kPrompt tokens in chunks of kChunk; then sequence k joins
// the decode steps at step kJoin[k]; 100 steps reach past the CSA layers' top-k of compressed
// rows. Returns every step's logits, in order.
constexpr int kSeqs = 6, kSteps = 100, kPrompt = 16, kChunk = 4;
const int kJoin[kSeqs] = {0, 30, 30, 60, 60, 60};

std::vector<float> Decode(const Checkpoint& ck, const std::vector<int32_t>& tokens, bool branches,
                          bool graphs) {
  DeviceForwardOptions opt;
  opt.max_batch = 8;
  opt.max_chunk = kChunk;
  opt.slots = kSeqs;
  opt.max_context = 128;
  opt.branches = branches;
  opt.graphs = graphs;
  auto dev = DeviceForward::Create(ck, opt);
  EXPECT_TRUE(dev.ok()) << dev.status().ToString();
  if (!dev.ok()) return {};
  const int64_t V = ck.config.vocab_size;
  std::vector<float> all, logits(kSeqs * V);
  const int32_t asked[2] = {1, kChunk - 1};
  for (int c = 0; c < kPrompt; c += kChunk) {
    const std::vector<int32_t> slots(kChunk, 0);
    const std::span<const int32_t> toks(&tokens[kSeqs * kSteps + c], kChunk);
    const Status st = (*dev)->Step(slots, toks, asked, logits.data());
    EXPECT_TRUE(st.ok()) << "chunk at " << c << ": " << st.ToString();
    if (!st.ok()) return {};
    all.insert(all.end(), logits.begin(), logits.begin() + 2 * V);
  }
  for (int step = 0; step < kSteps; ++step) {
    std::vector<int32_t> slots, toks;
    for (int k = 0; k < kSeqs; ++k) {
      if (step < kJoin[k]) continue;
      slots.push_back(k);
      toks.push_back(tokens[k * kSteps + step]);
    }
    const Status st = (*dev)->Step(slots, toks, logits.data());
    EXPECT_TRUE(st.ok()) << "step " << step << ": " << st.ToString();
    if (!st.ok()) return {};
    all.insert(all.end(), logits.begin(), logits.begin() + slots.size() * V);
  }
  return all;
}

TEST(DeviceBranchesTest, SideStreamsGiveTheOneStreamLogitsBitForBit) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  testing::TempDir dir;
  const uint32_t seed = std::random_device{}();
  auto ck = testing::KernelShapedCheckpoint(dir, seed);
  ASSERT_NE(ck, nullptr);
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(kSeqs * kSteps + kPrompt);  // the decode tokens, then the prompt
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % ck->config.vocab_size);
  const auto serial = Decode(*ck, tokens, /*branches=*/false, /*graphs=*/true);
  const auto graphs = Decode(*ck, tokens, /*branches=*/true, /*graphs=*/true);
  const auto eager = Decode(*ck, tokens, /*branches=*/true, /*graphs=*/false);
  ASSERT_FALSE(serial.empty());
  ASSERT_EQ(graphs.size(), serial.size());
  ASSERT_EQ(eager.size(), serial.size());
  const int64_t V = ck->config.vocab_size;
  auto first_difference = [&](const std::vector<float>& got) -> int64_t {
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::memcmp(&got[i], &serial[i], sizeof(float)) != 0) return static_cast<int64_t>(i) / V;
    }
    return -1;
  };
  EXPECT_EQ(first_difference(graphs), -1) << "seed " << seed << " (logit row shown)";
  EXPECT_EQ(first_difference(eager), -1) << "seed " << seed << " (logit row shown)";
}

}  // namespace
}  // namespace deepinfer
