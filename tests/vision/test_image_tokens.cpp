// The <|image_pad|> expansion and M-RoPE positions on hand-made sequences (their parity with
// transformers on real rows is tests/data/test_image_rows.cpp).
#include <gtest/gtest.h>

#include "user_error_of.h"
#include "vision/image_tokens.h"
#include "vision/mrope_positions.h"

namespace surogate::vision {
namespace {

constexpr int32_t kPad = 9;

TEST(ImageTokens, EachPlaceholderRepeatsItsImagesTokenCount) {
  const std::vector<int32_t> ids{1, kPad, 2, kPad, 3};
  const std::vector<int64_t> counts{3, 1};
  EXPECT_EQ(image_pad_expansion(ids, kPad, counts, "row"), (std::vector<size_t>{0, 1, 1, 1, 2, 3, 4}));
  EXPECT_EQ(image_token_types(ids, kPad), (std::vector<int32_t>{0, 1, 0, 1, 0}));
}

TEST(ImageTokens, APlaceholderCountOtherThanTheImagesIsRefused) {
  const std::vector<int32_t> ids{1, kPad, 2};
  const std::vector<int64_t> two{4, 4};
  EXPECT_EQ(error_of([&] { image_pad_expansion(ids, kPad, two, "train.jsonl:3"); }),
            "train.jsonl:3: the conversation has 1 image placeholder but 2 images; give one image per placeholder");
}

TEST(MropePositions, ImageTokensTakeTheirGridAndTextContinuesAfterTheLongerSide) {
  // text, text, image of merged grid 2 x 3 (patch grid 4 x 6), text
  const std::vector<int32_t> ids{5, 6, kPad, kPad, kPad, kPad, kPad, kPad, 7};
  const std::vector<std::array<int64_t, 3>> grids{{1, 4, 6}};
  auto result = mrope_positions(ids, kPad, grids, 2, {}, "row");
  const std::vector<int32_t> expected{
      0, 1, 2, 2, 2, 2, 2, 2, 5,   // temporal
      0, 1, 2, 2, 2, 3, 3, 3, 5,   // height
      0, 1, 2, 3, 4, 2, 3, 4, 5};  // width
  EXPECT_EQ(result.ids, expected);
  EXPECT_EQ(result.deltas, (std::vector<int64_t>{5 + 1 - 9}));
}

TEST(MropePositions, AdjacentImagesSplitTheirRunAndPackedDocumentsRestart) {
  const std::vector<int32_t> ids{kPad, kPad, kPad, 1, 2, kPad, kPad, kPad, kPad, kPad, kPad};
  const std::vector<std::array<int64_t, 3>> grids{{1, 2, 2}, {1, 4, 2}, {1, 2, 4}, {1, 4, 4}};
  const std::vector<int64_t> lengths{5, 6};
  auto result = mrope_positions(ids, kPad, grids, 2, lengths, "row");
  // document 1: image 1 (1 token) at 0, image 2 (2 x 1) at 1, text at 3, 4; document 2 restarts:
  // image 3 (1 x 2) at 0, image 4 (2 x 2) at 2.
  const std::vector<int32_t> expected{
      0, 1, 1, 3, 4, 0, 0, 2, 2, 2, 2,   // temporal
      0, 1, 2, 3, 4, 0, 0, 2, 2, 3, 3,   // height
      0, 1, 1, 3, 4, 0, 1, 2, 3, 2, 3};  // width
  EXPECT_EQ(result.ids, expected);
  EXPECT_EQ(result.deltas, (std::vector<int64_t>{0, 4 - 6}));
}

TEST(MropePositions, TokenAndGridMismatchesAreRefused) {
  const std::vector<int32_t> ids{1, kPad, kPad, kPad, 2};
  const std::vector<std::array<int64_t, 3>> grid4{{1, 4, 4}};
  EXPECT_EQ(error_of([&] { mrope_positions(ids, kPad, grid4, 2, {}, "r"); }),
            "r: image 1 needs 4 image tokens but its run has 3");
  const std::vector<std::array<int64_t, 3>> none;
  EXPECT_EQ(error_of([&] { mrope_positions(ids, kPad, none, 2, {}, "r"); }),
            "r: more image tokens than images (0 images given)");
  const std::vector<std::array<int64_t, 3>> extra{{1, 2, 6}, {1, 2, 2}};
  EXPECT_EQ(error_of([&] { mrope_positions(ids, kPad, extra, 2, {}, "r"); }), "r: 2 images given but the tokens hold 1");
  const std::vector<int64_t> split{2, 3};
  const std::vector<std::array<int64_t, 3>> grid3{{1, 2, 6}};
  EXPECT_EQ(error_of([&] { mrope_positions(ids, kPad, grid3, 2, split, "r"); }),
            "r: image 1 needs 3 image tokens but its run has 1");
}

}  // namespace
}  // namespace surogate::vision
