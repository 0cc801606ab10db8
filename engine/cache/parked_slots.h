// Parked slots: the slot path's prefix reuse. On the slot path (Model::UseSlots) a sequence's
// caches live in a stepper's slot, on the device, so the prefix cache's host snapshots do not
// apply; what the engine keeps instead is the slot itself. An ended request's SequenceState, with
// its SlotLease, stays parked under the tokens it holds until a new sequence needs the slot. A
// request whose context extends those tokens continues on the parked slot and prefills only the
// rest: exactly the forward from scratch, since the slot holds the complete state after exactly
// those tokens and the forward does not depend on how a sequence is split into steps. Only whole
// keys match: a slot's window ring and compressor partial windows cannot go back to an earlier
// position, so a context that leaves the parked tokens before their end cannot use them. That
// serves a conversation's next turn (its prompt repeats the previous prompt and answer).
//
// Unrelated requests sharing a system prompt are served by donors: a copy of a running
// sequence's slot taken as it passes a block boundary its prompt shares with an earlier one
// (engine/cache/prefix_sightings.h), kept under the tokens before that boundary. A donor is never
// stepped; Take hands out copies of it into new slots and keeps it (docs/architecture.md, "The
// slot path").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/common/status.h"
#include "engine/model/sequence_state.h"

namespace deepinfer {

/// Ended sequences' slots, kept under their tokens (the file comment). Not thread-safe: the
/// engine thread owns it.
class ParkedSlots {
 public:
  /// At most `capacity` states stay parked (0: none; the engine passes its stepper's slots).
  explicit ParkedSlots(size_t capacity) : capacity_(capacity) {}

  /// Parks `state`, the state after exactly `tokens`. A state holding no slot, or no tokens,
  /// is dropped. At capacity the state parked longest ago is dropped first (its slot goes back).
  void Park(std::vector<int32_t> tokens, SequenceState state);
  /// Keeps `state`, a sequence after exactly `tokens` in a slot of its own, as a donor (the file
  /// comment). Counts against the capacity as a parked state does; a donor already under the
  /// same tokens keeps its place and `state` is dropped.
  void Share(std::vector<int32_t> tokens, SequenceState state);
  /// Whether a donor holds exactly `tokens`.
  bool Shares(std::span<const int32_t> tokens) const;

  /// The longest key, parked or donor, that is a strict prefix of `context` (one token must stay
  /// to produce logits): its length (0: none) and whether it is a donor's.
  struct Match {
    int64_t length = 0;
    bool shared = false;
  };
  Match Find(std::span<const int32_t> context) const;

  /// Makes a second sequence that continues as the donor's would (Model::CopySequence).
  using Copier = std::function<Result<SequenceState>(const SequenceState&)>;
  /// Find's match into *state: a parked state moves out; a donor stays (now the most recently
  /// used) and *state is copy(donor). Returns the match's length; 0 when there is none or the
  /// copy failed (*copy_error then says why; only the lookup is counted). Without `copy` donors
  /// are not considered.
  int64_t Take(std::span<const int32_t> context, SequenceState* state, const Copier& copy = nullptr,
               Status* copy_error = nullptr);
  /// Moves the donor of Find's match (when it is a donor's) into *state, ending the donor: for a
  /// request that cannot have a copy because every slot is held. Returns its length; 0: none.
  int64_t TakeDonor(std::span<const int32_t> context, SequenceState* state);

  /// Whether an entry (its tokens, whether it is a donor) must not be dropped.
  using Protect = std::function<bool(std::span<const int32_t>, bool)>;
  /// Drops the state parked longest ago, giving its slot back: false when none is parked. With
  /// `wanted`, states whose tokens it flags (another request is about to continue them) go last;
  /// entries `protect` flags are never dropped.
  bool DropOldest(const std::function<bool(std::span<const int32_t>)>& wanted = nullptr,
                  const Protect& protect = nullptr);

  size_t size() const { return entries_.size(); }  // parked states and donors
  size_t shared() const;                           // donors
  size_t capacity() const { return capacity_; }
  uint64_t hit_tokens() const { return hit_tokens_; }        // tokens Take resumed from
  uint64_t lookup_tokens() const { return lookup_tokens_; }  // context tokens Take was asked for

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    SequenceState state;
    bool shared = false;  // a donor
  };
  // The index of Find's match among entries_ (entries_.size(): none).
  size_t Best(std::span<const int32_t> context, bool with_donors) const;
  // Moves entry `index` out into *state, ending it, and counts its tokens as resumed.
  int64_t MoveOut(size_t index, SequenceState* state);
  size_t capacity_;
  std::vector<Entry> entries_;  // parked longest ago first; a handful (one per slot at most)
  uint64_t hit_tokens_ = 0, lookup_tokens_ = 0;
};

}  // namespace deepinfer
