// Builds the matcher's TokenVocabulary from the engine's Tokenizer. Kept apart so the grammar
// core depends on nothing of the engine.
#pragma once

#include <cstdint>

#include "engine/tokenizer/tokenizer.h"
#include "grammar/vocabulary.h"

namespace deepinfer::grammar {

/// Every id's raw bytes; special added tokens are never allowed except the end-of-sentence token,
/// which is the EOS id. `logits_size` > vocab_size() pads with ids that are never allowed.
TokenVocabulary VocabularyFromTokenizer(const Tokenizer& tok, int32_t logits_size = 0);

}  // namespace deepinfer::grammar
