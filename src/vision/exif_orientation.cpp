#include "vision/exif_orientation.h"

#include <cstring>
#include <utility>

namespace surogate::vision {
namespace {

constexpr uint16_t kOrientationTag = 0x0112;
constexpr uint16_t kTypeShort = 3;
constexpr uint16_t kTypeLong = 4;

struct TiffReader {
  const uint8_t* data;
  size_t size;
  bool little_endian;

  bool has(size_t offset, size_t length) const { return offset <= size && length <= size - offset; }
  uint32_t read(size_t offset, int bytes) const {
    uint32_t value = 0;
    for (int i = 0; i < bytes; ++i) {
      const uint32_t byte = data[offset + (little_endian ? i : bytes - 1 - i)];
      value |= byte << (8 * i);
    }
    return value;
  }
};

}  // namespace

int exif_orientation_of(const uint8_t* exif, size_t size) {
  if (size >= 6 && std::memcmp(exif, "Exif\0\0", 6) == 0) {
    exif += 6;
    size -= 6;
  }
  if (size < 8) return 1;
  TiffReader tiff{exif, size, exif[0] == 'I'};
  if (!((exif[0] == 'I' && exif[1] == 'I') || (exif[0] == 'M' && exif[1] == 'M')) || tiff.read(2, 2) != 42) return 1;
  const size_t ifd = tiff.read(4, 4);
  if (!tiff.has(ifd, 2)) return 1;
  const uint32_t entries = tiff.read(ifd, 2);
  for (uint32_t i = 0; i < entries; ++i) {
    const size_t entry = ifd + 2 + size_t{12} * i;
    if (!tiff.has(entry, 12)) return 1;
    if (tiff.read(entry, 2) != kOrientationTag) continue;
    const uint32_t type = tiff.read(entry + 2, 2);
    uint32_t value = 0;
    if (type == kTypeShort) {
      value = tiff.read(entry + 8, 2);
    } else if (type == kTypeLong) {
      value = tiff.read(entry + 8, 4);
    }
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

void apply_exif_orientation(DecodedImage& image) {
  const int orientation = image.exif_orientation;
  image.exif_orientation = 1;
  if (orientation <= 1 || orientation > 8) return;
  const int width = image.width;
  const int height = image.height;
  const bool swaps = orientation >= 5;  // TRANSPOSE, ROTATE_270, TRANSVERSE, ROTATE_90
  const int out_width = swaps ? height : width;
  const int out_height = swaps ? width : height;
  // The source pixel of output pixel (x, y), for each of Pillow's Image.Transpose methods.
  auto source_of = [&](int x, int y) -> std::pair<int, int> {
    switch (orientation) {
      case 2: return {width - 1 - x, y};               // FLIP_LEFT_RIGHT
      case 3: return {width - 1 - x, height - 1 - y};  // ROTATE_180
      case 4: return {x, height - 1 - y};              // FLIP_TOP_BOTTOM
      case 5: return {y, x};                           // TRANSPOSE
      case 6: return {y, height - 1 - x};              // ROTATE_270 (clockwise quarter turn)
      case 7: return {width - 1 - y, height - 1 - x};  // TRANSVERSE
      default: return {width - 1 - y, x};              // 8: ROTATE_90
    }
  };
  std::vector<uint8_t> rgb(image.rgb.size());
  std::vector<uint8_t> alpha(image.alpha.size());
  for (int y = 0; y < out_height; ++y) {
    for (int x = 0; x < out_width; ++x) {
      const auto [sx, sy] = source_of(x, y);
      const size_t from = static_cast<size_t>(sy) * width + sx;
      const size_t to = static_cast<size_t>(y) * out_width + x;
      std::memcpy(&rgb[to * 3], &image.rgb[from * 3], 3);
      if (!alpha.empty()) alpha[to] = image.alpha[from];
    }
  }
  image.rgb = std::move(rgb);
  image.alpha = std::move(alpha);
  image.width = out_width;
  image.height = out_height;
}

}  // namespace surogate::vision
