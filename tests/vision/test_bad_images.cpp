// Bad images: each gives one UserError that names the file (or the row's field), never a crash,
// a grey image or a silent skip.
#include <gtest/gtest.h>

#include <zlib.h>

#include <filesystem>

#include "user_error_of.h"
#include "vision/decode_image.h"
#include "vision/image_source.h"
#include "vision/vision_test_helpers.h"

namespace surogate::vision {
namespace {

using testing::fixtures_dir;
using testing::read_bytes;

std::string decode_error(const std::string& name, std::vector<uint8_t> bytes, int64_t max_pixels = kDefaultMaxDecodedPixels) {
  DecodeOptions options;
  options.max_pixels = max_pixels;
  return error_of([&] { decode_image(ImageBytes{name, std::move(bytes)}, options); });
}

std::vector<uint8_t> first_half(const std::string& file) {
  auto bytes = read_bytes(fixtures_dir() / file);
  bytes.resize(bytes.size() / 2);
  return bytes;
}

TEST(BadImages, TruncatedFilesAreErrorsNamingTheFile) {
  for (const std::string file : {"rgb_small.png", "photo.jpg", "lossy.webp", "alpha.webp", "rgb16.png"}) {
    SCOPED_TRACE(file);
    const std::string error = decode_error("data/" + file, first_half(file));
    EXPECT_NE(error.find("image data/" + file + ":"), std::string::npos) << error;
    EXPECT_NE(error.find("truncated"), std::string::npos) << error;
  }
}

TEST(BadImages, GarbageAndEmptyFiles) {
  const std::string garbage = decode_error("x.bin", {'h', 'e', 'l', 'l', 'o', 0, 1, 2, 3});
  EXPECT_NE(garbage.find("image x.bin: not a PNG, JPEG or WebP file"), std::string::npos) << garbage;
  EXPECT_NE(decode_error("e.png", {}).find("image e.png: the file is empty"), std::string::npos);
  // The right signature, then garbage.
  std::vector<uint8_t> png{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const std::string bad_png = decode_error("p.png", png);
  EXPECT_NE(bad_png.find("image p.png: not a readable PNG"), std::string::npos) << bad_png;
  std::vector<uint8_t> jpeg{0xff, 0xd8, 0xff, 0x00, 0x13, 0x37, 0x42, 0x42};
  const std::string bad_jpeg = decode_error("j.jpg", jpeg);
  EXPECT_NE(bad_jpeg.find("image j.jpg: not a readable JPEG"), std::string::npos) << bad_jpeg;
  std::vector<uint8_t> webp{'R', 'I', 'F', 'F', 20, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'X', 1, 2, 3, 4};
  const std::string bad_webp = decode_error("w.webp", webp);
  EXPECT_NE(bad_webp.find("image w.webp:"), std::string::npos) << bad_webp;
}

// A corrupt PNG chunk (bad CRC in IDAT) is an error, not a partly decoded image.
TEST(BadImages, CorruptPngData) {
  auto bytes = read_bytes(fixtures_dir() / "rgb_small.png");
  bytes[bytes.size() / 2] ^= 0x5a;
  const std::string error = decode_error("c.png", bytes);
  EXPECT_NE(error.find("image c.png: not a readable PNG"), std::string::npos) << error;
}

void put_be32(std::vector<uint8_t>& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(value >> shift));
}

// A valid PNG header that claims 60000 x 60000 pixels: refused before any pixel buffer exists.
TEST(BadImages, OversizedDimensionsAreRefusedFromTheHeader) {
  std::vector<uint8_t> png{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr{'I', 'H', 'D', 'R'};
  put_be32(ihdr, 60000);
  put_be32(ihdr, 60000);
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
  put_be32(png, 13);
  png.insert(png.end(), ihdr.begin(), ihdr.end());
  put_be32(png, static_cast<uint32_t>(crc32(0, ihdr.data(), static_cast<uInt>(ihdr.size()))));
  const std::string error = decode_error("huge.png", png);
  EXPECT_NE(error.find("image huge.png: 60000 x 60000 = 3600000000 pixels is more than the decoder's limit of "
                       "178956970"),
            std::string::npos)
      << error;
  for (const std::string file : {"photo.jpg", "lossy.webp", "rgba.png"}) {
    const std::string small_limit = decode_error(file, read_bytes(fixtures_dir() / file), 100);
    EXPECT_NE(small_limit.find("image " + file + ": "), std::string::npos) << small_limit;
    EXPECT_NE(small_limit.find("more than the decoder's limit of 100"), std::string::npos) << small_limit;
  }
}

TEST(BadImages, SourcesNameTheField) {
  const std::string missing = error_of([] { load_image_reference("no/such.png", "/data", "row 4: messages[1].content[0].image"); });
  EXPECT_EQ(missing, "row 4: messages[1].content[0].image: image file not found: /data/no/such.png");
  const std::string not_base64 = error_of([] { load_image_reference("data:image/png,abc", "/d", "row 1: image"); });
  EXPECT_NE(not_base64.find("row 1: image: a data: URI image must be base64"), std::string::npos) << not_base64;
  const std::string bad_chars = error_of([] { load_image_reference("data:image/png;base64,ab$c", "/d", "row 1: image"); });
  EXPECT_NE(bad_chars.find("data URI in row 1: image: not valid base64 (character '$')"), std::string::npos) << bad_chars;
  const std::string empty_struct = error_of([] { load_image_struct(std::nullopt, std::nullopt, "/d", "row 9: images[0]"); });
  EXPECT_EQ(empty_struct, "row 9: images[0]: the image struct has neither bytes nor a path");
  const std::string empty = error_of([] { load_image_reference("", "/d", "row 9: image"); });
  EXPECT_EQ(empty, "row 9: image: the image reference is empty");
}

// Deterministic mutations of every fixture (bit flips, cuts, inserted bytes): each decodes to an
// image of consistent size or fails with a UserError naming the file; nothing else escapes.
TEST(BadImages, MutatedFilesDecodeOrFailCleanly) {
  uint32_t state = 2024;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  size_t failures = 0, decoded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(fixtures_dir())) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".png" && ext != ".jpg" && ext != ".webp") continue;
    const auto original = read_bytes(entry.path());
    for (int round = 0; round < 60; ++round) {
      auto bytes = original;
      const int kind = round % 3;
      if (kind == 0) {
        for (int flips = 0; flips < 4; ++flips) bytes[next() % bytes.size()] ^= static_cast<uint8_t>(1u << (next() % 8));
      } else if (kind == 1) {
        bytes.resize(next() % bytes.size());
      } else {
        bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(next() % bytes.size()), static_cast<uint8_t>(next()));
      }
      try {
        const RgbImage image = decode_image(ImageBytes{"m" + ext, bytes}, DecodeOptions{1 << 22});
        EXPECT_EQ(image.pixels.size(), static_cast<size_t>(image.width) * image.height * 3);
        ++decoded;
      } catch (const UserError& error) {
        EXPECT_EQ(std::string(error.what()).rfind("image m" + ext + ": ", 0), 0u) << error.what();
        ++failures;
      }
    }
  }
  EXPECT_GT(failures, 100u);  // the mutations do break files
  EXPECT_GT(decoded, 10u);    // and some survive (flipped pixel data)
}

TEST(BadImages, DecodeBase64RoundTripsPaddingAndWhitespace) {
  EXPECT_EQ(decode_base64("aGVsbG8=", "x"), (std::vector<uint8_t>{'h', 'e', 'l', 'l', 'o'}));
  EXPECT_EQ(decode_base64("aGVs\nbG8", "x"), (std::vector<uint8_t>{'h', 'e', 'l', 'l', 'o'}));
  EXPECT_EQ(decode_base64("", "x"), std::vector<uint8_t>{});
  EXPECT_NE(error_of([] { decode_base64("aG=Vs", "x"); }), "");
}

}  // namespace
}  // namespace surogate::vision
