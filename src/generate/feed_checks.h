// The checks every NextTokenModel makes of a feed() call before it changes anything, so a bad
// call leaves every slot as it was: each slot inside [0, slots) and fed at most once, at least one
// token per feed, no slot past max_context, every id inside the vocabulary. UserError naming the
// slot or the id.
#pragma once

#include <span>

#include "generate/next_token_model.h"

namespace surogate::generate {

void check_slot(int64_t slot, int64_t slots);
void check_feeds(std::span<const SlotFeed> feeds, const NextTokenModel& model);
// copy_prefixes' rule (next_token_model.h): slots inside [0, slots), each `from` holding at
// least its `tokens`, no slot both a source and a destination, no destination twice.
// InternalError naming the slot.
void check_prefix_copies(std::span<const PrefixCopy> copies, const NextTokenModel& model);

}  // namespace surogate::generate
