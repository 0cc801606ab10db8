// The names a checkpoint may give an official DeepSeek-V4 tensor: the official name, transformers'
// module name, and the mixed names transformers' save_pretrained writes.
#pragma once

#include <string>
#include <vector>

namespace deepinfer {

/// transformers' module name of an official tensor name (without the "model." prefix), e.g.
/// layers.3.attn.wq_a.weight -> layers.3.self_attn.q_a_proj.weight.
std::string TransformersTensorName(const std::string& official);

/// The names to look an official tensor up under, in order: the official name, under "model.",
/// save_pretrained's spelling under "model.", transformers' module name, and that under "model."
/// (except the LM head, which transformers keeps unprefixed).
std::vector<std::string> TensorNameCandidates(const std::string& official);

}  // namespace deepinfer
