// bench/kernel_trace_summary.py on a hand-made trace in libdi_kernel_trace.so's format
// (bench/kernel_trace.cc): a step's kernels are grouped by their graph launch, the graph replayed
// most often is picked, and each kernel's share (the slice of the span up to its end, from its
// start on; the part before its start shared among the kernels running then) divides the span
// between the kernels, products and glue apart, without charging a short kernel with the time of
// a long one it ends inside.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using testing::CommandRun;
using testing::RunCommand;
using testing::TempDir;

struct Kernel {
  int node;
  long start, end;  // ns from the launch's base
  const char* name;
};

// Six kernels of one launch: the GEMV starts early (an overlapped launch waiting on the embed),
// the experts run beside the norm and, on a side stream, a quantisation that ends inside them;
// the mHC post starts after a 2 us gap.
constexpr Kernel kStep[] = {{1, 0, 2000, "EmbedKernel"},
                            {2, 1000, 10000, "Fp8GemvWideKernel<1, 1, 1>"},
                            {3, 9000, 12000, "NormRopeQdqKernel"},
                            {4, 10500, 20000, "Fp4LimbsKernel<4, true>"},
                            {6, 17000, 18000, "QuantizeActKernel"},
                            {5, 22000, 23000, "HyperPostKernel<4>"}};

class KernelTraceSummaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (RunCommand("command -v python3").code != 0) GTEST_SKIP() << "no python3";
    std::ofstream f(dir_ / "trace.csv");
    f << "correlation,graph,node,stream,start_ns,end_ns,grid_x,grid_y,grid_z,block_x,block_y,"
         "block_z,registers,name\n";
    f << "3,0,0,7,100,200,1,1,1,32,1,1,16,\"EagerKernel\"\n";  // not in a graph
    // Graph 7 four times, the first (a warm-up) at half speed; graph 9 once.
    for (int launch = 0; launch < 4; ++launch) {
      const long base = 1000000L * (launch + 1), scale = launch == 0 ? 2 : 1;
      for (const Kernel& k : kStep) {
        f << 10 + launch << ",7," << k.node << ",13," << base + scale * k.start << ","
          << base + scale * k.end << ",64,8,1,256,1,1,40,\"" << k.name << "\"\n";
      }
    }
    f << "20,9,1,13,9000000,9005000,1,1,1,32,1,1,16,\"EmbedKernel\"\n";
    // A record a forced flush left without times, in the last launch of graph 7: skipped.
    f << "13,7,99,13,0,0,1,1,1,32,1,1,16,\"LateKernel\"\n";
  }
  CommandRun Summary(const std::string& args) {
    return RunCommand("python3 " + src_ + "/bench/kernel_trace_summary.py " + (dir_ / "trace.csv") +
                      " " + args + " 2>&1");
  }
  const std::string src_ = DEEPINFER_SOURCE_DIR;
  TempDir dir_;
};

TEST_F(KernelTraceSummaryTest, DividesTheSpanBetweenTheKernelsOfTheMostReplayedGraph) {
  const CommandRun r = Summary("--last 3 --step-csv " + (dir_ / "step.csv"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("graph 7: 3 launches, 6 kernels a launch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("span 23.0 us (min 23.0, max 23.0), GPU busy 21.0 us, idle 2.0 us, "
                       "kernel durations sum 25.5 us"),
            std::string::npos)
      << r.out;
  // Products: the GEMV (9 us, 8 from the embed's end to its own) and the experts (9.5 us, the
  // 8 us from the norm's end less the 1 us the quantisation ran to its end inside them).
  EXPECT_NE(r.out.find("products     2 kernels  dur     18.5 us  share     15.0 us"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("glue         4 kernels  dur      7.0 us  share      6.0 us"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("      7.0       9.5     1  Fp4LimbsKernel<4, true>"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("      1.0       1.0     1  QuantizeActKernel"), std::string::npos) << r.out;
  // The gap before the post is idle, not the post's.
  EXPECT_NE(r.out.find("      1.0       1.0     1  HyperPostKernel<4>"), std::string::npos)
      << r.out;
  const std::string step = testing::ReadFile(dir_ / "step.csv");
  EXPECT_EQ(step.find("kernel,grid,block,start_us,dur_us,share_us\nEmbedKernel,"), 0u) << step;
  EXPECT_NE(step.find("\"Fp8GemvWideKernel<1, 1, 1>\",\"(64, 8, 1)\",\"(256, 1, 1)\",1.000,9.000,"
                      "8.000\nNormRopeQdqKernel"),
            std::string::npos)
      << step;
  EXPECT_NE(step.find("\nHyperPostKernel<4>,\"(64, 8, 1)\",\"(256, 1, 1)\",22.000,1.000,1.000"),
            std::string::npos)
      << step;
}

TEST_F(KernelTraceSummaryTest, KeepsTheWarmUpUnlessTheLastLaunchesAreChosen) {
  const CommandRun all = Summary("");
  ASSERT_EQ(all.code, 0) << all.out;
  EXPECT_NE(all.out.find("graph 7: 4 launches"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("(min 23.0, max 46.0)"), std::string::npos) << all.out;
  const CommandRun other = Summary("--graph 9");
  ASSERT_EQ(other.code, 0) << other.out;
  EXPECT_NE(other.out.find("graph 9: 1 launches, 1 kernels a launch"), std::string::npos)
      << other.out;
  EXPECT_NE(Summary("--graph 5").code, 0);
}

}  // namespace
}  // namespace deepinfer
