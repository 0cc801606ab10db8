#include "engine/model/model.h"

#include <algorithm>
#include <cstring>

namespace deepinfer {

Result<Numerics> ParseNumerics(const std::string& s) {
  if (s == "exact") return Numerics::kExact;
  if (s == "reference") return Numerics::kReference;
  return InvalidArgument("unknown numerics mode '" + s + "' (expected exact or reference)");
}

Model::Model(const Checkpoint& checkpoint, Backend& backend, Numerics numerics)
    : cfg_(checkpoint.config), w_(checkpoint.weights), be_(backend), numerics_(numerics) {
  for (int l = 0; l < cfg_.num_layers; ++l) {
    layer_rope_.push_back(MakeLayerRope(cfg_, cfg_.attn_types[l]));
  }
  main_rope_ = MakeLayerRope(cfg_, AttnType::kSliding);
}

void Model::LayerCacheInit(const LayerWeights& L, LayerCache& cache) const {
  cache.window = cfg_.sliding_window;
  cache.head_dim = cfg_.head_dim;
  cache.ring.assign(static_cast<size_t>(cache.window) * cfg_.head_dim, 0.0f);
  if (L.attn.has_compressor) {
    cache.comp.Init(L.attn.compressor);
    cache.rows = PagedRows(pool_, cfg_.head_dim);
  }
  if (L.attn.has_indexer) {
    cache.index_comp.Init(L.attn.index_compressor);
    cache.index_keys = PagedRows(pool_, cfg_.index_head_dim);
  }
}

void Model::UseSlots(SlotStepper* stepper) {
  stepper_ = stepper;
  slot_pool_ = std::make_shared<SlotPool>(stepper->slots());
  step_slots_.reserve(stepper->max_rows());
  step_tokens_.reserve(stepper->max_rows());
  step_logit_rows_.reserve(stepper->max_rows());
  slot_seen_.assign(stepper->slots(), 0);
  step_logits_.assign(static_cast<size_t>(stepper->max_rows()) * cfg_.vocab_size, 0.0f);
  step_sample_rows_.reserve(stepper->max_rows());
  step_params_.reserve(stepper->max_rows());
  step_masks_.reserve(static_cast<size_t>(stepper->max_rows()) * ((cfg_.vocab_size + 31) / 32));
  step_next_.assign(stepper->max_rows(), 0);
  step_logprobs_.assign(stepper->max_rows(), 0.0f);
}

SequenceState Model::NewSequence() const {
  SequenceState s;
  if (stepper_ != nullptr) {
    s.slot = SlotLease(slot_pool_, slot_pool_->Take());
    return s;
  }
  s.layers.resize(cfg_.num_layers);
  for (int l = 0; l < cfg_.num_layers; ++l) LayerCacheInit(w_.layers[l], s.layers[l]);
  if (w_.has_mtp) LayerCacheInit(w_.mtp.layer, s.mtp);
  return s;
}

Result<SequenceState> Model::CopySequence(const SequenceState& from) const {
  if (!copies_sequences()) return Unimplemented("sequences are copied on the slot path only");
  if (from.slot.slot() < 0) return InvalidArgument("the sequence to copy holds no slot");
  SequenceState s;
  s.slot = SlotLease(slot_pool_, slot_pool_->Take());
  if (s.slot.slot() < 0) return InvalidArgument("no free slot to copy a sequence into");
  DI_RETURN_IF_ERROR(stepper_->CopySlot(from.slot.slot(), s.slot.slot()));
  s.length = from.length;
  return s;
}

Status Model::Forward(SequenceState& seq, std::span<const int32_t> tokens, float* logits,
                      float* streams) {
  BatchItem item{&seq, tokens, logits, streams};
  return ForwardBatch(std::span<BatchItem>(&item, 1));
}

Status Model::ForwardBatch(std::span<BatchItem> items) {
  if (stepper_ != nullptr) return ForwardOnSlots(items);
  for (const BatchItem& it : items) {
    if (it.sample != nullptr) return InvalidArgument("draws on the stepper need the slot path");
  }
  int64_t T = 0;
  for (const BatchItem& it : items) {
    if (it.seq == nullptr || static_cast<int>(it.seq->layers.size()) != cfg_.num_layers) {
      return InvalidArgument("sequence state was not made by this model");
    }
    for (size_t t = 0; t < it.tokens.size(); ++t) {
      if (it.tokens[t] < 0 || it.tokens[t] >= cfg_.vocab_size) {
        return InvalidArgument("token id " + std::to_string(it.tokens[t]) + " at index " +
                               std::to_string(t) + " is outside the vocabulary [0, " +
                               std::to_string(cfg_.vocab_size) + ")");
      }
    }
    for (const BatchItem& other : items) {
      if (&other != &it && other.seq == it.seq)
        return InvalidArgument("a sequence appears twice in a batch");
    }
    T += static_cast<int64_t>(it.tokens.size());
  }
  if (T == 0) return Status::Ok();
  const int n = cfg_.hc_mult;
  const int64_t d = cfg_.hidden_size, S = n * d, V = cfg_.vocab_size;
  std::vector<int32_t> tokens;
  std::vector<int64_t> pos;
  std::vector<int64_t> begin;
  for (const BatchItem& it : items) {
    begin.push_back(static_cast<int64_t>(tokens.size()));
    for (size_t t = 0; t < it.tokens.size(); ++t) {
      tokens.push_back(it.tokens[t]);
      pos.push_back(it.seq->length + static_cast<int64_t>(t));
    }
  }
  std::vector<float> e(T * d), X(T * S);
  be_.Embed(w_.embed, tokens.data(), T, e.data());
  for (int64_t t = 0; t < T; ++t) {
    for (int k = 0; k < n; ++k) std::memcpy(&X[(t * n + k) * d], &e[t * d], d * sizeof(float));
  }
  std::vector<Segment> segs(items.size());
  for (int l = 0; l < cfg_.num_layers; ++l) {
    for (size_t i = 0; i < items.size(); ++i) {
      segs[i] = {&items[i].seq->layers[l], begin[i], static_cast<int64_t>(items[i].tokens.size())};
    }
    DecoderLayer(w_.layers[l], segs, layer_rope_[l], X.data(), tokens.data(), pos.data(), T);
  }
  // The head runs only on rows whose logits someone wants.
  std::vector<int64_t> rows;
  for (size_t i = 0; i < items.size(); ++i) {
    const int64_t c = static_cast<int64_t>(items[i].tokens.size());
    if (items[i].logits == nullptr || c == 0) continue;
    for (int64_t r = items[i].last_logits_only ? c - 1 : 0; r < c; ++r)
      rows.push_back(begin[i] + r);
  }
  std::vector<float> head_in(rows.size() * S), logits(rows.size() * V);
  for (size_t k = 0; k < rows.size(); ++k) {
    std::memcpy(&head_in[k * S], &X[rows[k] * S], S * sizeof(float));
  }
  if (!rows.empty())
    Head(w_.hc_head, w_.norm, head_in.data(), static_cast<int64_t>(rows.size()), logits.data());
  // A device fault fails the whole step; the sequences' caches are then undefined, so their
  // requests end (the engine fails the batch).
  DI_RETURN_IF_ERROR(be_.TakeError());
  size_t next_row = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const int64_t c = static_cast<int64_t>(items[i].tokens.size());
    if (items[i].logits != nullptr && c > 0) {
      const int64_t n_rows = items[i].last_logits_only ? 1 : c;
      std::memcpy(items[i].logits, &logits[next_row * V], n_rows * V * sizeof(float));
      next_row += n_rows;
    }
    if (items[i].streams) std::memcpy(items[i].streams, &X[begin[i] * S], c * S * sizeof(float));
    items[i].seq->length += c;
  }
  return Status::Ok();
}

