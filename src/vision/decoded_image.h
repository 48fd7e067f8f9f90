// An image as the decoders hand it over: 8-bit RGB, rows top to bottom, and the alpha plane when
// the file has transparency (an alpha channel or a PNG tRNS colour key). The conversion to the
// processor's RGB (rgb_conversion.h) decides what the alpha does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace surogate::vision {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // height * width * 3, interleaved R G B
};

struct DecodedImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;    // height * width * 3
  std::vector<uint8_t> alpha;  // height * width, or empty: the image is opaque
  int exif_orientation = 1;    // the EXIF Orientation tag (1..8), 1 when absent

  bool has_alpha() const { return !alpha.empty(); }
};

// The bytes of one image file and the name errors give it (its path, or what the row says).
struct ImageBytes {
  std::string name;
  std::vector<uint8_t> bytes;
};

// Pillow refuses an image above 2 * Image.MAX_IMAGE_PIXELS (89,478,485) as a decompression bomb;
// the same bound stops a small file from asking for gigabytes before a pixel is decoded.
inline constexpr int64_t kDefaultMaxDecodedPixels = 2 * int64_t{89478485};

}  // namespace surogate::vision
