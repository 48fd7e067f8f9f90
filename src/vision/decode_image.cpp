#include "vision/decode_image.h"

#include <cstring>

#include "core/error.h"
#include "vision/exif_orientation.h"
#include "vision/image_decoders.h"

namespace surogate::vision {
namespace {

bool starts_with_bytes(const std::vector<uint8_t>& bytes, size_t offset, const char* magic, size_t length) {
  return bytes.size() >= offset + length && std::memcmp(bytes.data() + offset, magic, length) == 0;
}

// Pillow's Image.alpha_composite(white, image) for one channel: its 7-bit fixed-point blend.
uint8_t composite_over_white(uint8_t colour, uint8_t alpha) {
  if (alpha == 0) return 255;
  constexpr uint32_t kPrecisionBits = 7;
  constexpr uint32_t kBackground = 255;
  const uint32_t blend = kBackground * (255 - alpha);
  const uint32_t out_alpha255 = alpha * 255u + blend;
  const uint32_t coef1 = alpha * 255u * 255u * (1u << kPrecisionBits) / out_alpha255;
  const uint32_t coef2 = 255u * (1u << kPrecisionBits) - coef1;
  const uint32_t mixed = colour * coef1 + kBackground * coef2 + (0x80u << kPrecisionBits);
  return static_cast<uint8_t>((((mixed >> 8) + mixed) >> 8) >> kPrecisionBits);
}

}  // namespace

void check_image_size(const std::string& name, int64_t width, int64_t height, int64_t max_pixels) {
  if (width <= 0 || height <= 0) fail_user("image {}: it has no pixels ({} x {})", name, width, height);
  if (width * height > max_pixels) {
    fail_user("image {}: {} x {} = {} pixels is more than the decoder's limit of {} (a decompression-bomb guard, "
              "as Pillow's); shrink the image",
              name, width, height, width * height, max_pixels);
  }
}

DecodedImage decode_image_file(const ImageBytes& image, const DecodeOptions& options) {
  const auto& bytes = image.bytes;
  if (bytes.empty()) fail_user("image {}: the file is empty", image.name);
  DecodedImage decoded;
  if (starts_with_bytes(bytes, 0, "\x89PNG\r\n\x1a\n", 8)) {
    decoded = decode_png(image, options.max_pixels);
  } else if (starts_with_bytes(bytes, 0, "\xff\xd8\xff", 3)) {
    decoded = decode_jpeg(image, options.max_pixels);
  } else if (starts_with_bytes(bytes, 0, "RIFF", 4) && starts_with_bytes(bytes, 8, "WEBP", 4)) {
    decoded = decode_webp(image, options.max_pixels);
  } else {
    fail_user("image {}: not a PNG, JPEG or WebP file (its first bytes match none of their signatures)", image.name);
  }
  if (options.apply_exif_orientation) apply_exif_orientation(decoded);
  return decoded;
}

RgbImage to_rgb(DecodedImage image, AlphaHandling alpha) {
  RgbImage out{image.width, image.height, std::move(image.rgb)};
  if (alpha == AlphaHandling::composite_on_white && image.has_alpha()) {
    for (size_t i = 0; i < image.alpha.size(); ++i) {
      for (size_t c = 0; c < 3; ++c) out.pixels[i * 3 + c] = composite_over_white(out.pixels[i * 3 + c], image.alpha[i]);
    }
  }
  return out;
}

RgbImage decode_image(const ImageBytes& image, const DecodeOptions& options) {
  return to_rgb(decode_image_file(image, options), options.alpha);
}

}  // namespace surogate::vision
