#include "grammar/vocabulary.h"

#include <algorithm>

namespace deepinfer::grammar {

TokenVocabulary::TokenVocabulary(std::vector<std::string> tokens, std::vector<uint8_t> special,
                                 std::vector<int32_t> eos_ids)
    : tokens_(std::move(tokens)), special_(std::move(special)), eos_ids_(std::move(eos_ids)) {
  special_.resize(tokens_.size(), 0);
  std::erase_if(eos_ids_, [&](int32_t id) { return id < 0 || id >= size(); });
  for (int32_t id : eos_ids_) special_[id] = 1;
  trie_.emplace_back();
  for (int32_t id = 0; id < size(); ++id) {
    if (special_[id]) continue;
    int32_t node = 0;
    for (char c : tokens_[id]) {
      const uint8_t b = static_cast<uint8_t>(c);
      auto& kids = trie_[node].children;
      auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t{-1}));
      if (it != kids.end() && it->first == b) {
        node = it->second;
        continue;
      }
      const int32_t child = static_cast<int32_t>(trie_.size());
      kids.insert(it, {b, child});
      trie_.emplace_back();  // invalidates `kids`; not used again
      node = child;
    }
    trie_[node].tokens.push_back(id);
  }
}

bool TokenVocabulary::is_eos(int32_t id) const {
  return std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end();
}

}  // namespace deepinfer::grammar
