// Grounding rows (data/grounding.h): ms-swift's `objects` rendered into the text the model sees,
// for both norm_bbox modes, with images the processor scales down (photo.jpg, 211 × 157 → 112 × 84)
// and up (rgb_small.png, 37 × 23 → 84 × 56; rotated.jpg, 64 × 40 stored with EXIF orientation 6,
// so 40 × 64 → 56 × 84) under the Qwen2.5-VL fixture processor (max_pixels 12544).
// The expected coordinates are ms-swift's Template.normalize_bbox, int(round(v / size · target)),
// computed with Python (round half to even) and written out here.
#include <gtest/gtest.h>

#include "data/grounding.h"
#include "qwen2_vl_rows.h"
#include "tokenizer/tokenizer.h"
#include "user_error_of.h"

namespace surogate::data {
namespace {

namespace fs = std::filesystem;

const fs::path kRows = fs::path(SUROGATE_FIXTURES_DIR) / "vision" / "rows";

// One formatter per mode for the whole suite (loading the tokenizer is the slow part).
ImageRowFormatter& formatter(NormBbox norm) {
  static auto make = [](NormBbox mode) {
    return testing::qwen2_vl_formatter(fs::path(SUROGATE_TOKENIZERS_DIR) / "qwen3", kRows / "chat_template.jinja",
                                       kRows.parent_path() / "qwen2_5_vl", kRows, mode);
  };
  static ImageRowFormatter thousand = make(NormBbox::Norm1000), pixels = make(NormBbox::None);
  return norm == NormBbox::Norm1000 ? thousand : pixels;
}

Row row_of(const std::string& json) { return Row{RowValue::parse(json), {"data/train.jsonl", 7, true}}; }

// Two images, three refs, two boxes (the second with its corners swapped, as ms-swift orders them).
const char* kTwoImages = R"({"messages": [
    {"role": "user", "content": "<image><image>Where are <ref-object> and <ref-object>?"},
    {"role": "assistant", "content": "<ref-object><bbox>, <bbox>"}],
  "images": ["../photo.jpg", "../rgb_small.png"],
  "objects": {"ref": ["the sky", "a cat", "the sky"], "bbox": [[10, 20, 105.5, 156], [30, 5, 12, 22]],
              "image_id": [0, 1]}})";

std::string ref(const std::string& text) { return "<|object_ref_start|>" + text + "<|object_ref_end|>"; }
std::string box(const std::string& points) { return "<|box_start|>" + points + "<|box_end|>"; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Grounding, Norm1000ScalesToTheThousandGridOfTheOriginalImage) {
  auto sample = formatter(NormBbox::Norm1000).format(row_of(kTwoImages));
  ASSERT_TRUE(sample.has_value());
  EXPECT_TRUE(contains(sample->text, "Where are " + ref("the sky") + " and " + ref("a cat") + "?")) << sample->text;
  // 10/211·1000 = 47.4, 20/157·1000 = 127.4, 105.5/211·1000 = 500, 156/157·1000 = 993.6;
  // [12, 5, 30, 22] of 37 × 23: 324.3, 217.4, 810.8, 956.5.
  EXPECT_TRUE(contains(sample->text, ref("the sky") + box("(47,127),(500,994)") + ", " + box("(324,217),(811,957)")))
      << sample->text;
  EXPECT_FALSE(contains(sample->text, "<bbox>") || contains(sample->text, "<ref-object>")) << sample->text;
}

TEST(Grounding, NoneScalesToThePixelsOfTheResizedImage) {
  auto sample = formatter(NormBbox::None).format(row_of(kTwoImages));
  ASSERT_TRUE(sample.has_value());
  ASSERT_EQ(sample->resized.size(), 2u);
  EXPECT_EQ(std::make_pair(sample->resized[0].width, sample->resized[0].height), std::make_pair(112, 84));  // down
  EXPECT_EQ(std::make_pair(sample->resized[1].width, sample->resized[1].height), std::make_pair(84, 56));   // up
  // 10/211·112 = 5.3, 20/157·84 = 10.7, 105.5/211·112 = 56, 156/157·84 = 83.5;
  // [12, 5, 30, 22]: 12/37·84 = 27.2, 5/23·56 = 12.2, 30/37·84 = 68.1, 22/23·56 = 53.6.
  EXPECT_TRUE(contains(sample->text, ref("the sky") + box("(5,11),(56,83)") + ", " + box("(27,12),(68,54)")))
      << sample->text;
}

