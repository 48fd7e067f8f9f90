// The data path of vision-language models (docs/vision.md, "Training data"): packing keeps each
// document's images and M-RoPE positions with it, the token cache stores and checks them, batches
// carry them as [3, B, T] positions and the rows' images, and the pipeline formats a Qwen2.5-VL
// folder's conversation rows through ImageRowFormatter with max_pixels applied.
#include <unistd.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "data/image_rows.h"
#include "data/pipeline.h"
#include "qwen2_vl_rows.h"
#include "test_helpers.h"
#include "user_error_of.h"
#include "vision_model_folder.h"

namespace surogate::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kVision = fs::path(SUROGATE_FIXTURES_DIR) / "vision";

vision::RgbImage image_of(int width, int height, uint8_t seed) {
  vision::RgbImage image{width, height, {}};
  for (int i = 0; i < width * height * 3; ++i) image.pixels.push_back(static_cast<uint8_t>(seed + i));
  return image;
}

// A document of `length` tokens whose three position axes are 100·axis + token index (so every
// value says where it came from), with `images`.
TokenizedSample image_document(size_t length, std::vector<vision::RgbImage> images) {
  TokenizedSample sample;
  for (size_t i = 0; i < length; ++i) {
    sample.input_ids.push_back(static_cast<int32_t>(10 + i));
    sample.labels.push_back(i == 0 ? kIgnoreLabel : static_cast<int32_t>(10 + i));
  }
  auto vision = std::make_shared<SampleImages>();
  vision->resized = std::move(images);
  for (int32_t axis = 0; axis < 3; ++axis) {
    for (size_t i = 0; i < length; ++i) vision->positions.push_back(100 * axis + static_cast<int32_t>(i));
  }
  sample.images = vision;
  return sample;
}

TokenizedSample text_document(size_t length) {
  TokenizedSample sample = image_document(length, {});
  sample.images = nullptr;
  return sample;
}

PackedRows pack(std::vector<TokenizedSample> documents, PackingMode mode, bool pad_left, size_t T = 16) {
  PackingOptions options;
  options.sequence_length = T;
  options.mode = mode;
  options.pad_left = pad_left;
  options.pad_id = 7;
  options.keep_order = true;
  options.vision = true;
  PackingStats stats;
  return pack_documents(std::move(documents), options, stats);
}

TEST(VisionPacking, ARowKeepsItsDocumentsImagesAndPositionsInOrder) {
  for (bool pad_left : {false, true}) {
    SCOPED_TRACE(pad_left ? "pad left" : "pad right");
    // Sequential packing in document order: row 0 = [image doc of 5, text doc of 4, image doc of 3]
    // + 4 padding, row 1 = [image doc of 9] + 7 padding.
    std::vector<TokenizedSample> documents;
    documents.push_back(image_document(5, {image_of(2, 1, 0), image_of(1, 1, 50)}));
    documents.push_back(text_document(4));
    documents.push_back(image_document(3, {image_of(1, 2, 90)}));
    documents.push_back(image_document(9, {image_of(3, 1, 120)}));
    const PackedRows rows = pack(std::move(documents), PackingMode::Sequential, pad_left);
    ASSERT_EQ(rows.rows(), 2u);
    EXPECT_EQ(rows.row_image_offsets, (std::vector<uint64_t>{0, 3, 4}));
    EXPECT_EQ(rows.image_sizes, (std::vector<int32_t>{2, 1, 1, 1, 1, 2, 3, 1}));
    EXPECT_EQ(rows.image_pixel_offsets, (std::vector<uint64_t>{0, 6, 9, 15, 24}));
    EXPECT_EQ(rows.image_pixels[6], 50);
    EXPECT_EQ(rows.image_pixels[15], 120);
    const size_t first = pad_left ? 4 : 0;  // row 0's first document token
    std::vector<int32_t> axis1(rows.mrope_positions.begin() + 16, rows.mrope_positions.begin() + 32);
    std::vector<int32_t> expected(16, 0);
    for (int i = 0; i < 5; ++i) expected[first + i] = 100 + i;
    for (int i = 0; i < 4; ++i) expected[first + 5 + i] = i;  // text: its 1-D positions on every axis
    for (int i = 0; i < 3; ++i) expected[first + 9 + i] = 100 + i;
    EXPECT_EQ(axis1, expected);
    EXPECT_EQ(rows.mrope_positions.size(), 2u * 3 * 16);
  }
}

