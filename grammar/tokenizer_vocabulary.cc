#include "grammar/tokenizer_vocabulary.h"

#include <algorithm>
#include <string>
#include <vector>

namespace deepinfer::grammar {

TokenVocabulary VocabularyFromTokenizer(const Tokenizer& tok, int32_t logits_size) {
  const int32_t n = std::max(tok.vocab_size(), logits_size);
  std::vector<std::string> tokens(n);
  std::vector<uint8_t> special(n, 1);
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    tokens[id] = std::string(tok.TokenBytes(id));
    special[id] = tok.IsSpecial(id) ? 1 : 0;
  }
  std::vector<int32_t> eos;
  if (auto id = tok.AddedTokenId("<｜end▁of▁sentence｜>")) eos.push_back(*id);
  return TokenVocabulary(std::move(tokens), std::move(special), std::move(eos));
}

}  // namespace deepinfer::grammar
