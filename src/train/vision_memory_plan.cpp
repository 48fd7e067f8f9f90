// See vision_memory_plan.h.
#include "train/vision_memory_plan.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "data/pipeline.h"
#include "vision/smart_resize.h"

namespace surogate::train {

VisionRowImages read_vision_rows(const Config& config) {
  const data::DataSettings settings = data::data_settings_from_config(config);
  SUROGATE_CHECK(settings.vision.has_value(), "read_vision_rows is asked for a vision-language model's data");
  // The run's token cache when it is up to date, else the rows tokenized here, in memory: the dry
  // run only reads (it takes no lock on output_dir, docs/training.md), so it writes no cache.
  const data::TextTools tools = data::load_text_tools(settings);
  data::TokenCache::Problem problem;
  const std::shared_ptr<data::TokenCache> cache =
      data::TokenCache::open(settings.cache_path, data::cache_key(settings, tools), problem);
  std::optional<data::PreparedData> prepared;
  if (!cache) prepared = data::prepare_data(settings, tools, {});
  const data::PackedRowsView rows = cache ? cache->train() : data::view_of(prepared->train);
  if (rows.rows() == 0) {
    fail_user("{}: the training datasets produced no rows after formatting and length checks (`surogate preview` "
              "shows why)", config.sources.of("datasets"));
  }
  VisionRowImages out;
  out.processor = settings.vision->processor;
  const int64_t patch = out.processor.patch_size;
  for (size_t row = 0; rows.vision() && row < rows.rows(); ++row) {
    std::vector<std::pair<int, int>> images;
    int64_t patches = 0;
    for (uint64_t image = rows.row_image_offsets[row]; image < rows.row_image_offsets[row + 1]; ++image) {
      const int width = rows.image_sizes[2 * image], height = rows.image_sizes[2 * image + 1];
      images.emplace_back(width, height);
      patches += (width / patch) * (height / patch);
    }
    out.row_patches = std::max(out.row_patches, patches);
    out.rows.push_back(std::move(images));
  }
  return out;
}

int64_t row_patches_under(const VisionRowImages& images, int64_t max_pixels) {
  const vision::ImageProcessorConfig& p = images.processor;
  const int factor = p.patch_size * p.merge_size;
  int64_t most = 0;
  for (const auto& row : images.rows) {
    int64_t patches = 0;
    for (const auto& [width, height] : row) {
      const vision::ImageSize size = vision::smart_resize(height, width, factor, p.min_pixels, max_pixels, "an image");
      patches += static_cast<int64_t>(size.height / p.patch_size) * (size.width / p.patch_size);
    }
    most = std::max(most, patches);
  }
  return most;
}

std::optional<int64_t> max_pixels_that_fits(const VisionRowImages& images, const std::function<bool(int64_t)>& fits) {
  std::map<int64_t, bool> judged;  // by row patches: each judgement compiles a plan
  const auto fits_at = [&](int64_t max_pixels) {
    const int64_t patches = row_patches_under(images, max_pixels);
    auto found = judged.find(patches);
    if (found == judged.end()) found = judged.emplace(patches, fits(patches)).first;
    return found->second;
  };
  int64_t low = images.processor.min_pixels, high = images.processor.max_pixels - 1;
  if (high < low || !fits_at(low)) return std::nullopt;
  while (low < high) {  // the row patches do not grow as max_pixels shrinks: the largest that fits
    const int64_t middle = low + (high - low + 1) / 2;
    if (fits_at(middle)) {
      low = middle;
    } else {
      high = middle - 1;
    }
  }
  return low;
}

}  // namespace surogate::train
