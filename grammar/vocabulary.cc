#include "grammar/vocabulary.h"

#include <algorithm>

namespace deepinfer::grammar {

namespace {
// The trie while it is built: children by byte, then flattened.
struct BuildNode {
  std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
  std::vector<int32_t> tokens;
};
}  // namespace

TokenVocabulary::TokenVocabulary(std::vector<std::string> tokens, std::vector<uint8_t> special,
                                 std::vector<int32_t> eos_ids)
    : tokens_(std::move(tokens)), special_(std::move(special)), eos_ids_(std::move(eos_ids)) {
  special_.resize(tokens_.size(), 0);
  std::erase_if(eos_ids_, [&](int32_t id) { return id < 0 || id >= size(); });
  for (int32_t id : eos_ids_) special_[id] = 1;
  std::vector<BuildNode> build(1);
  for (int32_t id = 0; id < size(); ++id) {
    if (special_[id]) continue;
    int32_t node = 0;
    for (char c : tokens_[id]) {
      const uint8_t b = static_cast<uint8_t>(c);
      auto& kids = build[node].children;
      auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t{-1}));
      if (it != kids.end() && it->first == b) {
        node = it->second;
        continue;
      }
      const int32_t child = static_cast<int32_t>(build.size());
      kids.insert(it, {b, child});
      build.emplace_back();  // invalidates `kids`; not used again
      node = child;
    }
    build[node].tokens.push_back(id);
  }
  // Preorder with an explicit stack; `open` holds the flat nodes on the path from the root, whose
  // subtrees end when a node at their depth or above comes next.
  trie_.reserve(build.size() + 1);
  trie_tokens_.reserve(tokens_.size());
  struct Frame {
    int32_t node;
    uint32_t depth;
    uint8_t byte;
  };
  std::vector<Frame> stack = {{0, 0, 0}};
  std::vector<uint32_t> open;
  while (!stack.empty()) {
    const Frame f = stack.back();
    stack.pop_back();
    while (open.size() > f.depth) {  // the subtrees deeper than this node are complete
      trie_[open.back()].next = static_cast<uint32_t>(trie_.size());
      open.pop_back();
    }
    const uint32_t flat = static_cast<uint32_t>(trie_.size());
    trie_.push_back({0, static_cast<uint32_t>(trie_tokens_.size()), f.byte});
    open.push_back(flat);
    const BuildNode& n = build[f.node];
    trie_tokens_.insert(trie_tokens_.end(), n.tokens.begin(), n.tokens.end());
    for (auto it = n.children.rbegin(); it != n.children.rend(); ++it) {
      stack.push_back({it->second, f.depth + 1, it->first});
    }
  }
  while (!open.empty()) {
    trie_[open.back()].next = static_cast<uint32_t>(trie_.size());
    open.pop_back();
  }
  trie_.push_back({static_cast<uint32_t>(trie_.size() + 1),
                   static_cast<uint32_t>(trie_tokens_.size()), 0});  // sentinel
}

bool TokenVocabulary::is_eos(int32_t id) const {
  return std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end();
}

}  // namespace deepinfer::grammar
