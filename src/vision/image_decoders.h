// One decoder per file format, each on its Debian library (libpng, libjpeg-turbo, libwebp). They
// reproduce what Pillow's Image.open + load gives, up to the RGB conversion (see each .cpp for the
// modes), and fail with one UserError naming the file for a truncated, corrupt or too large image.
#pragma once

#include <cstdint>
#include <string>

#include "vision/decoded_image.h"

namespace surogate::vision {

DecodedImage decode_png(const ImageBytes& image, int64_t max_pixels);
DecodedImage decode_jpeg(const ImageBytes& image, int64_t max_pixels);
DecodedImage decode_webp(const ImageBytes& image, int64_t max_pixels);

// Called by each decoder once the header gave the size, before any pixel buffer is allocated.
void check_image_size(const std::string& name, int64_t width, int64_t height, int64_t max_pixels);

}  // namespace surogate::vision
