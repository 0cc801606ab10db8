#include "engine/cache/slot_reuse.h"

#include <algorithm>
#include <utility>

namespace deepinfer {

SlotReuse::SlotReuse(Model& model, Options options)
    : model_(model),
      sharing_(options.park && options.share && model.copies_sequences()),
      slots_(options.park ? static_cast<size_t>(model.slots_total()) : 0),
      sightings_(sharing_ ? options.sightings : 0) {}

void SlotReuse::FreeASlot(const Wanted& wanted, const ParkedSlots::Protect& protect) {
  while (model_.slots_free() == 0 && slots_.DropOldest(wanted, protect)) {
  }
}

int64_t SlotReuse::Start(std::span<const int32_t> context, const Wanted& wanted, SequenceState* seq,
                         int64_t* share_at) {
  *share_at = 0;
  int64_t resumed = 0;
  const ParkedSlots::Match match = slots_.Find(context);
  SequenceState state;
  if (match.shared && sharing_) {
    // The copy needs a slot, which any entry but the matched donor may give; when none can, the
    // request takes the donor itself (exact as well; the donor ends).
    const auto matched = [&](std::span<const int32_t> key, bool) {
      return static_cast<int64_t>(key.size()) == match.length &&
             std::equal(key.begin(), key.end(), context.begin());
    };
    if (seq->slot.slot() >= 0) *seq = SequenceState();  // its own slot is the copy's to take
    FreeASlot(wanted, matched);
    if (model_.slots_free() == 0) {
      resumed = slots_.TakeDonor(context, &state);
    } else {
      resumed = slots_.Take(context, &state,
                            [&](const SequenceState& donor) { return model_.CopySequence(donor); });
    }
  } else {
    resumed = slots_.Take(context, &state);  // a parked state, or none (the lookup counts)
  }
  if (resumed > 0) {
    *seq = std::move(state);
  } else if (seq->slot.slot() < 0) {
    FreeASlot(wanted, nullptr);
    *seq = model_.NewSequence();
  }
  if (sharing_) {
    const int64_t seen = sightings_.DeepestSeen(context);
    if (seen > resumed && !slots_.Shares(context.first(static_cast<size_t>(seen)))) {
      *share_at = seen;
    }
    sightings_.Record(context);
  }
  return resumed;
}

void SlotReuse::Stepped(std::span<const int32_t> context, const SequenceState& seq,
                        int64_t share_at, const Wanted& wanted) {
  if (!sharing_ || share_at <= 0 || seq.length != share_at) return;
  const std::span<const int32_t> key = context.first(static_cast<size_t>(share_at));
  if (slots_.Shares(key)) return;  // another request left it first
  FreeASlot(wanted, [](std::span<const int32_t>, bool donor) { return donor; });
  if (model_.slots_free() == 0) return;
  Result<SequenceState> copy = model_.CopySequence(seq);
  if (copy.ok()) slots_.Share({key.begin(), key.end()}, std::move(copy).value());
}

bool SlotReuse::DonorAhead(std::span<const int32_t> context, std::span<const int32_t> maker_context,
                           int64_t maker_length, int64_t maker_share_at) const {
  const int64_t at = maker_share_at;
  if (!sharing_ || at <= 0 || maker_length >= at || static_cast<int64_t>(context.size()) <= at ||
      !std::equal(maker_context.begin(), maker_context.begin() + at, context.begin())) {
    return false;
  }
  return !slots_.Shares(context.first(static_cast<size_t>(at))) &&
         slots_.Find(context).length < at && (model_.slots_free() > 0 || parked() > 0);
}

void SlotReuse::Park(std::vector<int32_t> tokens, SequenceState state) {
  slots_.Park(std::move(tokens), std::move(state));
}

}  // namespace deepinfer
