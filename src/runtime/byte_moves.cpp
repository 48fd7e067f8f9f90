// copy_within's checks; see byte_moves.h.
#include "runtime/byte_moves.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "core/error.h"

namespace surogate::runtime {

void check_byte_moves(const compiler::ExecutionPlan& plan, std::span<const ByteMove> moves) {
  // Every range as (tensor, begin, end, is a destination): sorted, a destination may touch no
  // range beside it in the same tensor (sources may overlap sources: they are only read).
  struct Range {
    graph::TensorId tensor;
    size_t begin, end;
    bool written;
  };
  std::vector<Range> ranges;
  ranges.reserve(moves.size() * 2);
  for (const ByteMove& move : moves) {
    SUROGATE_CHECK(move.tensor >= 0 && static_cast<size_t>(move.tensor) < plan.graph.tensors.size(),
                   "copy_within: no tensor {}", move.tensor);
    const graph::TensorInfo& info = plan.graph.tensor(move.tensor);
    const size_t size = info.type.size_bytes();
    SUROGATE_CHECK(move.from <= size && move.bytes <= size - move.from && move.to <= size && move.bytes <= size - move.to,
                   "copy_within: {} bytes from {} to {} leave '{}' ({} bytes)", move.bytes, move.from, move.to,
                   info.name, size);
    if (move.bytes == 0) continue;
    ranges.push_back({move.tensor, move.from, move.from + move.bytes, false});
    ranges.push_back({move.tensor, move.to, move.to + move.bytes, true});
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return std::tie(a.tensor, a.begin) < std::tie(b.tensor, b.begin);
  });
  // A destination overlaps another range iff, in begin order, it overlaps a neighbour's span:
  // sweep keeping the furthest end so far of the written and of all ranges.
  graph::TensorId tensor = graph::kNoTensor;
  size_t any_end = 0, written_end = 0;
  for (const Range& range : ranges) {
    if (range.tensor != tensor) {
      tensor = range.tensor;
      any_end = written_end = 0;
    }
    const bool clash = range.written ? range.begin < any_end : range.begin < written_end;
    SUROGATE_CHECK(!clash, "copy_within: a destination in '{}' overlaps another move's range at byte {}",
                   plan.graph.tensor(range.tensor).name, range.begin);
    any_end = std::max(any_end, range.end);
    if (range.written) written_end = std::max(written_end, range.end);
  }
}

}  // namespace surogate::runtime
