// bench/constrained_draws.sh, the end-to-end check of draws under a grammar through deepinferd
// (run on the GPU host with DEVICE=cuda), run here on the CPU backend: every answer of the real
// daemon passes its constraint's check, and with a client that drops the response format every
// answer fails it, so the script's checks are the ones that decide; a daemon that never comes up
// is its own error, not six constraint failures.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using testing::CommandRun;
using testing::RunCommand;
using testing::TempDir;

class ConstrainedDrawsScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (RunCommand("command -v python3").code != 0) GTEST_SKIP() << "no python3";
  }
  CommandRun Run(const std::string& bin_dir) {
    return RunCommand("TOKENIZER=" + src_ + "/deps/tokenizer-v4-test bash " + src_ +
                      "/bench/constrained_draws.sh " + bin_dir + " 2>&1");
  }
  const std::string src_ = DEEPINFER_SOURCE_DIR;
  const std::string bin_ = DEEPINFER_BIN_DIR;
};

TEST_F(ConstrainedDrawsScriptTest, EveryAnswerOfTheDaemonPassesItsConstraint) {
  const CommandRun r = Run(bin_);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(testing::CountOf(r.out, "PASS "), 6u) << r.out;
  for (const char* kind : {"PASS regex", "PASS json_schema", "PASS grammar"}) {
    EXPECT_EQ(testing::CountOf(r.out, kind), 2u) << kind << "\n" << r.out;
  }
}

TEST_F(ConstrainedDrawsScriptTest, AnswersWithoutTheConstraintFailTheChecks) {
  TempDir dir;
  for (const char* tool : {"deepinferd", "deepinfer-model"}) {
    ASSERT_EQ(RunCommand("ln -s " + bin_ + "/" + tool + " " + (dir / tool)).code, 0);
  }
  // The client, less its --response-format and that option's value.
  std::ofstream(dir / "deepinfer")
      << "#!/usr/bin/env bash\nargs=()\n"
      << "while [ $# -gt 0 ]; do\n"
      << "  if [ \"$1\" = --response-format ]; then shift 2; continue; fi\n"
      << "  args+=(\"$1\"); shift\ndone\n"
      << "exec " << bin_ << "/deepinfer \"${args[@]}\"\n";
  ASSERT_EQ(RunCommand("chmod +x " + (dir / "deepinfer")).code, 0);
  const CommandRun r = Run(dir.path());
  EXPECT_EQ(r.code, 1) << r.out;
  // Answers that came back and failed their checks, not a client or daemon that failed.
  EXPECT_EQ(testing::CountOf(r.out, "FAIL "), 6u) << r.out;
  EXPECT_EQ(testing::CountOf(r.out, "ERROR "), 0u) << r.out;
  EXPECT_EQ(testing::CountOf(r.out, "''"), 0u) << "an empty answer\n" << r.out;
}

TEST_F(ConstrainedDrawsScriptTest, ADaemonThatDoesNotComeUpIsNotAConstraintFailure) {
  TempDir dir;
  for (const char* tool : {"deepinfer", "deepinfer-model"}) {
    ASSERT_EQ(RunCommand("ln -s " + bin_ + "/" + tool + " " + (dir / tool)).code, 0);
  }
  std::ofstream(dir / "deepinferd") << "#!/usr/bin/env bash\nexit 3\n";
  ASSERT_EQ(RunCommand("chmod +x " + (dir / "deepinferd")).code, 0);
  const CommandRun r = Run(dir.path());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("deepinferd did not come up"), std::string::npos) << r.out;
  EXPECT_EQ(testing::CountOf(r.out, "FAIL "), 0u) << r.out;
}

}  // namespace
}  // namespace deepinfer
