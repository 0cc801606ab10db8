// MakeTinyCheckpoint: the bytes it writes do not depend on how many threads draw and quantise the
// weights (each draw is a function of the seed and its index; each row block is quantised alone).
// That the bytes equal the single-threaded generator's of earlier versions is golden_test's
// check: its committed reference logits were computed on checkpoints made by it.
#include "engine/model/tiny_checkpoint.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

TEST(TinyCheckpointTest, BytesDoNotDependOnTheThreadCount) {
  for (const char* quantize : {"fp8-fp4", "fp8", "bf16", "none"}) {
    SCOPED_TRACE(quantize);
    TinySpec spec;
    spec.quantize = quantize;
    spec.seed = 7;
    // Rows that are not whole 128-row blocks (vocab 300, wq_b 4 x 64 = 256 rows of 96), so the
    // FP8 row blocks and FP4 rows split unevenly over the threads.
    spec.vocab = 300;
    std::string first;
    for (int threads : {1, 3, 7}) {
      spec.threads = threads;
      testing::TempDir dir;
      ASSERT_TRUE(MakeTinyCheckpoint(spec, dir.path()).ok());
      const std::string bytes = testing::ReadFile(dir.path() + "/model.safetensors");
      ASSERT_GT(bytes.size(), 1000u);
      if (first.empty()) {
        first = bytes;
      } else {
        EXPECT_TRUE(bytes == first) << threads << " threads";
      }
    }
  }
}

TEST(TinyCheckpointTest, SeedsGiveDifferentWeights) {
  TinySpec spec;
  spec.quantize = "fp8-fp4";
  testing::TempDir a, b;
  ASSERT_TRUE(MakeTinyCheckpoint(spec, a.path()).ok());
  spec.seed = 2;
  ASSERT_TRUE(MakeTinyCheckpoint(spec, b.path()).ok());
  EXPECT_FALSE(testing::ReadFile(a.path() + "/model.safetensors") ==
               testing::ReadFile(b.path() + "/model.safetensors"));
}

}  // namespace
}  // namespace deepinfer
