// Encode throughput of the C++ tokenizer on a JSONL corpus (one JSON string per line),
// single-threaded, best of N passes; prints one JSON line.
//   bench_tokenizer --tokenizer DIR --corpus FILE.jsonl [--repeats N]
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/tokenizer/tokenizer.h"

using namespace deepinfer;

int main(int argc, char** argv) {
  std::string dir, corpus;
  int repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokenizer"))
      dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--corpus"))
      corpus = argv[i + 1];
    else if (!std::strcmp(argv[i], "--repeats"))
      repeats = std::atoi(argv[i + 1]);
  }
  auto tok = Tokenizer::LoadDir(dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  std::ifstream in(corpus);
  std::vector<std::string> docs;
  simdjson::dom::parser parser;
  size_t bytes = 0;
  for (std::string line; std::getline(in, line);) {
    std::string_view s;
    if (line.empty() || parser.parse(line).get(s)) continue;
    docs.emplace_back(s);
    bytes += s.size();
  }
  size_t tokens = 0;
  for (const auto& d : docs) tokens += (*tok)->Encode(d, SpecialTokens::kRecognize).size();
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    size_t sink = 0;
    for (const auto& d : docs) sink += (*tok)->Encode(d, SpecialTokens::kRecognize).size();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (sink != tokens) return 1;
  }
  std::printf(
      "{\"impl\": \"deepinfer\", \"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.4f, "
      "\"mb_per_s\": %.2f}\n",
      bytes, tokens, best, bytes / best / 1e6);
  return 0;
}
