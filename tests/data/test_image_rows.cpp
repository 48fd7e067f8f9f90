// Conversation rows with images (data/image_rows.h) against transformers: the rendered text, the
// input ids with <|image_pad|> expanded, the image grids and the M-RoPE position ids equal those
// of Qwen2VLProcessor and Qwen2VLModel.get_rope_index recorded in tests/fixtures/vision/rows/
// (scripts/make_vision_row_fixtures.py), with the real Qwen tokenizer and the Qwen2-VL template.
#include <gtest/gtest.h>

#include "qwen2_vl_rows.h"
#include "test_helpers.h"
#include "user_error_of.h"
#include "vision/mrope_positions.h"

namespace surogate::data {
namespace {

constexpr int32_t kImagePad = 151655;
const std::filesystem::path kRows = std::filesystem::path(SUROGATE_FIXTURES_DIR) / "vision" / "rows";

using testing::read_text;

ImageRowFormatter qwen2_vl_formatter(const std::filesystem::path& base_dir) {
  return testing::qwen2_vl_formatter(std::filesystem::path(SUROGATE_TOKENIZERS_DIR) / "qwen3",
                                     kRows / "chat_template.jinja", kRows.parent_path() / "qwen2_5_vl", base_dir);
}

std::vector<Row> fixture_rows() {
  std::vector<Row> rows;
  std::istringstream lines(read_text(kRows / "rows.jsonl"));
  std::string line;
  while (std::getline(lines, line)) {
    Row row;
    row.value = RowValue::parse(line);
    row.origin = {(kRows / "rows.jsonl").string(), rows.size() + 1, true};
    rows.push_back(std::move(row));
  }
  return rows;
}

Row row_of(const std::string& json) { return Row{RowValue::parse(json), {"data/train.jsonl", 7, true}}; }

TEST(ImageRows, EqualTransformersProcessorAndRopeIndex) {
  const auto expected = nlohmann::json::parse(read_text(kRows / "expected.json"));
  const auto rows = fixture_rows();
  ASSERT_EQ(rows.size(), expected.size());
  auto formatter = qwen2_vl_formatter(kRows);
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE("row " + std::to_string(i + 1));
    auto sample = formatter.format(rows[i]);
    ASSERT_TRUE(sample.has_value());
    EXPECT_EQ(sample->text, expected[i]["text"].get<std::string>());
    EXPECT_EQ(sample->sample.input_ids, expected[i]["input_ids"].get<std::vector<int32_t>>());
    std::vector<std::array<int64_t, 3>> grids;
    for (const auto& grid : expected[i]["image_grid_thw"]) grids.push_back(grid.get<std::array<int64_t, 3>>());
    EXPECT_EQ(sample->images.grid_thw, grids);
    std::vector<int32_t> positions;
    for (const auto& axis : expected[i]["position_ids"]) {
      for (const auto& value : axis) positions.push_back(value.get<int32_t>());
    }
    EXPECT_EQ(sample->position_ids, positions);
    int64_t patches = 0;
    for (const auto& grid : grids) patches += grid[0] * grid[1] * grid[2];
    EXPECT_EQ(sample->images.pixel_values.size(), static_cast<size_t>(patches * sample->images.patch_dim));
    // Image tokens never carry loss; the assistant's text does.
    size_t labelled = 0;
    for (size_t t = 0; t < sample->sample.input_ids.size(); ++t) {
      if (sample->sample.input_ids[t] == kImagePad) EXPECT_EQ(sample->sample.labels[t], kIgnoreLabel);
      if (sample->sample.labels[t] != kIgnoreLabel) ++labelled;
    }
    EXPECT_GT(labelled, 5u);
  }
}

TEST(ImageRows, AnImageInsideAnAssistantTurnHasNoLossButTheTurnHas) {
  auto formatter = qwen2_vl_formatter(kRows);
  auto sample = formatter.format(fixture_rows()[2]);
  ASSERT_TRUE(sample.has_value());
  const auto& ids = sample->sample.input_ids;
  const auto& labels = sample->sample.labels;
  auto last_pad = std::find(ids.rbegin(), ids.rend(), kImagePad).base() - 1;
  const size_t at = static_cast<size_t>(last_pad - ids.begin());
  EXPECT_EQ(labels[at], kIgnoreLabel);
  EXPECT_NE(labels[at + 1], kIgnoreLabel);  // <|vision_end|> after the image, inside the turn
}

TEST(ImageRows, PackedDocumentsTakeThePositionsTheyHaveAlone) {
  auto formatter = qwen2_vl_formatter(kRows);
  const auto rows = fixture_rows();
  auto first = formatter.format(rows[0]);
  auto second = formatter.format(rows[1]);
  std::vector<int32_t> ids = first->sample.input_ids;
  ids.insert(ids.end(), second->sample.input_ids.begin(), second->sample.input_ids.end());
  std::vector<std::array<int64_t, 3>> grids = first->images.grid_thw;
  grids.insert(grids.end(), second->images.grid_thw.begin(), second->images.grid_thw.end());
  const std::vector<int64_t> lengths{static_cast<int64_t>(first->sample.input_ids.size()),
                                     static_cast<int64_t>(second->sample.input_ids.size())};
  auto packed = vision::mrope_positions(ids, kImagePad, grids, 2, lengths, "pack");
  const size_t n1 = first->sample.input_ids.size();
  const size_t n2 = second->sample.input_ids.size();
  for (size_t axis = 0; axis < 3; ++axis) {
    for (size_t t = 0; t < n1; ++t) EXPECT_EQ(packed.ids[axis * (n1 + n2) + t], first->position_ids[axis * n1 + t]);
    for (size_t t = 0; t < n2; ++t) {
      EXPECT_EQ(packed.ids[axis * (n1 + n2) + n1 + t], second->position_ids[axis * n2 + t]);
    }
  }
  EXPECT_EQ(packed.deltas.size(), 2u);
}

TEST(ImageRows, PlaceholderAndImageCountsMustMatch) {
  auto formatter = qwen2_vl_formatter(kRows);
  std::string more = error_of([&] {
    formatter.format(row_of(R"({"messages": [{"role": "user", "content": "<image><image>?"},
        {"role": "assistant", "content": "x"}], "images": ["../photo.jpg"]})"));
  });
  EXPECT_NE(more.find("data/train.jsonl:7"), std::string::npos) << more;
  EXPECT_NE(more.find("more image placeholders than the 1 image of 'images'"), std::string::npos) << more;
  std::string fewer = error_of([&] {
    formatter.format(row_of(R"({"messages": [{"role": "user", "content": "<image>?"},
        {"role": "assistant", "content": "x"}], "images": ["../photo.jpg", "../gray.jpg"]})"));
  });
  EXPECT_NE(fewer.find("data/train.jsonl:7: 'images' has 2 images but the messages have 1 placeholder"),
            std::string::npos)
      << fewer;
}

