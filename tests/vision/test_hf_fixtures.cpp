// The engine's decoded RGB, resized uint8 image and pixel_values against transformers' slow
// Qwen2VLImageProcessorPil and Pillow (tests/fixtures/vision/expected.json, written by
// scripts/make_vision_fixtures.py): the bytes must be identical (SHA-256 of the raw arrays), the
// grids and <|image_pad|> counts equal.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "vision/decode_image.h"
#include "vision/image_processor.h"
#include "vision/image_source.h"
#include "vision/vision_test_helpers.h"

namespace surogate::vision {
namespace {

using testing::fixtures_dir;
using testing::sha256_hex;

struct FixtureCase {
  std::string config;
  std::string image;
  std::string alpha;
  nlohmann::json expected;
};

std::vector<FixtureCase> fixture_cases() {
  std::ifstream stream(fixtures_dir() / "expected.json");
  const nlohmann::json expected = nlohmann::json::parse(stream);
  std::vector<FixtureCase> cases;
  for (const auto& [config, images] : expected.items()) {
    for (const auto& [image, conversions] : images.items()) {
      for (const auto& [alpha, values] : conversions.items()) cases.push_back({config, image, alpha, values});
    }
  }
  return cases;
}

std::vector<int64_t> shape_of(const nlohmann::json& json) { return json.get<std::vector<int64_t>>(); }

TEST(VisionFixtures, CoverEveryFormatAndBothConfigs) {
  const auto cases = fixture_cases();
  std::set<std::string> configs, images;
  size_t composites = 0;
  for (const auto& c : cases) {
    configs.insert(c.config);
    images.insert(c.image);
    composites += c.alpha == "composite_on_white";
  }
  EXPECT_EQ(configs, (std::set<std::string>{"qwen2_5_vl", "qwen3_vl"}));
  EXPECT_GE(images.size(), 13u);
  EXPECT_GE(composites, 10u);
}

TEST(VisionFixtures, DecodeResizeAndPatchesEqualTransformersBitForBit) {
  for (const FixtureCase& c : fixture_cases()) {
    SCOPED_TRACE(c.config + " " + c.image + " " + c.alpha);
    const ImageBytes bytes = load_image_reference(c.image, fixtures_dir(), "fixture");
    DecodeOptions options;
    options.alpha = c.alpha == "drop" ? AlphaHandling::drop : AlphaHandling::composite_on_white;
    const RgbImage rgb = decode_image(bytes, options);
    EXPECT_EQ((std::vector<int64_t>{rgb.height, rgb.width, 3}), shape_of(c.expected["decoded_shape"]));
    EXPECT_EQ(sha256_hex(rgb.pixels.data(), rgb.pixels.size()), c.expected["decoded_sha256"]);

    const ImageProcessor processor(ImageProcessorConfig::from_folder(fixtures_dir() / c.config));
    const RgbImage resized = processor.resize(rgb, c.image);
    EXPECT_EQ((std::vector<int64_t>{resized.height, resized.width, 3}), shape_of(c.expected["resized_shape"]));
    EXPECT_EQ(sha256_hex(resized.pixels.data(), resized.pixels.size()), c.expected["resized_sha256"]);

    const ProcessedImages processed = processor.process({rgb}, {c.image});
    const auto shape = shape_of(c.expected["pixel_values_shape"]);
    ASSERT_EQ(shape.size(), 2u);
    EXPECT_EQ(processed.patch_dim, shape[1]);
    ASSERT_EQ(static_cast<int64_t>(processed.pixel_values.size()), shape[0] * shape[1]);
    const auto first = c.expected["pixel_values_first"].get<std::vector<float>>();
    const auto last = c.expected["pixel_values_last"].get<std::vector<float>>();
    for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(processed.pixel_values[i], first[i]) << "first row, " << i;
    for (size_t i = 0; i < last.size(); ++i) {
      EXPECT_EQ(processed.pixel_values[processed.pixel_values.size() - last.size() + i], last[i]) << "last row, " << i;
    }
    EXPECT_EQ(sha256_hex(processed.pixel_values.data(), processed.pixel_values.size() * sizeof(float)),
              c.expected["pixel_values_sha256"]);
    ASSERT_EQ(processed.grid_thw.size(), 1u);
    EXPECT_EQ((std::vector<int64_t>(processed.grid_thw[0].begin(), processed.grid_thw[0].end())),
              shape_of(c.expected["grid_thw"]));
    EXPECT_EQ(processed.tokens_per_image, (std::vector<int64_t>{c.expected["tokens"].get<int64_t>()}));
    EXPECT_EQ(processor.tokens_for_size(rgb.height, rgb.width, c.image), c.expected["tokens"].get<int64_t>());
  }
}

// Several images in one call: their patches are concatenated in order, one grid each.
TEST(VisionFixtures, ProcessConcatenatesImagesInOrder) {
  const ImageProcessor processor(ImageProcessorConfig::from_folder(fixtures_dir() / "qwen3_vl"));
  const RgbImage a = decode_image(load_image_reference("photo.jpg", fixtures_dir(), "a"));
  const RgbImage b = decode_image(load_image_reference("rgb_small.png", fixtures_dir(), "b"));
  const ProcessedImages both = processor.process({a, b});
  const ProcessedImages only_a = processor.process({a});
  const ProcessedImages only_b = processor.process({b});
  ASSERT_EQ(both.grid_thw.size(), 2u);
  EXPECT_EQ(both.grid_thw[0], only_a.grid_thw[0]);
  EXPECT_EQ(both.grid_thw[1], only_b.grid_thw[0]);
  std::vector<float> joined = only_a.pixel_values;
  joined.insert(joined.end(), only_b.pixel_values.begin(), only_b.pixel_values.end());
  EXPECT_EQ(both.pixel_values, joined);
  EXPECT_EQ(both.tokens_per_image, (std::vector<int64_t>{only_a.tokens_per_image[0], only_b.tokens_per_image[0]}));
}

// A data: URI and a Parquet struct's bytes decode to what the file gives.
TEST(VisionFixtures, DataUriAndStructBytesMatchTheFile) {
  const auto file = testing::read_bytes(fixtures_dir() / "rgba.png");
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string base64;
  for (size_t i = 0; i < file.size(); i += 3) {
    const uint32_t n = (uint32_t{file[i]} << 16) | (i + 1 < file.size() ? uint32_t{file[i + 1]} << 8 : 0) |
                       (i + 2 < file.size() ? uint32_t{file[i + 2]} : 0);
    base64 += kAlphabet[(n >> 18) & 63];
    base64 += kAlphabet[(n >> 12) & 63];
    base64 += i + 1 < file.size() ? kAlphabet[(n >> 6) & 63] : '=';
    base64 += i + 2 < file.size() ? kAlphabet[n & 63] : '=';
  }
  const RgbImage from_file = decode_image(load_image_reference("rgba.png", fixtures_dir(), "f"));
  const RgbImage from_uri = decode_image(load_image_reference("data:image/png;base64," + base64, "/nowhere", "f"));
  EXPECT_EQ(from_uri.pixels, from_file.pixels);
  const RgbImage from_struct = decode_image(load_image_struct(file, std::string("x.png"), "/nowhere", "row 3: images"));
  EXPECT_EQ(from_struct.pixels, from_file.pixels);
  const RgbImage from_struct_path = decode_image(load_image_struct(std::nullopt, std::string("rgba.png"), fixtures_dir(), "f"));
  EXPECT_EQ(from_struct_path.pixels, from_file.pixels);
}

}  // namespace
}  // namespace surogate::vision
