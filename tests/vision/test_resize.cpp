// smart_resize against transformers' values and Pillow's bicubic resize on images whose result is
// known without Pillow; tests/fixtures/vision/ checks the general case bit for bit.
#include <gtest/gtest.h>

#include "user_error_of.h"
#include "vision/bicubic_resize.h"
#include "vision/exif_orientation.h"
#include "vision/smart_resize.h"

namespace surogate::vision {
namespace {

// Values printed by transformers' smart_resize.
TEST(SmartResize, MatchesTransformers) {
  auto size = [](int h, int w, int factor, int64_t lo, int64_t hi) {
    const ImageSize s = smart_resize(h, w, factor, lo, hi, "img");
    return std::pair<int, int>{s.height, s.width};
  };
  EXPECT_EQ(size(70, 42, 28, 3136, 12845056), (std::pair<int, int>{56, 56}));  // round(2.5) = 2: half to even
  EXPECT_EQ(size(23, 37, 28, 3136, 12544), (std::pair<int, int>{56, 84}));     // scaled up to min_pixels
  EXPECT_EQ(size(157, 211, 28, 3136, 12544), (std::pair<int, int>{84, 112}));  // scaled down to max_pixels
  EXPECT_EQ(size(1000, 3000, 32, 4096, 16384), (std::pair<int, int>{64, 192}));
  EXPECT_EQ(size(10, 10, 28, 3136, 1000000), (std::pair<int, int>{56, 56}));
}

TEST(SmartResize, RefusesAspectRatioAbove200) {
  const std::string error = error_of([] { smart_resize(1, 201, 28, 3136, 12544, "strip.png"); });
  EXPECT_NE(error.find("image strip.png: aspect ratio 201 x 1 is above 200"), std::string::npos) << error;
  EXPECT_EQ(error_of([] { smart_resize(1, 200, 28, 3136, 12544, "ok.png"); }), "");
}

RgbImage filled(int width, int height, uint8_t value) {
  return RgbImage{width, height, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3, value)};
}

TEST(BicubicResize, SameSizeIsACopyAndAConstantStaysConstant) {
  RgbImage image = filled(5, 4, 0);
  for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<uint8_t>(i * 37);
  EXPECT_EQ(resize_bicubic(image, 5, 4).pixels, image.pixels);
  for (auto [w, h] : {std::pair{13, 9}, std::pair{2, 3}, std::pair{5, 11}, std::pair{17, 4}}) {
    const RgbImage resized = resize_bicubic(filled(5, 4, 201), w, h);
    ASSERT_EQ(resized.width, w);
    ASSERT_EQ(resized.height, h);
    EXPECT_EQ(resized.pixels, filled(w, h, 201).pixels) << w << "x" << h;
  }
}

// Upscaling a two-level step overshoots (the kernel's negative lobes) and is clipped to 0..255.
TEST(BicubicResize, OvershootIsClipped) {
  RgbImage step = filled(4, 1, 0);
  for (int x = 2; x < 4; ++x) {
    for (int c = 0; c < 3; ++c) step.pixels[x * 3 + c] = 255;
  }
  const RgbImage resized = resize_bicubic(step, 16, 1);
  EXPECT_EQ(resized.pixels.front(), 0);
  EXPECT_EQ(resized.pixels.back(), 255);
  for (int x = 1; x < 16; ++x) EXPECT_GE(resized.pixels[x * 3], resized.pixels[(x - 1) * 3]) << x;
}

RgbImage noise(int width, int height) {
  RgbImage image = filled(width, height, 0);
  uint32_t state = 12345;
  for (auto& value : image.pixels) {
    state = state * 1664525u + 1013904223u;
    value = static_cast<uint8_t>(state >> 24);
  }
  return image;
}

// A two-axis resize is one single-axis resize after the other (each pass rounds to uint8); the
// order is Pillow's: 12.x always horizontal first, 13.0 vertical first when the height shrinks by
// more than twice what the width does.
TEST(BicubicResize, PassOrderFollowsPillowVersions) {
  const RgbImage image = noise(45, 70);
  auto horizontal_then_vertical = [&](int w, int h) { return resize_bicubic(resize_bicubic(image, w, 70), w, h); };
  auto vertical_then_horizontal = [&](int w, int h) { return resize_bicubic(resize_bicubic(image, 45, h), w, h); };
  for (auto [w, h] : {std::pair{56, 56}, std::pair{30, 30}, std::pair{30, 56}, std::pair{90, 140}, std::pair{96, 64}}) {
    SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h));
    EXPECT_EQ(resize_bicubic(image, w, h, ResampleOrder::pillow12).pixels, horizontal_then_vertical(w, h).pixels);
    const bool vertical_first = 70 - h > 0 && 70 - h > (45 - w) * 2;
    const RgbImage expected = vertical_first ? vertical_then_horizontal(w, h) : horizontal_then_vertical(w, h);
    EXPECT_EQ(resize_bicubic(image, w, h).pixels, expected.pixels);
  }
  // The orders really differ on such an image, so the test above can tell them apart.
  EXPECT_NE(horizontal_then_vertical(56, 56).pixels, vertical_then_horizontal(56, 56).pixels);
}

TEST(ExifOrientation, ReadsBothByteOrdersAndIgnoresJunk) {
  const uint8_t little[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0};
  const uint8_t big[] = {'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1,
                         0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 8, 0, 0};
  EXPECT_EQ(exif_orientation_of(little, sizeof(little)), 6);
  EXPECT_EQ(exif_orientation_of(big, sizeof(big)), 8);
  EXPECT_EQ(exif_orientation_of(little, 12), 1);  // the entry is cut off
  const uint8_t junk[] = {'X', 'X', 42, 0, 8, 0, 0, 0};
  EXPECT_EQ(exif_orientation_of(junk, sizeof(junk)), 1);
}

// Orientation 6 (a clockwise quarter turn, Pillow's ROTATE_270) and 8 on a 3 x 2 image.
TEST(ExifOrientation, TurnsAsPillowTranspose) {
  DecodedImage image;
  image.width = 3;
  image.height = 2;
  for (uint8_t v = 0; v < 6; ++v) image.rgb.insert(image.rgb.end(), {v, v, v});  // row-major 0..5
  DecodedImage turned = image;
  turned.exif_orientation = 6;
  apply_exif_orientation(turned);
  ASSERT_EQ(turned.width, 2);
  ASSERT_EQ(turned.height, 3);
  std::vector<uint8_t> red;
  for (size_t i = 0; i < turned.rgb.size(); i += 3) red.push_back(turned.rgb[i]);
  EXPECT_EQ(red, (std::vector<uint8_t>{3, 0, 4, 1, 5, 2}));
  turned = image;
  turned.exif_orientation = 8;
  apply_exif_orientation(turned);
  red.clear();
  for (size_t i = 0; i < turned.rgb.size(); i += 3) red.push_back(turned.rgb[i]);
  EXPECT_EQ(red, (std::vector<uint8_t>{2, 5, 1, 4, 0, 3}));
  EXPECT_EQ(turned.exif_orientation, 1);
}

}  // namespace
}  // namespace surogate::vision