TEST(ImageRows, BadImagesAndPartsNameTheRowAndTheFile) {
  auto formatter = qwen2_vl_formatter(kRows);
  std::string missing = error_of([&] {
    formatter.format(row_of(R"({"messages": [{"role": "user", "content": [{"type": "image", "image": "nope.png"}]},
        {"role": "assistant", "content": "x"}]})"));
  });
  EXPECT_NE(missing.find("data/train.jsonl:7"), std::string::npos) << missing;
  EXPECT_NE(missing.find("nope.png"), std::string::npos) << missing;

  const auto dir = testing::fresh_dir("image_rows_bad");
  testing::write_file(dir / "broken.png", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16));
  auto in_dir = qwen2_vl_formatter(dir);
  std::string broken = error_of([&] {
    in_dir.format(row_of(R"({"messages": [{"role": "user", "content": "<image>"},
        {"role": "assistant", "content": "x"}], "images": ["broken.png"]})"));
  });
  EXPECT_NE(broken.find("data/train.jsonl:7"), std::string::npos) << broken;
  EXPECT_NE(broken.find("broken.png"), std::string::npos) << broken;

  std::string video = error_of([&] {
    formatter.format(row_of(R"({"messages": [{"role": "user", "content": [{"type": "video", "video": "a.mp4"}]},
        {"role": "assistant", "content": "x"}]})"));
  });
  EXPECT_NE(video.find("data/train.jsonl:7: messages[0].content[0]: content part type 'video' is not supported"),
            std::string::npos)
      << video;
  std::string number = error_of([&] {
    formatter.format(row_of(R"({"messages": [{"role": "user", "content": "<image>"},
        {"role": "assistant", "content": "x"}], "images": [3]})"));
  });
  EXPECT_NE(number.find("data/train.jsonl:7: images[0]: an image must be a path"), std::string::npos) << number;
}

TEST(ImageRows, ContentListsStayRefusedByThePlainFormatter) {
  Formatter plain(DatasetConfig{}, FormatOptions{}, testing::byte_codec(), testing::chatml_renderer());
  std::string error = error_of([&] {
    plain.format(row_of(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": "x"}]})"));
  });
  EXPECT_NE(error.find("data/train.jsonl:7"), std::string::npos) << error;
}

}  // namespace
}  // namespace surogate::data
