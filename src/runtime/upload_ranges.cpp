// runtime/upload_ranges.h.
#include "runtime/upload_ranges.h"

#include <algorithm>

namespace surogate::runtime {

std::vector<ByteRange> upload_ranges(std::vector<ByteRange> bound, std::span<const ByteRange> unbound) {
  std::erase_if(bound, [](const ByteRange& range) { return range.end <= range.begin; });
  std::sort(bound.begin(), bound.end(), [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  // Whether an unbound input with bytes overlaps [from, to): the gap a merge would copy over.
  const auto holds_unbound = [&](size_t from, size_t to) {
    return std::any_of(unbound.begin(), unbound.end(),
                       [&](const ByteRange& other) { return other.end > other.begin && other.begin < to && other.end > from; });
  };
  std::vector<ByteRange> merged;
  for (const ByteRange& range : bound) {
    if (!merged.empty() && !holds_unbound(merged.back().end, range.begin)) {
      merged.back().end = std::max(merged.back().end, range.end);
    } else {
      merged.push_back(range);
    }
  }
  return merged;
}

}  // namespace surogate::runtime