// One Step of every item's rows, each item's rows consecutive. Items are checked first; a slot is
// emptied only for a sequence still at length 0, so a step refused afterwards (by the stepper's
// own checks) leaves every sequence as it was.
Status Model::ForwardOnSlots(std::span<BatchItem> items) {
  int64_t rows = 0;
  for (const BatchItem& it : items) {
    if (it.seq == nullptr || !it.seq->slot.leased()) {
      return InvalidArgument(it.seq && it.seq->slot.copied()
                                 ? "a copied sequence state holds no slot (no snapshots on the "
                                   "slot path)"
                                 : "sequence state was not made by this model");
    }
    if (it.seq->slot.slot() < 0) {
      return InvalidArgument("every slot is leased: the engine runs more sequences than slots");
    }
    if (it.streams != nullptr) return InvalidArgument("the slot path returns no streams (MTP)");
    rows += static_cast<int64_t>(it.tokens.size());
  }
  bool draws = false;
  for (const BatchItem& it : items) {
    if (it.sample != nullptr && it.tokens.empty()) {
      return InvalidArgument("a draw needs a row: the item has no tokens");
    }
    if (it.tokens.empty()) continue;
    draws = draws || it.sample != nullptr;
    if (it.sample != nullptr && (it.next == nullptr || it.logits != nullptr)) {
      return InvalidArgument("a drawn item takes a token out and no logits");
    }
  }
  if (draws && !stepper_->SamplesRows()) return InvalidArgument("this slot stepper cannot sample");
  // A sequence twice means its slot twice (each sequence leases its own).
  Status twice = Status::Ok();
  for (const BatchItem& it : items) {
    uint8_t& seen = slot_seen_[it.seq->slot.slot()];
    if (seen) twice = InvalidArgument("a sequence appears twice in a batch");
    seen = 1;
  }
  for (const BatchItem& it : items) slot_seen_[it.seq->slot.slot()] = 0;
  DI_RETURN_IF_ERROR(twice);
  if (rows > stepper_->max_rows()) {
    return InvalidArgument("a step of " + std::to_string(rows) + " rows; the slots take " +
                           std::to_string(stepper_->max_rows()));
  }
  step_slots_.clear();
  step_tokens_.clear();
  step_logit_rows_.clear();  // the head and the copy only for the rows someone wants
  step_sample_rows_.clear();
  for (const BatchItem& it : items) {
    const int32_t first = static_cast<int32_t>(step_slots_.size());
    const int32_t c = static_cast<int32_t>(it.tokens.size());
    step_slots_.insert(step_slots_.end(), it.tokens.size(), it.seq->slot.slot());
    step_tokens_.insert(step_tokens_.end(), it.tokens.begin(), it.tokens.end());
    if (it.logits != nullptr && c > 0) {
      for (int32_t r = it.last_logits_only ? c - 1 : 0; r < c; ++r) {
        step_logit_rows_.push_back(first + r);
      }
    }
    if (it.sample != nullptr && c > 0) step_sample_rows_.push_back(first + c - 1);
  }
  // A fresh sequence empties its slot: a reused slot still holds its last sequence, and even a
  // slot whose length reads 0 may hold caches a failed step moved. (The stepper checks the rows —
  // ids, chunk sizes, room — before it touches anything else.)
  for (const BatchItem& it : items) {
    const int slot = it.seq->slot.slot();
    if (it.seq->length == 0) {
      DI_RETURN_IF_ERROR(stepper_->ResetSlot(slot));
    } else if (stepper_->length(slot) != it.seq->length) {
      return Internal("a sequence and its slot disagree on its length");
    }
  }
  if (draws) {
    DI_RETURN_IF_ERROR(DrawOnSlots(items));
  } else if (!step_slots_.empty()) {
    // No item wants logits: ask for one row, since an empty list would mean every row.
    if (step_logit_rows_.empty()) {
      step_logit_rows_.push_back(static_cast<int32_t>(step_slots_.size()) - 1);
    }
    DI_RETURN_IF_ERROR(
        stepper_->Step(step_slots_, step_tokens_, step_logit_rows_, step_logits_.data()));
  }
  const int64_t V = cfg_.vocab_size;
  int64_t wanted = 0;  // the item's logits follow in step_logits_, in item order
  for (BatchItem& it : items) {
    const int64_t c = static_cast<int64_t>(it.tokens.size());
    if (it.logits != nullptr && c > 0) {
      const int64_t n = it.last_logits_only ? 1 : c;
      std::memcpy(it.logits, &step_logits_[wanted * V], n * V * sizeof(float));
      wanted += n;
    }
    it.seq->length += c;
  }
  return Status::Ok();
}

