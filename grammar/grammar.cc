#include "grammar/grammar.h"

#include <array>
#include <bit>
#include <map>

#include "grammar/lexical_dfa.h"
#include "grammar/mask_cache.h"

namespace deepinfer::grammar {

namespace {
constexpr size_t kMaxPositions = size_t{1} << 24;  // resource limit for one compiled grammar
// Bounds on the regular-rule conversion per grammar: NFA states built over all attempts and DFA
// states kept. Past them rules stay in the Earley grammar (correct, only slower to match).
constexpr size_t kMaxDfaWork = 131072;
constexpr int32_t kMaxDfaStatesTotal = 32768;

// The largest regular rules reachable from the start, top-down: a rule that converts is a leaf.
std::vector<int32_t> ChooseDfaRules(const Grammar& g, const std::vector<uint8_t>& productive,
                                    std::vector<std::shared_ptr<const ByteDfa>>* dfas) {
  const std::vector<size_t> nfa_size = RegularRuleSizes(g, productive);
  const DfaLimits limits;
  std::vector<int32_t> dfa_of(g.num_rules(), -1);
  std::vector<uint8_t> seen(g.num_rules(), 0);
  // (rule, the largest NFA worth trying below here): under a rule whose DFA outgrew the limit,
  // only rules of at most half its size are tried, so a chain of nested rules (a bounded
  // repetition) costs a geometric series of attempts, not one per link.
  std::vector<std::pair<int32_t, size_t>> stack = {{g.start(), limits.max_nfa_states}};
  size_t work = 0;
  int32_t states = 0;
  while (!stack.empty()) {
    auto [r, budget] = stack.back();
    stack.pop_back();
    if (seen[r]) continue;
    seen[r] = 1;
    if (nfa_size[r] > 0 && nfa_size[r] <= budget && work < kMaxDfaWork &&
        states < kMaxDfaStatesTotal) {
      std::optional<ByteDfa> d = BuildRuleDfa(g, r, productive, limits, &work);
      if (d) {
        states += d->num_states();
        dfa_of[r] = static_cast<int32_t>(dfas->size());
        dfas->push_back(std::make_shared<const ByteDfa>(std::move(*d)));
        continue;
      }
      budget = nfa_size[r] / 2;
    }
    for (const Sequence& alt : g.alternatives(r)) {
      for (const Symbol& s : alt) {
        if (!s.is_terminal() && productive[s.rule] && !seen[s.rule]) {
          stack.push_back({s.rule, budget});
        }
      }
    }
  }
  return dfa_of;
}
}  // namespace

int32_t CompiledGrammar::StartState(int32_t p) const {
  const Pos& q = positions_[p];
  return q.kind == kDfa ? dfas_[q.value]->start : 0;
}

int ByteSet::Count() const {
  return std::popcount(w[0]) + std::popcount(w[1]) + std::popcount(w[2]) + std::popcount(w[3]);
}

int32_t Grammar::AddRule(std::string name) {
  rules_.emplace_back();
  names_.push_back(std::move(name));
  return num_rules() - 1;
}

void Grammar::AddAlternative(int32_t rule, Sequence seq) { rules_[rule].push_back(std::move(seq)); }

Sequence Grammar::Literal(std::string_view text) {
  Sequence seq;
  for (char c : text) seq.push_back(Symbol::Bytes(ByteSet::Single(static_cast<uint8_t>(c))));
  return seq;
}

Symbol Grammar::Group(Sequence seq, std::string_view hint) {
  if (seq.size() == 1) return seq[0];
  const int32_t r = AddRule(std::string(hint));
  AddAlternative(r, std::move(seq));
  return Symbol::Rule(r);
}

Symbol Grammar::Choice(std::vector<Sequence> alts, std::string_view hint) {
  if (alts.size() == 1) return Group(std::move(alts[0]), hint);
  const int32_t r = AddRule(std::string(hint));
  for (auto& a : alts) AddAlternative(r, std::move(a));
  return Symbol::Rule(r);
}

Symbol Grammar::Optional(Symbol s) {
  const int32_t r = AddRule("opt");
  AddAlternative(r, {});
  AddAlternative(r, {s});
  return Symbol::Rule(r);
}

Symbol Grammar::Star(Symbol s) {
  // Left recursion: the Earley chart stays small (right recursion is quadratic without Leo).
  const int32_t r = AddRule("star");
  AddAlternative(r, {});
  AddAlternative(r, {Symbol::Rule(r), s});
  return Symbol::Rule(r);
}

Symbol Grammar::Plus(Symbol s) {
  const int32_t r = AddRule("plus");
  AddAlternative(r, {s});
  AddAlternative(r, {Symbol::Rule(r), s});
  return Symbol::Rule(r);
}

Symbol Grammar::Repeat(Symbol s, int min, int max) {
  Sequence seq(static_cast<size_t>(min), s);
  if (max < 0) {
    seq.push_back(Star(s));
  } else if (max > min) {
    // tail_k = "" | s tail_{k-1}: at most max-min more copies, linear in size.
    Symbol tail = Optional(s);
    for (int k = min + 1; k < max; ++k) {
      const int32_t r = AddRule("rep");
      AddAlternative(r, {});
      AddAlternative(r, {s, tail});
      tail = Symbol::Rule(r);
    }
    seq.push_back(tail);
  }
  const int32_t r = AddRule("repeat");
  AddAlternative(r, std::move(seq));
  return Symbol::Rule(r);
}

Symbol Grammar::Nothing() { return Symbol::Rule(AddRule("nothing")); }

std::string Grammar::ToString() const {
  std::string out;
  for (int32_t r = 0; r < num_rules(); ++r) {
    out += names_[r] + "#" + std::to_string(r) + " ::=";
    for (size_t a = 0; a < rules_[r].size(); ++a) {
      out += a ? " |" : "";
      for (const Symbol& s : rules_[r][a]) {
        if (!s.is_terminal()) {
          out += " " + names_[s.rule] + "#" + std::to_string(s.rule);
          continue;
        }
        out += " [";
        for (int b = 0; b < 256; ++b) {
          if (!s.bytes.Has(static_cast<uint8_t>(b))) continue;
          if (b >= 0x21 && b < 0x7f) {
            out += static_cast<char>(b);
          } else {
            static const char* kHex = "0123456789abcdef";
            out += std::string("\\x") + kHex[b >> 4] + kHex[b & 15];
          }
        }
        out += "]";
      }
      if (rules_[r][a].empty()) out += " \"\"";
    }
    out += "\n";
  }
  return out;
}

Result<CompiledGrammar> CompiledGrammar::Compile(const Grammar& g) {
  const int32_t n = g.num_rules();
  if (g.start() < 0 || g.start() >= n) return InvalidArgument("grammar has no start rule");
  // Productive rules: those deriving at least one string.
  std::vector<uint8_t> productive(n, 0);
  auto seq_ok = [&](const Sequence& seq, const std::vector<uint8_t>& flag) {
    for (const Symbol& s : seq) {
      if (s.is_terminal() ? s.bytes.Empty() : !flag[s.rule]) return false;
    }
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < n; ++r) {
      if (productive[r]) continue;
      for (const Sequence& seq : g.alternatives(r)) {
        if (seq_ok(seq, productive)) {
          productive[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  if (!productive[g.start()]) return InvalidArgument("the grammar matches no string at all");

  CompiledGrammar c;
  c.mask_cache_ = std::make_shared<MaskCache>();
  c.start_ = g.start();
  c.prods_.resize(n);
  c.nullable_.assign(n, 0);
  c.names_.resize(n);
  std::map<std::array<uint64_t, 4>, int32_t> term_index;
  const std::vector<int32_t> dfa_of = ChooseDfaRules(g, productive, &c.dfas_);
  for (int32_t r = 0; r < n; ++r) {
    c.names_[r] = g.name(r);
    if (!productive[r]) continue;
    if (dfa_of[r] >= 0) {
      if (c.positions_.size() + 2 > kMaxPositions) {
        return InvalidArgument("grammar too large (more than 16M symbols)");
      }
      c.prods_[r].push_back(static_cast<int32_t>(c.positions_.size()));
      c.positions_.push_back({kDfa, dfa_of[r]});
      c.positions_.push_back({kEnd, r});
      continue;
    }
    for (const Sequence& seq : g.alternatives(r)) {
      if (!seq_ok(seq, productive)) continue;
      if (c.positions_.size() + seq.size() + 1 > kMaxPositions) {
        return InvalidArgument("grammar too large (more than 16M symbols)");
      }
      c.prods_[r].push_back(static_cast<int32_t>(c.positions_.size()));
      for (const Symbol& s : seq) {
        if (!s.is_terminal()) {
          c.positions_.push_back({kRule, s.rule});
          continue;
        }
        const std::array<uint64_t, 4> key = {s.bytes.w[0], s.bytes.w[1], s.bytes.w[2],
                                             s.bytes.w[3]};
        auto [it, inserted] = term_index.emplace(key, static_cast<int32_t>(c.terminals_.size()));
        if (inserted) c.terminals_.push_back(s.bytes);
        c.positions_.push_back({kTerminal, it->second});
      }
      c.positions_.push_back({kEnd, r});
    }
  }
  // Nullable rules.
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < n; ++r) {
      if (c.nullable_[r]) continue;
      for (int32_t p : c.prods_[r]) {
        while ((c.positions_[p].kind == kRule && c.nullable_[c.positions_[p].value]) ||
               (c.positions_[p].kind == kDfa &&
                c.dfas_[c.positions_[p].value]->accepting[c.StartState(p)])) {
          ++p;
        }
        if (c.positions_[p].kind == kEnd) {
          c.nullable_[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  return c;
}

}  // namespace deepinfer::grammar