TEST(VisionPacking, BatchesCarryAxisMajorPositionsAndTheRowsImages) {
  std::vector<TokenizedSample> documents;
  documents.push_back(image_document(6, {image_of(2, 2, 1)}));
  documents.push_back(image_document(4, {image_of(1, 1, 9), image_of(1, 3, 30)}));
  const PackedRows rows = pack(std::move(documents), PackingMode::OnePerRow, false, 8);
  // Row 1, then a padding-only row, then row 0: B = 3.
  const std::vector<uint64_t> order{1, rows.rows(), 0};
  const PackedBatch batch = make_batch(view_of(rows), order, 7);
  ASSERT_EQ(batch.mrope_position_ids.size(), 3u * 3 * 8);
  for (size_t axis = 0; axis < 3; ++axis) {
    for (size_t t = 0; t < 8; ++t) {
      const auto a = static_cast<int32_t>(axis);
      EXPECT_EQ(batch.mrope_position_ids[(axis * 3 + 0) * 8 + t], t < 4 ? 100 * a + static_cast<int32_t>(t) : 0);
      EXPECT_EQ(batch.mrope_position_ids[(axis * 3 + 1) * 8 + t], 0);
      EXPECT_EQ(batch.mrope_position_ids[(axis * 3 + 2) * 8 + t], t < 6 ? 100 * a + static_cast<int32_t>(t) : 0);
    }
  }
  ASSERT_EQ(batch.images.size(), 3u);
  EXPECT_EQ(batch.images[0].pixels, image_of(1, 1, 9).pixels);
  EXPECT_EQ(batch.images[1].height, 3);
  EXPECT_EQ(batch.images[2].pixels, image_of(2, 2, 1).pixels);
  // Text batches have none of it.
  PackingOptions text;
  text.sequence_length = 8;
  PackingStats stats;
  const PackedRows text_rows = pack_documents({text_document(5)}, text, stats);
  const std::vector<uint64_t> only{0};
  const PackedBatch text_batch = make_batch(view_of(text_rows), only, 0);
  EXPECT_TRUE(text_batch.mrope_position_ids.empty());
  EXPECT_TRUE(text_batch.images.empty());
}

TEST(VisionTokenCache, StoresAndChecksTheImages) {
  std::vector<TokenizedSample> documents;
  documents.push_back(image_document(5, {image_of(2, 1, 0), image_of(1, 1, 50)}));
  documents.push_back(text_document(4));
  documents.push_back(image_document(7, {image_of(3, 1, 11)}));
  const PackedRows train = pack(std::move(documents), PackingMode::OnePerRow, false);
  const PackedRows eval = pack({image_document(3, {image_of(1, 1, 5)})}, PackingMode::OnePerRow, false);
  const fs::path path = fs::path(::testing::TempDir()) / ("vision_cache.surotok_" + std::to_string(::getpid()));
  write_token_cache(path, 42, train, eval, json{{"x", 1}});
  TokenCache::Problem problem;
  auto cache = TokenCache::open(path, 42, problem);
  ASSERT_NE(cache, nullptr) << problem.reason;
  for (const auto& [view, rows] : {std::pair{cache->train(), &train}, std::pair{cache->eval(), &eval}}) {
    ASSERT_TRUE(view.vision());
    EXPECT_EQ(std::vector<int32_t>(view.mrope_positions.begin(), view.mrope_positions.end()), rows->mrope_positions);
    EXPECT_EQ(std::vector<uint64_t>(view.row_image_offsets.begin(), view.row_image_offsets.end()), rows->row_image_offsets);
    EXPECT_EQ(std::vector<int32_t>(view.image_sizes.begin(), view.image_sizes.end()), rows->image_sizes);
    EXPECT_EQ(std::vector<uint8_t>(view.image_pixels.begin(), view.image_pixels.end()), rows->image_pixels);
  }
  EXPECT_EQ(cache->report(), (json{{"x", 1}}));
  // A text cache has no image fields.
  PackingOptions text;
  text.sequence_length = 16;
  PackingStats stats;
  const PackedRows text_rows = pack_documents({text_document(5)}, text, stats);
  write_token_cache(path, 43, text_rows, PackedRows{16}, json::object());
  cache = TokenCache::open(path, 43, problem);
  ASSERT_NE(cache, nullptr) << problem.reason;
  EXPECT_FALSE(cache->train().vision());
  // A truncated vision cache is corrupt, not misread.
  write_token_cache(path, 42, train, eval, json::object());
  fs::resize_file(path, fs::file_size(path) - 8);
  EXPECT_EQ(TokenCache::open(path, 42, problem), nullptr);
  EXPECT_NE(problem.reason.find("corrupt"), std::string::npos) << problem.reason;
}