Status Model::DrawOnSlots(std::span<BatchItem> items) {
  const int64_t words = (cfg_.vocab_size + 31) / 32;
  bool masked = false;
  for (const BatchItem& it : items) masked = masked || (it.sample != nullptr && it.mask != nullptr);
  step_params_.clear();
  step_masks_.clear();
  for (const BatchItem& it : items) {
    if (it.sample == nullptr || it.tokens.empty()) continue;
    step_params_.push_back(*it.sample);
    if (!masked) continue;
    if (it.mask != nullptr) {
      step_masks_.insert(step_masks_.end(), it.mask, it.mask + words);
    } else {
      step_masks_.insert(step_masks_.end(), words, ~0u);
    }
  }
  DI_RETURN_IF_ERROR(stepper_->StepMixed(step_slots_, step_tokens_, step_sample_rows_, step_params_,
                                         masked ? step_masks_.data() : nullptr, step_next_.data(),
                                         step_logprobs_.data(), step_logit_rows_,
                                         step_logits_.data()));
  size_t drawn = 0;
  for (BatchItem& it : items) {
    if (it.sample == nullptr || it.tokens.empty()) continue;
    if (it.logprob != nullptr) *it.logprob = step_logprobs_[drawn];  // 0 when not asked
    *it.next = step_next_[drawn++];
  }
  return Status::Ok();
}

