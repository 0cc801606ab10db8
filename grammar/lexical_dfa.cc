#include "grammar/lexical_dfa.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace deepinfer::grammar {

namespace {

bool Usable(const Sequence& seq, const std::vector<uint8_t>& productive) {
  for (const Symbol& s : seq) {
    if (s.is_terminal() ? s.bytes.Empty() : !productive[s.rule]) return false;
  }
  return true;
}

bool IsLeftSelf(const Sequence& seq, int32_t rule) {
  return !seq.empty() && !seq[0].is_terminal() && seq[0].rule == rule;
}

// Thompson construction with rules inlined at every use; bounded by max_states.
class NfaBuilder {
 public:
  struct Edge {
    int32_t to;
    int32_t set;  // index into sets_, -1 for epsilon
  };

  NfaBuilder(const Grammar& g, const std::vector<uint8_t>& productive, size_t max_states)
      : g_(g), productive_(productive), max_states_(max_states) {}

  int32_t NewState() {
    out_.emplace_back();
    return static_cast<int32_t>(out_.size()) - 1;
  }
  bool over() const { return out_.size() > max_states_; }
  const std::vector<std::vector<Edge>>& out() const { return out_; }
  const std::vector<ByteSet>& sets() const { return sets_; }

  // Adds the rule's language between `from` and a new state returned in *end.
  bool Rule(int32_t r, int32_t from, int32_t* end, int depth) {
    if (over() || depth > 512) return false;
    const int32_t mid = NewState();
    for (const Sequence& alt : g_.alternatives(r)) {
      if (!Usable(alt, productive_) || IsLeftSelf(alt, r)) continue;
      int32_t e = 0;
      if (!Seq(alt, 0, from, &e, depth)) return false;
      out_[e].push_back({mid, -1});
    }
    // r -> r alpha: alpha may repeat after any base alternative.
    for (const Sequence& alt : g_.alternatives(r)) {
      if (!Usable(alt, productive_) || !IsLeftSelf(alt, r)) continue;
      int32_t e = 0;
      if (!Seq(alt, 1, mid, &e, depth)) return false;
      out_[e].push_back({mid, -1});
    }
    *end = mid;
    return true;
  }

 private:
  bool Seq(const Sequence& seq, size_t begin, int32_t from, int32_t* end, int depth) {
    int32_t cur = from;
    for (size_t i = begin; i < seq.size(); ++i) {
      if (over()) return false;
      if (!seq[i].is_terminal()) {
        if (!Rule(seq[i].rule, cur, &cur, depth + 1)) return false;
        continue;
      }
      const int32_t next = NewState();
      out_[cur].push_back({next, SetIndex(seq[i].bytes)});
      cur = next;
    }
    *end = cur;
    return true;
  }

  int32_t SetIndex(const ByteSet& s) {
    const std::array<uint64_t, 4> key = {s.w[0], s.w[1], s.w[2], s.w[3]};
    auto [it, inserted] = index_.emplace(key, static_cast<int32_t>(sets_.size()));
    if (inserted) sets_.push_back(s);
    return it->second;
  }

  const Grammar& g_;
  const std::vector<uint8_t>& productive_;
  size_t max_states_;
  std::vector<std::vector<Edge>> out_;
  std::vector<ByteSet> sets_;
  std::map<std::array<uint64_t, 4>, int32_t> index_;
};

// Bytes that no terminal set tells apart share a class.
int32_t ByteClasses(const std::vector<ByteSet>& sets, std::array<uint8_t, 256>* cls) {
  cls->fill(0);
  int32_t n = 1;
  for (const ByteSet& s : sets) {
    std::array<int16_t, 512> renumber;
    renumber.fill(-1);
    int32_t m = 0;
    for (int b = 0; b < 256; ++b) {
      const int key = (*cls)[b] * 2 + (s.Has(static_cast<uint8_t>(b)) ? 1 : 0);
      if (renumber[key] < 0) renumber[key] = static_cast<int16_t>(m++);
      (*cls)[b] = static_cast<uint8_t>(renumber[key]);
    }
    n = m;
  }
  return n;
}

}  // namespace

