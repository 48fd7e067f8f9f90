#include "vision/image_tokens.h"

#include <algorithm>

#include "core/error.h"

namespace surogate::vision {

std::vector<size_t> image_pad_expansion(std::span<const int32_t> ids, int32_t image_pad_id,
                                        std::span<const int64_t> tokens_per_image, std::string_view where) {
  const auto placeholders = static_cast<size_t>(std::count(ids.begin(), ids.end(), image_pad_id));
  if (placeholders != tokens_per_image.size()) {
    fail_user("{}: the conversation has {} image placeholder{} but {} image{}; give one image per placeholder", where,
              placeholders, placeholders == 1 ? "" : "s", tokens_per_image.size(), tokens_per_image.size() == 1 ? "" : "s");
  }
  std::vector<size_t> source;
  size_t image = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] != image_pad_id) {
      source.push_back(i);
      continue;
    }
    SUROGATE_CHECK(tokens_per_image[image] > 0, "image {} has no tokens", image);
    source.insert(source.end(), static_cast<size_t>(tokens_per_image[image]), i);
    ++image;
  }
  return source;
}

std::vector<int32_t> image_token_types(std::span<const int32_t> ids, int32_t image_pad_id) {
  std::vector<int32_t> types(ids.size());
  std::transform(ids.begin(), ids.end(), types.begin(), [&](int32_t id) { return id == image_pad_id ? 1 : 0; });
  return types;
}

}  // namespace surogate::vision