Status Model::MtpForward(SequenceState& seq, const float* streams,
                         std::span<const int32_t> next_tokens, float* logits) {
  if (!w_.has_mtp) return InvalidArgument("this checkpoint has no MTP block");
  if (stepper_ != nullptr) return InvalidArgument("MTP does not run on the slot path yet");
  const int64_t T = static_cast<int64_t>(next_tokens.size());
  if (T == 0) return Status::Ok();
  for (int64_t t = 0; t < T; ++t) {
    if (next_tokens[t] < 0 || next_tokens[t] >= cfg_.vocab_size) {
      return InvalidArgument("token id " + std::to_string(next_tokens[t]) + " is out of range");
    }
  }
  const MtpWeights& m = w_.mtp;
  const int n = cfg_.hc_mult;
  const int64_t d = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  std::vector<int64_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = seq.mtp_length + t;
  std::vector<float> e(T * d), en(T * d), ep(T * d), hs(T * d), hn(T * d), hp(T * d);
  std::vector<float> Y(T * n * d);
  be_.Embed(w_.embed, next_tokens.data(), T, e.data());
  be_.RmsNorm(e.data(), m.enorm.data(), T, d, eps, en.data());
  be_.Linear(m.e_proj, en.data(), T, ep.data(), QuantizeActs(m.e_proj));
  for (int k = 0; k < n; ++k) {
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(&hs[t * d], streams + (t * n + k) * d, d * sizeof(float));
    }
    be_.RmsNorm(hs.data(), m.hnorm.data(), T, d, eps, hn.data());
    be_.Linear(m.h_proj, hn.data(), T, hp.data(), QuantizeActs(m.h_proj));
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t c = 0; c < d; ++c) Y[(t * n + k) * d + c] = hp[t * d + c] + ep[t * d + c];
    }
  }
  const Segment seg{&seq.mtp, 0, T};
  DecoderLayer(m.layer, std::span<const Segment>(&seg, 1), main_rope_, Y.data(), next_tokens.data(),
               pos.data(), T);
  Head(m.hc_head, m.norm, Y.data(), T, logits);
  DI_RETURN_IF_ERROR(be_.TakeError());
  seq.mtp_length += T;
  return Status::Ok();
}

void Model::DecoderLayer(const LayerWeights& L, std::span<const Segment> segs,
                         const RopeTable& rope, float* X, const int32_t* tokens, const int64_t* pos,
                         int64_t T) {
  const int n = cfg_.hc_mult;
  const int64_t d = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const float hc_eps = static_cast<float>(cfg_.hc_eps);
  std::vector<float> post(T * n), comb(T * n * n), h(T * d), x(T * d), y(T * d), X2(T * n * d);

  be_.HyperPre(L.hc_attn, X, T, n, d, eps, hc_eps, cfg_.hc_sinkhorn_iters, post.data(), comb.data(),
               h.data());
  be_.RmsNorm(h.data(), L.attn_norm.data(), T, d, eps, x.data());
  Attention(L, segs, rope, x.data(), pos, T, y.data());
  be_.HyperPost(X, y.data(), post.data(), comb.data(), T, n, d, X2.data());

  be_.HyperPre(L.hc_ffn, X2.data(), T, n, d, eps, hc_eps, cfg_.hc_sinkhorn_iters, post.data(),
               comb.data(), h.data());
  be_.RmsNorm(h.data(), L.ffn_norm.data(), T, d, eps, x.data());
  Moe(L, x.data(), tokens, T, y.data());
  be_.HyperPost(X2.data(), y.data(), post.data(), comb.data(), T, n, d, X);
}

void Model::Head(const HyperHeadWeights& hc, const std::vector<float>& norm, const float* X,
                 int64_t T, float* logits) {
  const int64_t d = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  std::vector<float> h(T * d), hn(T * d);
  be_.HyperHead(hc, X, T, cfg_.hc_mult, d, eps, static_cast<float>(cfg_.hc_eps), h.data());
  be_.RmsNorm(h.data(), norm.data(), T, d, eps, hn.data());
  be_.Linear(w_.head, hn.data(), T, logits, QuantizeActs(w_.head));
}

}  // namespace deepinfer
