// transformers' smart_resize (Qwen2-VL's image processor): the size an image is resized to so
// both sides are multiples of `factor` (patch_size * merge_size), the pixel count lies in
// [min_pixels, max_pixels] and the aspect ratio is kept as closely as that allows.
#pragma once

#include <cstdint>
#include <string_view>

namespace surogate::vision {

struct ImageSize {
  int height = 0;
  int width = 0;
};

// Python's float arithmetic reproduced (round() is round-half-to-even). An aspect ratio above
// 200, which transformers refuses, is a UserError naming `image_name`.
ImageSize smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels,
                       std::string_view image_name);

}  // namespace surogate::vision