TEST(Grounding, TheBoxesAreSpecialTokensTheAssistantIsTrainedOn) {
  auto tokenizer = tokenizer::Tokenizer::load(fs::path(SUROGATE_TOKENIZERS_DIR) / "qwen3");
  const int32_t box_start = tokenizer.token_to_id("<|box_start|>").value();
  const int32_t ref_start = tokenizer.token_to_id("<|object_ref_start|>").value();
  auto sample = formatter(NormBbox::None).format(row_of(kTwoImages));
  ASSERT_TRUE(sample.has_value());
  const auto& ids = sample->sample.input_ids;
  const auto& labels = sample->sample.labels;
  size_t boxes = 0, refs = 0, labelled_boxes = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    boxes += ids[t] == box_start;
    refs += ids[t] == ref_start;
    labelled_boxes += ids[t] == box_start && labels[t] == box_start;
  }
  EXPECT_EQ(boxes, 2u);
  EXPECT_EQ(refs, 3u);
  EXPECT_EQ(labelled_boxes, 2u);  // both boxes are in the assistant's turn
}

TEST(Grounding, PointsNorm1AndRoundingHalfToEven) {
  // rotated.jpg: EXIF orientation 6, so its width and height are the stored ones swapped (40 × 64).
  const std::string row = R"({"messages": [{"role": "user", "content": "<image>Click <bbox>"},
      {"role": "assistant", "content": "<bbox>"}], "images": ["../rotated.jpg"],
      "objects": {"bbox": [[20, 32], [0.0625, 0.125]], "bbox_type": "norm1"}})";
  auto thousand = formatter(NormBbox::Norm1000).format(row_of(row));
  ASSERT_TRUE(thousand.has_value());
  // norm1: 20·1000 and 32·1000 as they are; 0.0625·1000 = 62.5 → 62, 0.125·1000 = 125.
  EXPECT_TRUE(contains(thousand->text, "Click " + box("(20000,32000)"))) << thousand->text;
  EXPECT_TRUE(contains(thousand->text, box("(62,125)"))) << thousand->text;
  auto pixels = formatter(NormBbox::None).format(row_of(row));
  ASSERT_TRUE(pixels.has_value());
  ASSERT_EQ(std::make_pair(pixels->resized[0].width, pixels->resized[0].height), std::make_pair(56, 84));
  // 0.0625·56 = 3.5 → 4 (even), 0.125·84 = 10.5 → 10 (even).
  EXPECT_TRUE(contains(pixels->text, box("(4,10)"))) << pixels->text;

  // bbox_type real (the default): the point is scaled by the oriented size, 20/40 and 32/64.
  auto real = formatter(NormBbox::Norm1000).format(row_of(R"({"messages": [
      {"role": "user", "content": "<image>Click"}, {"role": "assistant", "content": "<bbox>"}],
      "images": ["../rotated.jpg"], "objects": "{\"ref\": [], \"bbox\": [[20, 32]]}"})"));
  ASSERT_TRUE(real.has_value());
  EXPECT_TRUE(contains(real->text, box("(500,500)"))) << real->text;
}

