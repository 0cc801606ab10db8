// Where a request on the slot path starts, and which states stay for later ones: the engine's use
// of ParkedSlots (an ended request's slot, for its conversation's next turn) and of donors (a copy
// of a slot left at a block boundary that prompts share, for every later request that shares it;
// PrefixSightings decides where). Both are exact: a request continues from the complete state
// after exactly the tokens it shares (docs/architecture.md, "The slot path").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/cache/parked_slots.h"
#include "engine/cache/prefix_sightings.h"
#include "engine/model/model.h"

namespace deepinfer {

/// The slot path's prefix reuse (the file comment). Not thread-safe: the engine thread owns it.
class SlotReuse {
 public:
  struct Options {
    bool park = true;            // ended requests' slots stay parked (ParkedSlots)
    bool share = true;           // donors for shared prefixes, where the stepper copies slots
    size_t sightings = 1 << 16;  // block-aligned prefixes remembered (PrefixSightings)
  };
  /// Whether a parked key is wanted by a request about to start (it then gives way last).
  using Wanted = std::function<bool(std::span<const int32_t>)>;

  SlotReuse(Model& model, Options options);

  /// Donors are made: sharing asked for, parking on and the stepper copies slots.
  bool sharing() const { return sharing_; }

  /// Starts a request whose context is `context`: the longest parked state it extends moves into
  /// *seq, or a copy of the longest donor (a slot freed for it first; when only the donor could
  /// give one, the donor itself); else, when *seq holds no slot, a fresh one (parked states
  /// giving way, those `wanted` last). Returns the tokens
  /// resumed (0: none). *share_at: the block boundary the request should stop a chunk at and
  /// leave a donor, its prompt sharing that prefix with an earlier one (0: none).
  int64_t Start(std::span<const int32_t> context, const Wanted& wanted, SequenceState* seq,
                int64_t* share_at);
  /// After a step that fed `seq` (the request with `context`): at its share_at, a copy of its
  /// state stays as the donor of context[0, share_at), in a free slot or one a parked state gives
  /// up (those `wanted` last; never a donor's). No such slot: no donor.
  void Stepped(std::span<const int32_t> context, const SequenceState& seq, int64_t share_at,
               const Wanted& wanted);
  /// Whether a request with `context` about to start should wait for the donor that a started
  /// request (`maker_context`, `maker_length` tokens fed, planning a donor at `maker_share_at`)
  /// is about to leave: the donor would be longer than what the request could start from now,
  /// is not there yet, and can be made.
  bool DonorAhead(std::span<const int32_t> context, std::span<const int32_t> maker_context,
                  int64_t maker_length, int64_t maker_share_at) const;
  /// An ended request's state, after exactly `tokens` (ParkedSlots::Park).
  void Park(std::vector<int32_t> tokens, SequenceState state);

  size_t parked() const { return slots_.size() - slots_.shared(); }
  size_t donors() const { return slots_.shared(); }
  uint64_t hit_tokens() const { return slots_.hit_tokens(); }
  uint64_t lookup_tokens() const { return slots_.lookup_tokens(); }
  bool parking() const { return slots_.capacity() > 0; }

 private:
  // Drops entries, oldest first (wanted last, protected never), until a slot is free.
  void FreeASlot(const Wanted& wanted, const ParkedSlots::Protect& protect);

  Model& model_;
  bool sharing_;
  ParkedSlots slots_;
  PrefixSightings sightings_;
};

}  // namespace deepinfer
