// The one internal grammar form: a context-free grammar over bytes. Every front end (regex, GBNF,
// JSON Schema) produces a Grammar; Compile() checks and flattens it for the Earley matcher.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/status.h"

namespace deepinfer::grammar {

struct ByteDfa;
class MaskCache;

/// A set of bytes (a terminal), 256 bits.
struct ByteSet {
  uint64_t w[4] = {0, 0, 0, 0};

  static ByteSet Single(uint8_t b) {
    ByteSet s;
    s.Add(b);
    return s;
  }
  static ByteSet Range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.AddRange(lo, hi);
    return s;
  }
  void Add(uint8_t b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  void Union(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) w[i] |= o.w[i];
  }
  bool Has(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  bool Empty() const { return (w[0] | w[1] | w[2] | w[3]) == 0; }
  int Count() const;
  bool operator==(const ByteSet& o) const {
    return w[0] == o.w[0] && w[1] == o.w[1] && w[2] == o.w[2] && w[3] == o.w[3];
  }
};

/// A grammar symbol: a nonterminal (rule >= 0) or a terminal byte set (rule == -1).
struct Symbol {
  int32_t rule = -1;
  ByteSet bytes;

  static Symbol Rule(int32_t r) {
    Symbol s;
    s.rule = r;
    return s;
  }
  static Symbol Bytes(const ByteSet& b) {
    Symbol s;
    s.bytes = b;
    return s;
  }
  bool is_terminal() const { return rule < 0; }
};

using Sequence = std::vector<Symbol>;

/// Rules whose alternatives are sequences of symbols. An empty sequence is epsilon.
class Grammar {
 public:
  /// A new rule with no alternatives yet; `name` is for messages and debugging.
  int32_t AddRule(std::string name);
  void AddAlternative(int32_t rule, Sequence seq);
  int32_t num_rules() const { return static_cast<int32_t>(rules_.size()); }
  const std::vector<Sequence>& alternatives(int32_t rule) const { return rules_[rule]; }
  const std::string& name(int32_t rule) const { return names_[rule]; }
  int32_t start() const { return start_; }
  void set_start(int32_t rule) { start_ = rule; }

  // Building helpers. Each returns one symbol, adding a fresh rule when it needs one.
  /// The bytes of `text` as a sequence of single-byte terminals.
  static Sequence Literal(std::string_view text);
  /// A rule `seq`, as one symbol (a terminal stays itself when seq has exactly one).
  Symbol Group(Sequence seq, std::string_view hint = "group");
  /// A rule with the given alternatives.
  Symbol Choice(std::vector<Sequence> alts, std::string_view hint = "alt");
  Symbol Optional(Symbol s);
  Symbol Star(Symbol s);
  Symbol Plus(Symbol s);
  /// s{min,max}; max < 0 means unbounded. Expanded into a chain of rules (linear size).
  Symbol Repeat(Symbol s, int min, int max);
  /// A rule matching nothing (no alternatives); Compile() prunes it.
  Symbol Nothing();
  /// Readable dump for debugging and tests.
  std::string ToString() const;

 private:
  std::vector<std::vector<Sequence>> rules_;
  std::vector<std::string> names_;
  int32_t start_ = 0;
};

/// A checked, flattened grammar: productions laid out in one array of positions so that an
/// Earley item is a (position, origin) pair. Nonproductive rules (ones that derive no string)
/// are pruned, so every nonempty Earley set is a viable prefix.
class CompiledGrammar {
 public:
  /// Fails when the start rule derives no string or the grammar exceeds resource limits.
  static Result<CompiledGrammar> Compile(const Grammar& g);

  enum Kind : uint8_t { kTerminal, kRule, kEnd, kDfa };
  struct Pos {
    Kind kind;
    int32_t value;  // terminal index, rule id, (kEnd) the production's left-hand rule, or DFA index
  };
  const Pos& pos(int32_t p) const { return positions_[p]; }
  const ByteSet& terminal(int32_t t) const { return terminals_[t]; }
  /// Regular rules compiled to DFAs: such a rule has one production, [kDfa d, kEnd].
  const ByteDfa& dfa(int32_t d) const { return *dfas_[d]; }
  int32_t num_dfas() const { return static_cast<int32_t>(dfas_.size()); }
  /// The DFA state an item starts in at position p (0 unless p is a kDfa position).
  int32_t StartState(int32_t p) const;
  /// Start positions of the productions of `rule`.
  const std::vector<int32_t>& productions(int32_t rule) const { return prods_[rule]; }
  bool nullable(int32_t rule) const { return nullable_[rule] != 0; }
  int32_t start() const { return start_; }
  int32_t num_rules() const { return static_cast<int32_t>(prods_.size()); }
  int32_t num_positions() const { return static_cast<int32_t>(positions_.size()); }
  const std::string& rule_name(int32_t r) const { return names_[r]; }
  /// Shared by every matcher of this grammar (copies of it included); thread-safe.
  MaskCache* mask_cache() const { return mask_cache_.get(); }

 private:
  std::vector<Pos> positions_;
  std::vector<ByteSet> terminals_;
  std::vector<std::shared_ptr<const ByteDfa>> dfas_;
  std::shared_ptr<MaskCache> mask_cache_;
  std::vector<std::vector<int32_t>> prods_;
  std::vector<uint8_t> nullable_;
  std::vector<std::string> names_;
  int32_t start_ = 0;
};

}  // namespace deepinfer::grammar
