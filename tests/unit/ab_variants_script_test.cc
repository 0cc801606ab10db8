// bench/ab_variants.sh and bench/lib/ab_summary.py, the GPU host's A/B of several builds, run here
// with stand-ins for deepinfer-model, gpu_tests and two bench_device_forward builds (shell scripts
// printing the JSON lines the real one prints, 10 % apart): every run's lines are labelled with
// their variant and round, the tests run before the rounds, and the summary's means and change
// against the first variant are the ones those lines give.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using testing::CommandRun;
using testing::RunCommand;
using testing::TempDir;

class AbVariantsScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (RunCommand("command -v python3").code != 0) GTEST_SKIP() << "no python3";
    // make-tiny stand-in: the directory only.
    Write("deepinfer-model", "mkdir -p \"$3\"\n");
    Write("gpu_tests", "echo \"filter $1\"\necho '[  PASSED  ] 3 tests.'\n");
    // A bench_device_forward build whose step takes BASE us times the batch.
    for (const auto& [name, base] : {std::pair{"bench_a", 100}, std::pair{"bench_b", 90}}) {
      Write(name,
            "while [ $# -gt 0 ]; do [ \"$1\" = --batches ] && batches=$2; shift; done\n"
            "for b in ${batches//,/ }; do\n"
            "  printf '{\"batch\": %d, \"us_per_step\": %d.0, \"of_floor\": 0.5}\\n' $b "
            "$((" +
                std::to_string(base) +
                " * b))\n"
                "done\n");
    }
  }
  void Write(const std::string& name, const std::string& body) {
    std::ofstream(dir_ / name) << "#!/usr/bin/env bash\n" << body;
    ASSERT_EQ(RunCommand("chmod +x " + (dir_ / name)).code, 0);
  }
  CommandRun Run(const std::string& env, const std::string& args) {
    return RunCommand("PATH=" + dir_.path() + ":$PATH " + env + " bash " + src_ +
                      "/bench/ab_variants.sh " + (dir_ / "out") + " " + args + " 2>&1");
  }
  const std::string src_ = DEEPINFER_SOURCE_DIR;
  TempDir dir_;
};

TEST_F(AbVariantsScriptTest, LabelsEveryRunAndSummarisesAgainstTheFirstVariant) {
  const CommandRun r =
      Run("ROUNDS=2 BATCHES=1,4 TESTS=" + (dir_ / "gpu_tests") + " TESTS_FILTER='Foo.*'",
          "a=" + (dir_ / "bench_a") + " b=" + (dir_ / "bench_b"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("[  PASSED  ] 3 tests."), std::string::npos) << r.out;
  EXPECT_NE(testing::ReadFile(dir_ / "out/gpu_tests.txt").find("filter --gtest_filter=Foo.*"),
            std::string::npos);
  const std::string lines = testing::ReadFile(dir_ / "out/ab.jsonl");
  EXPECT_EQ(testing::CountOf(lines, "\n"), 8u) << lines;  // 2 rounds x 2 variants x 2 batches
  EXPECT_EQ(testing::CountOf(lines, "\"variant\": \"a\""), 4u) << lines;
  EXPECT_EQ(testing::CountOf(lines, "\"round\": 2"), 4u) << lines;
  EXPECT_NE(r.out.find("a, round 2 b1:100.0(0.500) b4:400.0(0.500)"), std::string::npos) << r.out;
  // The means, and b's change against a: -10 % at both batches.
  EXPECT_NE(r.out.find("batch 4  a                        mean    400.0 us   +0.00 %"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("batch 1  b                        mean     90.0 us  -10.00 %"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("batch 4  b                        mean    360.0 us  -10.00 %"),
            std::string::npos)
      << r.out;
}

TEST_F(AbVariantsScriptTest, RefusesAMissingBuildBeforeMakingTheModel) {
  const CommandRun r = Run("", "a=" + (dir_ / "bench_a") + " b=" + (dir_ / "no_such_build"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no_such_build is not executable"), std::string::npos) << r.out;
  EXPECT_NE(RunCommand("test -e " + (dir_ / "out/ab.jsonl")).code, 0);
}

}  // namespace
}  // namespace deepinfer
