// A plain driver for frame_fuzz.cc's LLVMFuzzerTestOneInput, for compilers without libFuzzer:
// runs every seed in the corpus directory, then mutated seeds and random inputs until the time
// budget or the iteration count runs out. Deterministic for a given --seed.
//
//   frame_fuzz_smoke <corpus-dir> [--seconds=2] [--iterations=50000] [--seed=1]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" void FrameFuzzStats(long long* frames, long long* requests_ok, long long* replies_ok);

namespace {

void Run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

// The frame bodies of a seed (after its two control bytes), up to the first broken length.
std::vector<std::string> SplitFrames(const std::string& s) {
  std::vector<std::string> bodies;
  size_t at = 2;
  while (at + 4 <= s.size()) {
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= uint32_t{static_cast<unsigned char>(s[at + i])} << (8 * i);
    if (n == 0 || n > s.size() - at - 4) break;
    bodies.push_back(s.substr(at + 4, n));
    at += 4 + n;
  }
  return bodies;
}

std::string JoinFrames(const std::string& control, const std::vector<std::string>& bodies) {
  std::string s = control;
  for (const std::string& b : bodies) {
    const auto n = static_cast<uint32_t>(b.size());
    for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>(n >> (8 * i)));
    s += b;
  }
  return s;
}

// One random edit of `s`, in the spirit of libFuzzer's mutators, plus frame-aware ones.
void Mutate(std::string& s, const std::vector<std::string>& seeds, std::mt19937_64& rng) {
  auto pos = [&](size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); };
  static const char* const kTokens[] = {"{",
                                        "}",
                                        "[",
                                        "]",
                                        ",",
                                        ":",
                                        "\"",
                                        "\\",
                                        "\\u",
                                        "null",
                                        "true",
                                        "-1",
                                        "0",
                                        "1e308",
                                        "18446744073709551616",
                                        "\"op\":",
                                        "\"id\":",
                                        "\"generate\"",
                                        "\"prompt\":",
                                        "\"prompt_ids\":",
                                        "\"messages\":",
                                        "\"stop\":",
                                        "\xff",
                                        "\xed\xa0\x80",
                                        "\\ud800",
                                        "\\udc00"};
  switch (rng() % 9) {
    case 0:  // flip a bit
      if (!s.empty()) s[pos(s.size())] ^= static_cast<char>(1u << (rng() % 8));
      break;
    case 1:  // set a byte
      if (!s.empty()) s[pos(s.size())] = static_cast<char>(rng());
      break;
    case 2:  // erase a range
      if (!s.empty()) {
        const size_t at = pos(s.size());
        s.erase(at, 1 + pos(std::min<size_t>(16, s.size() - at)));
      }
      break;
    case 3:  // insert random bytes
      s.insert(pos(s.size() + 1), std::string(1 + rng() % 8, static_cast<char>(rng())));
      break;
    case 4: {  // insert a JSON-ish token
      const char* t = kTokens[rng() % std::size(kTokens)];
      s.insert(pos(s.size() + 1), t);
      break;
    }
    case 5: {  // splice with another seed
      const std::string& o = seeds[rng() % seeds.size()];
      if (!o.empty()) s = s.substr(0, pos(s.size() + 1)) + o.substr(pos(o.size()));
      break;
    }
    case 6:  // change the limit selector or the chunk seed
      if (s.size() >= 2) s[rng() % 2] = static_cast<char>(rng());
      break;
    case 7: {  // rewrite a 4-byte little-endian length somewhere
      if (s.size() >= 6) {
        static const uint32_t kLens[] = {0, 1, 2, 63, 64, 65, 4096, 0xffffffffu};
        uint32_t n = rng() % 2 ? kLens[rng() % std::size(kLens)] : static_cast<uint32_t>(rng());
        const size_t at = 2 + pos(s.size() - 5);
        for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>(n >> (8 * i));
      }
      break;
    }
    case 8:  // duplicate a range (repeated frames, long arrays)
      if (!s.empty()) {
        const size_t at = pos(s.size());
        const std::string piece = s.substr(at, 1 + pos(std::min<size_t>(64, s.size() - at)));
        s.insert(at, piece);
      }
      break;
  }
  if (s.size() > (1u << 16)) s.resize(1u << 16);
}

bool Flag(const char* arg, const char* name, long long* out) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0) return false;
  *out = std::atoll(arg + n);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <corpus-dir> [--seconds=S] [--iterations=N] [--seed=K]\n",
                 argv[0]);
    return 2;
  }
  long long seconds = 2, iterations = 50000, seed = 1;
  for (int i = 2; i < argc; ++i) {
    if (!Flag(argv[i], "--seconds=", &seconds) && !Flag(argv[i], "--iterations=", &iterations) &&
        !Flag(argv[i], "--seed=", &seed)) {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  std::vector<std::string> seeds;
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(argv[1])) {
    if (entry.is_regular_file()) paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    Run(seeds.back());
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "no seeds in %s\n", argv[1]);
    return 2;
  }
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  long long runs = 0;
  for (; runs < iterations && std::chrono::steady_clock::now() < deadline; ++runs) {
    std::string input;
    if (rng() % 16 == 0) {  // pure noise
      input.resize(rng() % 512);
      for (char& c : input) c = static_cast<char>(rng());
    } else {
      input = seeds[rng() % seeds.size()];
      const int edits = 1 + static_cast<int>(rng() % 4);
      std::vector<std::string> bodies = SplitFrames(input);
      if (rng() % 2 && !bodies.empty() && input.size() >= 2) {
        // Edit one body and fix its length, so the edit reaches the JSON parser.
        std::string& body = bodies[rng() % bodies.size()];
        for (int e = 0; e < edits; ++e) Mutate(body, seeds, rng);
        if (!body.empty()) input = JoinFrames(input.substr(0, 2), bodies);
      } else {
        for (int e = 0; e < edits; ++e) Mutate(input, seeds, rng);
      }
    }
    Run(input);
  }
  long long frames, requests_ok, replies_ok;
  FrameFuzzStats(&frames, &requests_ok, &replies_ok);
  std::printf(
      "frame_fuzz_smoke: %zu seeds, %lld generated inputs, %lld frames decoded (%lld valid "
      "requests, %lld valid replies), no failures\n",
      seeds.size(), runs, frames, requests_ok, replies_ok);
  return 0;
}
