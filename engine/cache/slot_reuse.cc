#include "engine/cache/slot_reuse.h"

#include <algorithm>
#include <utility>

namespace deepinfer {

SlotReuse::SlotReuse(Model& model, Options options)
    : model_(model),
      sharing_(options.park && options.share && model.copies_sequences()),
      slots_(options.park ? static_cast<size_t>(model.slots_total()) : 0),
      sightings_(sharing_ ? options.sightings : 0) {}

void SlotReuse::FreeASlot(const Wanted& wanted) {
  while (model_.slots_free() == 0 && slots_.DropOldest(wanted)) {
  }
}

int64_t SlotReuse::Start(std::span<const int32_t> context, const Wanted& wanted, SequenceState* seq,
                         int64_t* share_at) {
  *share_at = 0;
  int64_t resumed = 0;
  const ParkedSlots::Match match = slots_.Find(context);
  SequenceState state;
  if (match.length > 0 && match.shared && sharing_) {
    // The copy needs a slot: others give way first, the matched donor last of all.
    const auto keep = [&](std::span<const int32_t> key) {
      return (static_cast<int64_t>(key.size()) == match.length &&
              std::equal(key.begin(), key.end(), context.begin())) ||
             (wanted && wanted(key));
    };
    if (seq->slot.slot() >= 0) *seq = SequenceState();  // its own slot is the copy's to take
    FreeASlot(keep);
    resumed = slots_.Take(context, &state,
                          [&](const SequenceState& donor) { return model_.CopySequence(donor); });
  } else if (match.length > 0) {
    resumed = slots_.Take(context, &state);
  } else {
    slots_.Take(context, &state);  // counts the lookup
  }
  if (resumed > 0) {
    *seq = std::move(state);
  } else if (seq->slot.slot() < 0) {
    FreeASlot(wanted);
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
                        int64_t share_at) {
  if (!sharing_ || share_at <= 0 || seq.length != share_at || model_.slots_free() == 0) return;
  const std::span<const int32_t> key = context.first(static_cast<size_t>(share_at));
  if (slots_.Shares(key)) return;  // another request left it first
  Result<SequenceState> copy = model_.CopySequence(seq);
  if (copy.ok()) slots_.Share({key.begin(), key.end()}, std::move(copy).value());
}

void SlotReuse::Park(std::vector<int32_t> tokens, SequenceState state) {
  slots_.Park(std::move(tokens), std::move(state));
}

}  // namespace deepinfer
