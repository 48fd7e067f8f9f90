// See feed_checks.h.
#include "generate/feed_checks.h"

#include <vector>

#include "core/error.h"

namespace surogate::generate {

void check_slot(int64_t slot, int64_t slots) {
  if (slot < 0 || slot >= slots) fail_user("slot {} is outside [0, {})", slot, slots);
}

void check_feeds(std::span<const SlotFeed> feeds, const NextTokenModel& model) {
  std::vector<bool> seen(static_cast<size_t>(model.slots()), false);
  for (const SlotFeed& fed : feeds) {
    check_slot(fed.slot, model.slots());
    if (seen[static_cast<size_t>(fed.slot)]) fail_user("slot {} is fed twice in one call", fed.slot);
    seen[static_cast<size_t>(fed.slot)] = true;
    if (fed.tokens.empty()) fail_user("slot {} is fed no tokens", fed.slot);
    const int64_t held = model.held(fed.slot) + static_cast<int64_t>(fed.tokens.size());
    if (held > model.max_context()) {
      fail_user("slot {} would hold {} tokens, more than the context of {}", fed.slot, held, model.max_context());
    }
    for (int32_t id : fed.tokens) {
      if (id < 0 || id >= model.vocab_size()) {
        fail_user("token id {} is outside the vocabulary [0, {})", id, model.vocab_size());
      }
    }
  }
}

}  // namespace surogate::generate
