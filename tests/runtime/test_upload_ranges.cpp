// runtime/upload_ranges.h: the bound inputs' ranges in offset order, neighbours merged across the
// region's padding but never across an input left unbound this call, empty ones dropped.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/upload_ranges.h"

namespace surogate::runtime {
namespace {

TEST(UploadRanges, EveryInputBoundIsOneCopyOverThePadding) {
  // A decode step's eight I32 inputs of one row, 256-byte aligned, bound in graph order.
  std::vector<ByteRange> bound;
  for (size_t i = 0; i < 8; ++i) bound.push_back({(7 - i) * 256, (7 - i) * 256 + 4});
  EXPECT_EQ(upload_ranges(bound, {}), (std::vector<ByteRange>{{0, 7 * 256 + 4}}));
}

TEST(UploadRanges, AnUnboundInputBetweenSplitsTheCopy) {
  const std::vector<ByteRange> unbound = {{256, 512}};
  EXPECT_EQ(upload_ranges({{512, 520}, {0, 100}, {768, 800}}, unbound),
            (std::vector<ByteRange>{{0, 100}, {512, 800}}));
  // An empty unbound input holds no bytes: nothing to keep.
  EXPECT_EQ(upload_ranges({{0, 100}, {512, 520}}, std::vector<ByteRange>{{256, 256}}),
            (std::vector<ByteRange>{{0, 520}}));
}

TEST(UploadRanges, EmptyBindingsAreDropped) {
  EXPECT_TRUE(upload_ranges({{64, 64}}, {}).empty());
  EXPECT_EQ(upload_ranges({{64, 64}, {128, 132}}, {}), (std::vector<ByteRange>{{128, 132}}));
}

}  // namespace
}  // namespace surogate::runtime