// A Qwen2.5-VL folder for the pipeline (tests/vision_model_folder.h: the fixture processor, max_pixels 12544).
fs::path vision_model_folder() { return surogate::testing::vision_model_folder("vision_data_model"); }

Config vision_config(const fs::path& model) {
  Config config;
  config.model.name_or_path = model.string();
  config.model.sequence_len = 64;
  DatasetConfig dataset;
  dataset.path = (kVision / "rows" / "rows.jsonl").string();
  dataset.type = DatasetType::Conversation;
  config.data.datasets = {dataset};
  config.data.sample_packing = false;
  config.eval.validation_split_ratio = 0.0;
  config.run.output_dir = (fs::path(::testing::TempDir()) / ("vision_data_run_" + std::to_string(::getpid()))).string();
  return config;
}

TEST(VisionPipeline, RowsOfAVisionLanguageFolderCarryImagesAndPositionsAsTheFormatterGives) {
  const fs::path model = vision_model_folder();
  const DataSettings settings = data_settings_from_config(vision_config(model));
  ASSERT_TRUE(settings.vision.has_value());
  EXPECT_EQ(settings.vision->architecture, "Qwen2_5_VLForConditionalGeneration");
  const TextTools tools = load_text_tools(settings);
  PreparedData prepared = prepare_data(settings, tools, {});
  const PackedRows& rows = prepared.train;
  ASSERT_EQ(rows.rows(), 4u);  // one row per document, the fixture's four rows in a shuffled order
  auto formatter = testing::qwen2_vl_formatter(fs::path(SUROGATE_TOKENIZERS_DIR) / "qwen3",
                                               kVision / "rows" / "chat_template.jinja", kVision / "qwen2_5_vl",
                                               kVision / "rows");
  const auto expected = json::parse(testing::read_text(kVision / "rows" / "expected.json"));
  const vision::ImageProcessor processor(settings.vision->processor);
  std::vector<std::string> lines;
  std::istringstream file(testing::read_text(kVision / "rows" / "rows.jsonl"));
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  size_t matched = 0;
  for (uint64_t r = 0; r < rows.rows(); ++r) {
    const std::vector<uint64_t> one{r};
    const PackedBatch batch = make_batch(view_of(rows), one, 0);
    for (size_t i = 0; i < expected.size(); ++i) {
      const auto ids = expected[i]["input_ids"].get<std::vector<int32_t>>();
      if (!std::equal(ids.begin(), ids.end(), batch.input_ids.begin())) continue;
      SCOPED_TRACE("fixture row " + std::to_string(i + 1));
      ++matched;
      for (size_t axis = 0; axis < 3; ++axis) {
        const auto axis_positions = expected[i]["position_ids"][axis].get<std::vector<int32_t>>();
        EXPECT_TRUE(std::equal(axis_positions.begin(), axis_positions.end(),
                               batch.mrope_position_ids.begin() + static_cast<long>(axis * 64)));
      }
      // The batch's images give the formatter's pixel_values bit for bit.
      const vision::ProcessedImages pixels = processor.patches(batch.images);
      auto sample = formatter.format(Row{RowValue::parse(lines[i]), {(kVision / "rows" / "rows.jsonl").string(), i + 1}});
      ASSERT_TRUE(sample.has_value());
      EXPECT_EQ(pixels.grid_thw, sample->images.grid_thw);
      EXPECT_EQ(pixels.pixel_values, sample->images.pixel_values);
      EXPECT_EQ(pixels.grid_thw.size(), expected[i]["image_grid_thw"].size());
    }
  }
  EXPECT_EQ(matched, 4u);
}

}  // namespace
}  // namespace surogate::data

