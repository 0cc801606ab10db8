// Regular parts of a grammar as byte DFAs. A rule whose sub-grammar has no recursion other than
// left recursion on itself (the shape Star/Plus build) derives a regular language; compiling it to
// a DFA lets the Earley matcher cross it with one item that changes state per byte instead of a
// chart that grows and completes per byte. That keeps the sets small while masks are computed and
// makes the matcher's state inside a string, number or regex independent of where it started
// (see MaskCache).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "grammar/grammar.h"

namespace deepinfer::grammar {

/// A deterministic automaton over bytes with byte equivalence classes. Every state can reach an
/// accepting state (the source rules are productive), so a live state is a viable prefix.
struct ByteDfa {
  std::array<uint8_t, 256> byte_class{};
  int32_t num_classes = 0;
  int32_t start = 0;
  std::vector<int32_t> next;        // [state * num_classes + class] -> state, -1 = dead
  std::vector<uint8_t> accepting;   // per state
  std::vector<ByteSet> live_bytes;  // per state: bytes with a transition

  int32_t num_states() const { return static_cast<int32_t>(accepting.size()); }
  int32_t Next(int32_t state, uint8_t b) const { return next[state * num_classes + byte_class[b]]; }
};

/// Resource limits for turning rules into DFAs; beyond them the rule stays in the Earley grammar.
struct DfaLimits {
  size_t max_nfa_states = 4096;
  int32_t max_dfa_states = 2048;
};

/// Per rule: the number of NFA states BuildRuleDfa would build for it (saturating), or 0 when
/// the rule's language is not regular by the shape test above. Only alternatives whose symbols
/// are all productive (productive[r] != 0, nonempty byte sets) count.
std::vector<size_t> RegularRuleSizes(const Grammar& g, const std::vector<uint8_t>& productive);

/// The DFA of a regular rule, or nullopt when it exceeds the limits. *nfa_work grows by the NFA
/// states built, so that callers can bound the total work of many attempts.
std::optional<ByteDfa> BuildRuleDfa(const Grammar& g, int32_t rule,
                                    const std::vector<uint8_t>& productive, const DfaLimits& limits,
                                    size_t* nfa_work);

}  // namespace deepinfer::grammar
