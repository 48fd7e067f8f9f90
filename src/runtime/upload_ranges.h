// Which bytes of a plan's inputs region one execute uploads, in as few copies as possible. Each
// copy from the host to the device costs an API call and a copy-engine operation in front of the
// step (a decode step of one token binds eight tiny inputs: eight copies before its graph could
// start). The bound inputs' byte ranges [offset, offset + bytes) are taken in offset order and
// neighbours merged when no input left unbound this call lies between them (its device bytes
// must stay as they are); the bytes between two merged inputs are the region's alignment padding,
// which nothing reads.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace surogate::runtime {

struct ByteRange {
  size_t begin = 0, end = 0;  // [begin, end) within the inputs region
  bool operator==(const ByteRange&) const = default;
};

// `bound`: this execute's inputs (empty ranges are dropped); `unbound`: the plan's other inputs.
std::vector<ByteRange> upload_ranges(std::vector<ByteRange> bound, std::span<const ByteRange> unbound);

}  // namespace surogate::runtime