std::vector<size_t> RegularRuleSizes(const Grammar& g, const std::vector<uint8_t>& productive) {
  const int32_t n = g.num_rules();
  // Kahn's algorithm on the reference graph without left self-edges: a rule is regular once all
  // the rules it references are; rules on or above a cycle never get there.
  std::vector<std::vector<int32_t>> users(n);
  std::vector<int32_t> pending(n, 0);
  for (int32_t r = 0; r < n; ++r) {
    if (!productive[r]) continue;
    std::vector<int32_t> refs;
    for (const Sequence& alt : g.alternatives(r)) {
      if (!Usable(alt, productive)) continue;
      for (size_t i = IsLeftSelf(alt, r) ? 1 : 0; i < alt.size(); ++i) {
        if (!alt[i].is_terminal()) refs.push_back(alt[i].rule);
      }
    }
    std::sort(refs.begin(), refs.end());
    refs.erase(std::unique(refs.begin(), refs.end()), refs.end());
    pending[r] = static_cast<int32_t>(refs.size());
    for (int32_t s : refs) users[s].push_back(r);
  }
  // Sizes follow the NFA construction: one state per rule use plus one per terminal.
  constexpr size_t kSaturated = size_t{1} << 40;
  std::vector<size_t> size(n, 0);
  std::vector<int32_t> ready;
  for (int32_t r = 0; r < n; ++r) {
    if (productive[r] && pending[r] == 0) ready.push_back(r);
  }
  while (!ready.empty()) {
    const int32_t r = ready.back();
    ready.pop_back();
    size_t total = 1;
    for (const Sequence& alt : g.alternatives(r)) {
      if (!Usable(alt, productive)) continue;
      for (size_t i = IsLeftSelf(alt, r) ? 1 : 0; i < alt.size(); ++i) {
        total += alt[i].is_terminal() ? 1 : size[alt[i].rule];
      }
    }
    size[r] = std::min(total, kSaturated);
    for (int32_t u : users[r]) {
      if (--pending[u] == 0) ready.push_back(u);
    }
  }
  return size;
}

std::optional<ByteDfa> BuildRuleDfa(const Grammar& g, int32_t rule,
                                    const std::vector<uint8_t>& productive, const DfaLimits& limits,
                                    size_t* nfa_work) {
  NfaBuilder nfa(g, productive, limits.max_nfa_states);
  const int32_t start = nfa.NewState();
  int32_t final_state = 0;
  const bool built = nfa.Rule(rule, start, &final_state, 0);
  *nfa_work += nfa.out().size();
  if (!built) return std::nullopt;

  ByteDfa dfa;
  dfa.num_classes = ByteClasses(nfa.sets(), &dfa.byte_class);
  std::vector<uint8_t> representative(dfa.num_classes);
  for (int b = 255; b >= 0; --b) representative[dfa.byte_class[b]] = static_cast<uint8_t>(b);

  const auto& out = nfa.out();
  std::vector<uint32_t> mark(out.size(), 0);
  uint32_t stamp = 0;
  auto closure = [&](std::vector<int32_t>* states) {
    ++stamp;
    for (int32_t s : *states) mark[s] = stamp;
    for (size_t i = 0; i < states->size(); ++i) {
      for (const auto& e : out[(*states)[i]]) {
        if (e.set < 0 && mark[e.to] != stamp) {
          mark[e.to] = stamp;
          states->push_back(e.to);
        }
      }
    }
    std::sort(states->begin(), states->end());
  };

  struct SubsetHash {
    size_t operator()(const std::vector<int32_t>& v) const {
      uint64_t h = 0x9e3779b97f4a7c15ULL ^ v.size();
      for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 0x100000001b3ULL;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  std::unordered_map<std::vector<int32_t>, int32_t, SubsetHash> ids;
  std::vector<std::vector<int32_t>> subsets;
  auto intern = [&](std::vector<int32_t> subset) -> int32_t {
    auto [it, inserted] = ids.emplace(subset, static_cast<int32_t>(subsets.size()));
    if (inserted) subsets.push_back(std::move(subset));
    return it->second;
  };
  // Per terminal set, the classes it contains; per class, its bytes.
  std::vector<std::vector<int32_t>> set_classes(nfa.sets().size());
  for (size_t k = 0; k < nfa.sets().size(); ++k) {
    for (int32_t c = 0; c < dfa.num_classes; ++c) {
      if (nfa.sets()[k].Has(representative[c])) set_classes[k].push_back(c);
    }
  }
  std::vector<ByteSet> class_bytes(dfa.num_classes);
  for (int b = 0; b < 256; ++b) class_bytes[dfa.byte_class[b]].Add(static_cast<uint8_t>(b));
  std::vector<int32_t> init = {start};
  closure(&init);
  dfa.start = intern(std::move(init));
  // One pass over a subset's edges fills the targets of every class at once.
  std::vector<std::vector<int32_t>> moved(dfa.num_classes);
  for (size_t d = 0; d < subsets.size(); ++d) {
    if (static_cast<int32_t>(subsets.size()) > limits.max_dfa_states) return std::nullopt;
    dfa.accepting.push_back(std::binary_search(subsets[d].begin(), subsets[d].end(), final_state));
    for (auto& m : moved) m.clear();
    for (int32_t s : subsets[d]) {
      for (const auto& e : out[s]) {
        if (e.set < 0) continue;
        for (int32_t c : set_classes[e.set]) moved[c].push_back(e.to);
      }
    }
    ByteSet live;
    for (int32_t c = 0; c < dfa.num_classes; ++c) {
      if (moved[c].empty()) {
        dfa.next.push_back(-1);
        continue;
      }
      std::sort(moved[c].begin(), moved[c].end());
      moved[c].erase(std::unique(moved[c].begin(), moved[c].end()), moved[c].end());
      closure(&moved[c]);
      dfa.next.push_back(intern(moved[c]));
      live.Union(class_bytes[c]);
    }
    dfa.live_bytes.push_back(live);
  }
  return dfa;
}

}  // namespace deepinfer::grammar