TEST(Grounding, ContentPartsAndRowsWithoutObjectsKeepTheirPlaceholders) {
  auto parts = formatter(NormBbox::Norm1000).format(row_of(R"({"messages": [
      {"role": "user", "content": [{"type": "image", "image": "../photo.jpg"}, {"type": "text", "text": "Find <ref-object>"}]},
      {"role": "assistant", "content": [{"type": "text", "text": "<bbox>"}]}],
      "objects": {"ref": ["the sky"], "bbox": [[0, 0, 211, 157]]}})"));
  ASSERT_TRUE(parts.has_value());
  EXPECT_TRUE(contains(parts->text, "Find " + ref("the sky"))) << parts->text;
  EXPECT_TRUE(contains(parts->text, box("(0,0),(1000,1000)"))) << parts->text;
  // Without an objects column the text is the row's own (ms-swift renders placeholders from objects only).
  auto plain = formatter(NormBbox::Norm1000).format(row_of(R"({"messages": [
      {"role": "user", "content": "<image>What is <bbox>?"}, {"role": "assistant", "content": "x"}],
      "images": ["../photo.jpg"]})"));
  ASSERT_TRUE(plain.has_value());
  EXPECT_TRUE(contains(plain->text, "What is <bbox>?")) << plain->text;
}

TEST(Grounding, EachModelsDefault) {
  EXPECT_EQ(default_norm_bbox("Qwen2_5_VLForConditionalGeneration"), NormBbox::None);
  EXPECT_EQ(default_norm_bbox("Qwen2VLForConditionalGeneration"), NormBbox::Norm1000);
  EXPECT_EQ(default_norm_bbox("Qwen3VLForConditionalGeneration"), NormBbox::Norm1000);
}

std::string error_for(const std::string& objects, const std::string& assistant = "<bbox>") {
  return error_of([&] {
    formatter(NormBbox::Norm1000)
        .format(row_of(R"({"messages": [{"role": "user", "content": "<image>Find <ref-object>"},
            {"role": "assistant", "content": ")" + assistant + R"("}], "images": ["../photo.jpg"], "objects": )" +
                       objects + "}"));
  });
}

TEST(Grounding, BadObjectsAreOneErrorNamingTheRowAndTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"ref": ["a"], "bbox": [[1, 2, 3]]})", "'objects.bbox[0]' must be a list of 2 numbers"},
      {R"({"ref": ["a"], "bbox": [[1, "2", 3, 4]]})", "'objects.bbox[0][1]' must be a number, not \"2\""},
      {R"({"ref": ["a"], "bbox": [[1, 2, 3, 4], [5, 6, 7, 8]]})",
       "'objects.bbox' has 2 entries but the messages have 1 <bbox> placeholder"},
      {R"({"ref": ["a", "b"], "bbox": [[1, 2, 3, 4]]})",
       "'objects.ref' has 2 entries but the messages have 1 <ref-object> placeholder"},
      {R"({"ref": ["a"], "bbox": [[1, 2, 3, 4]], "bbox_type": "norm1000"})", "'objects.bbox_type' must be \"real\""},
      {R"({"ref": ["a"], "bbox": [[1, 2, 3, 4]], "image_id": [1]})",
       "'objects.image_id[0]' must be the index of one of the row's 1 image, not 1"},
      {R"({"ref": [7], "bbox": [[1, 2, 3, 4]]})", "'objects.ref[0]' must be a string"},
      {R"([1, 2])", "'objects' must be an object"},
      {R"("{not json")", "'objects' is a string that is not JSON"},
  };
  for (const auto& [objects, expected] : cases) {
    const std::string message = error_for(objects);
    EXPECT_TRUE(contains(message, "data/train.jsonl:7: " + expected)) << objects << "\n" << message;
  }
  // Fewer boxes than placeholders.
  const std::string fewer = error_for(R"({"ref": ["a"], "bbox": [[1, 2, 3, 4]]})", "<bbox> <bbox>");
  EXPECT_TRUE(contains(fewer, "'objects.bbox' has 1 entry but the messages have 2 <bbox> placeholders")) << fewer;
  // Boxes and no image to scale them to.
  const std::string no_image = error_of([&] {
    formatter(NormBbox::Norm1000)
        .format(row_of(R"({"messages": [{"role": "user", "content": "Find"}, {"role": "assistant", "content": "<bbox>"}],
            "objects": {"bbox": [[1, 2]]}})"));
  });
  EXPECT_TRUE(contains(no_image, "data/train.jsonl:7: 'objects.bbox' has boxes but the row has no image")) << no_image;
}

}  // namespace
}  // namespace surogate::data