namespace surogate::data {
namespace {

TEST(VisionPipeline, MaxPixelsOverridesTheFolderProcessorAndKeysTheCache) {
  const fs::path model = vision_model_folder();
  Config config = vision_config(model);
  const DataSettings folder_settings = data_settings_from_config(config);
  EXPECT_EQ(folder_settings.vision->processor.max_pixels, 12544);
  config.data.max_pixels = 3136;  // = min_pixels: smart_resize brings every image near 56 × 56 pixels
  const DataSettings settings = data_settings_from_config(config);
  EXPECT_EQ(settings.vision->processor.max_pixels, 3136);
  const TextTools tools = load_text_tools(settings);
  EXPECT_NE(cache_key(settings, tools), cache_key(folder_settings, tools));
  // Every image of the fixture rows is smaller than under the folder's max_pixels, and the rows'
  // <|image_pad|> runs follow the new sizes (one token per 28 × 28 pixels).
  auto pixels_and_pads = [&](const DataSettings& with) {
    PreparedData prepared = prepare_data(with, tools, {});
    const PackedRows& rows = prepared.train;
    std::pair<std::vector<int64_t>, int64_t> out{{}, 0};
    int64_t tokens = 0;
    for (size_t i = 0; i < rows.image_sizes.size(); i += 2) {
      out.first.push_back(static_cast<int64_t>(rows.image_sizes[i]) * rows.image_sizes[i + 1]);
      tokens += out.first.back() / (28 * 28);
    }
    for (int32_t id : rows.input_ids) out.second += id == 151655 ? 1 : 0;
    EXPECT_EQ(out.second, tokens);
    std::sort(out.first.begin(), out.first.end());
    return out;
  };
  const auto [small, small_pads] = pixels_and_pads(settings);
  const auto [large, large_pads] = pixels_and_pads(folder_settings);
  ASSERT_EQ(small.size(), 5u);
  ASSERT_EQ(large.size(), 5u);
  EXPECT_LT(small_pads, large_pads);
  EXPECT_LE(small.back(), 56 * 84);  // the largest: 56 × 84 (smart_resize rounds up to min_pixels)
  EXPECT_GT(large.back(), 56 * 84);

  config.data.max_pixels = 3000;
  EXPECT_NE(error_of([&] { data_settings_from_config(config); }).find("max_pixels (3000) is below"), std::string::npos);
}

TEST(VisionPipeline, NormBboxDefaultsToTheModelsAndKeysTheCache) {
  Config config = vision_config(vision_model_folder());
  const DataSettings folder_settings = data_settings_from_config(config);
  EXPECT_EQ(folder_settings.vision->norm_bbox, NormBbox::None);  // Qwen2.5-VL: pixels of the resized image
  config.data.norm_bbox = NormBbox::Norm1000;
  const DataSettings settings = data_settings_from_config(config);
  EXPECT_EQ(settings.vision->norm_bbox, NormBbox::Norm1000);
  const TextTools tools = load_text_tools(settings);
  EXPECT_NE(cache_key(settings, tools), cache_key(folder_settings, tools));
}

TEST(VisionPipeline, MaxPixelsOrNormBboxForATextModelIsRefusedNamingIt) {
  const fs::path model = vision_model_folder();
  const fs::path text_model = fs::path(::testing::TempDir()) / ("vision_data_text_model_" + std::to_string(::getpid()));
  fs::create_directories(text_model);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::copy_file(model / file, text_model / file, fs::copy_options::overwrite_existing);
  }
  std::ofstream(text_model / "config.json") << R"({"architectures": ["Qwen2ForCausalLM"], "vocab_size": 151936})";
  Config config = vision_config(text_model);
  EXPECT_FALSE(data_settings_from_config(config).vision.has_value());
  config.data.max_pixels = 10000;
  const std::string message = error_of([&] { data_settings_from_config(config); });
  EXPECT_NE(message.find("max_pixels applies to vision-language models"), std::string::npos) << message;
  config.data.max_pixels.reset();
  config.data.norm_bbox = NormBbox::None;
  const std::string bbox = error_of([&] { data_settings_from_config(config); });
  EXPECT_NE(bbox.find("norm_bbox applies to vision-language models"), std::string::npos) << bbox;
}

TEST(VisionPipeline, ARowWithImagesLongerThanMaxLengthIsDroppedNotCut) {
  Config config = vision_config(vision_model_folder());
  config.data.truncation_strategy = TruncationStrategy::Right;
  config.data.max_length = 40;  // the fixture rows have 45, 48, 58 (with images) and 29 (text) tokens
  const DataSettings settings = data_settings_from_config(config);
  PreparedData prepared = prepare_data(settings, load_text_tools(settings), {});
  EXPECT_EQ(prepared.train.rows(), 1u);
  EXPECT_TRUE(prepared.train.image_sizes.empty());
  EXPECT_EQ(prepared.datasets[0].dropped.at("longer than max_length with images (a row with images is never cut)"), 3u);
}

}  // namespace
}  // namespace surogate::data
