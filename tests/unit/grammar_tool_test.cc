// deepinfer-grammar check end to end with the default (real) tokenizer on the repository's case
// file, a failing case file, and bad usage.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "engine/tokenizer/tokenizer.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

const std::string kTok = Tokenizer::DefaultDir(DEEPINFER_SOURCE_DIR);

using ToolRun = testing::CommandRun;

ToolRun Tool(const std::string& args) {
  return testing::RunCommand(std::string(DEEPINFER_BIN_DIR) + "/deepinfer-grammar " + args +
                             " 2>&1");
}

TEST(GrammarToolTest, RepositoryCasesPass) {
  if (!std::filesystem::exists(kTok + "/tokenizer.json")) GTEST_SKIP() << "no tokenizer";
  const ToolRun r =
      Tool("check --tokenizer " + kTok + " --cases " + DEEPINFER_TEST_DATA + "/grammar/cases.json");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("PASS person 0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n66 passed, 0 failed\n"), std::string::npos) << r.out;
}

TEST(GrammarToolTest, FailuresAreReported) {
  if (!std::filesystem::exists(kTok + "/tokenizer.json")) GTEST_SKIP() << "no tokenizer";
  testing::TempDir dir;
  testing::WriteFile(dir / "cases.json", R"([
    {"name": "digits", "kind": "regex", "constraint": "[0-9]+",
     "accept": ["123", "12a"], "reject": ["x", "456"]},
    {"name": "broken", "kind": "regex", "constraint": "(a", "accept": ["a"], "reject": ["b"]}
  ])");
  const ToolRun r = Tool("check --tokenizer " + kTok + " --cases " + (dir / "cases.json"));
  EXPECT_EQ(r.code, 1) << r.out;
  for (const char* line :
       {"PASS digits 0\n", "FAIL digits 1\n", "PASS digits 2\n", "FAIL digits 3\n",
        "FAIL broken 0\n", "PASS broken 1\n", "missing ')'", "\n3 passed, 3 failed\n"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << " in\n" << r.out;
  }
}

TEST(GrammarToolTest, BadUsage) {
  EXPECT_EQ(Tool("").code, 2);
  EXPECT_EQ(Tool("check --cases x.json").code, 2);
  EXPECT_EQ(Tool("check --tokenizer /nonexistent --cases x.json").code, 2);
}

}  // namespace
}  // namespace deepinfer
