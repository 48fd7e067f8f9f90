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

void check_prefix_copies(std::span<const PrefixCopy> copies, const NextTokenModel& model) {
  const auto slots = static_cast<size_t>(model.slots());
  std::vector<bool> source(slots, false), destination(slots, false);
  for (const PrefixCopy& copy : copies) {
    SUROGATE_CHECK(copy.from >= 0 && copy.from < model.slots() && copy.to >= 0 && copy.to < model.slots(),
                   "copy_prefixes: slot {} or {} is outside [0, {})", copy.from, copy.to, model.slots());
    SUROGATE_CHECK(copy.tokens >= 0 && copy.tokens <= model.held(copy.from),
                   "copy_prefixes: slot {} holds {} tokens, {} asked for", copy.from, model.held(copy.from), copy.tokens);
    SUROGATE_CHECK(!destination[static_cast<size_t>(copy.to)], "copy_prefixes: slot {} is a destination twice", copy.to);
    source[static_cast<size_t>(copy.from)] = destination[static_cast<size_t>(copy.to)] = true;
  }
  for (size_t slot = 0; slot < slots; ++slot) {
    SUROGATE_CHECK(!(source[slot] && destination[slot]), "copy_prefixes: slot {} is both a source and a destination", slot);
  }
}

}  // namespace surogate::generate
