// The vision tower's patch positions and attention segments (vision/patch_positions.h) equal
// transformers' get_vision_position_ids / get_vision_cu_seqlens (tests/fixtures/vision/rows/
// vision_rope.json, scripts/make_vision_row_fixtures.py): image grids of the fixture rows and a
// two-frame grid, merge 2.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "vision/patch_positions.h"
#include "vision_test_helpers.h"

namespace surogate::vision {
namespace {

TEST(PatchLayout, EqualsTransformersVisionPositionsAndSegments) {
  std::ifstream stream(testing::fixtures_dir() / "rows" / "vision_rope.json");
  const auto fixture = nlohmann::json::parse(stream);
  std::vector<std::array<int64_t, 3>> grids;
  for (const auto& grid : fixture["grid_thw"]) grids.push_back(grid.get<std::array<int64_t, 3>>());
  const PatchLayout layout = patch_layout(grids, fixture["merge_size"].get<int>());
  const auto& positions = fixture["position_ids"];  // [patches, 2]: row, column
  const size_t patches = positions.size();
  ASSERT_EQ(layout.position_ids.size(), 3 * patches);
  for (size_t p = 0; p < patches; ++p) {
    ASSERT_EQ(layout.position_ids[patches + p], positions[p][0].get<int32_t>()) << "row of patch " << p;
    ASSERT_EQ(layout.position_ids[2 * patches + p], positions[p][1].get<int32_t>()) << "column of patch " << p;
  }
  EXPECT_EQ(layout.cu_seqlens, fixture["cu_seqlens"].get<std::vector<int32_t>>());
  // The two-frame image's second frame (its last 16 patches) is frame 1.
  EXPECT_EQ(layout.position_ids[patches - 1], 1);
  EXPECT_EQ(layout.position_ids[patches - 17], 0);
}

}  // namespace
}  // namespace surogate::vision
