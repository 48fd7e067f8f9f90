#include "vision/smart_resize.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace surogate::vision {

ImageSize smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels,
                       std::string_view image_name) {
  const double ratio = static_cast<double>(std::max(height, width)) / std::min(height, width);
  if (ratio > 200) {
    fail_user("image {}: aspect ratio {} x {} is above 200 (the Qwen-VL image processor refuses it)", image_name,
              width, height);
  }
  // std::nearbyint in the default rounding mode is Python's round(): half to even.
  int64_t h_bar = static_cast<int64_t>(std::nearbyint(static_cast<double>(height) / factor)) * factor;
  int64_t w_bar = static_cast<int64_t>(std::nearbyint(static_cast<double>(width) / factor)) * factor;
  const double pixels = static_cast<double>(static_cast<int64_t>(height) * width);
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(pixels / static_cast<double>(max_pixels));
    h_bar = std::max<int64_t>(factor, static_cast<int64_t>(std::floor(height / beta / factor)) * factor);
    w_bar = std::max<int64_t>(factor, static_cast<int64_t>(std::floor(width / beta / factor)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / pixels);
    h_bar = static_cast<int64_t>(std::ceil(height * beta / factor)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(width * beta / factor)) * factor;
  }
  return ImageSize{static_cast<int>(h_bar), static_cast<int>(w_bar)};
}

}  // namespace surogate::vision
