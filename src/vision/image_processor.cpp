#include "vision/image_processor.h"

#include "core/error.h"
#include "vision/bicubic_resize.h"

namespace surogate::vision {
namespace {

constexpr int kChannels = 3;

// numpy's dtype flow in transformers' rescale and normalize: uint8 → float64 * rescale_factor →
// float32, then (x - float32(mean)) / float32(std) in float32.
struct PixelNormalizer {
  bool rescale;
  double factor;
  bool normalize;
  std::array<float, 3> mean;
  std::array<float, 3> std;

  float operator()(uint8_t value, int channel) const {
    float x = rescale ? static_cast<float>(static_cast<double>(value) * factor) : static_cast<float>(value);
    if (normalize) x = (x - mean[channel]) / std[channel];
    return x;
  }
};

}  // namespace

ImageProcessor::ImageProcessor(ImageProcessorConfig config) : config_(config) {
  SUROGATE_CHECK(config_.patch_size > 0 && config_.merge_size > 0 && config_.temporal_patch_size > 0,
                 "image processor sizes must be positive");
}

ImageSize ImageProcessor::target_size(int height, int width, const std::string& image_name) const {
  return smart_resize(height, width, config_.patch_size * config_.merge_size, config_.min_pixels, config_.max_pixels,
                      image_name);
}

RgbImage ImageProcessor::resize(const RgbImage& image, const std::string& image_name) const {
  const ImageSize size = target_size(image.height, image.width, image_name);
  return resize_bicubic(image, size.width, size.height, config_.resample_order);
}

int64_t ImageProcessor::tokens_for_size(int height, int width, const std::string& image_name) const {
  const ImageSize size = target_size(height, width, image_name);
  const int64_t patches = static_cast<int64_t>(size.height / config_.patch_size) * (size.width / config_.patch_size);
  return patches / (config_.merge_size * config_.merge_size);
}

ProcessedImages ImageProcessor::process(const std::vector<RgbImage>& images, const std::vector<std::string>& names) const {
  SUROGATE_CHECK(names.empty() || names.size() == images.size(), "{} names for {} images", names.size(), images.size());
  std::vector<RgbImage> resized;
  resized.reserve(images.size());
  for (size_t i = 0; i < images.size(); ++i) resized.push_back(resize(images[i], names.empty() ? fmt::format("#{}", i) : names[i]));
  return patches(resized);
}

ProcessedImages ImageProcessor::patches(const std::vector<RgbImage>& resized) const {
  ProcessedImages out;
  out.patch_dim = static_cast<int64_t>(kChannels) * config_.temporal_patch_size * config_.patch_size * config_.patch_size;
  const int unit = config_.patch_size * config_.merge_size;
  for (const RgbImage& image : resized) {
    SUROGATE_CHECK(image.width > 0 && image.height > 0 && image.width % unit == 0 && image.height % unit == 0,
                   "image of {} x {} is not at a target size (multiples of {})", image.width, image.height, unit);
    append_patches(image, out);
  }
  return out;
}

// pixel_values row = ((block_y * blocks_x + block_x) * merge + my) * merge + mx (merge-window
// order), column = ((channel * temporal + t) * patch + py) * patch + px, the same for every t.
void ImageProcessor::append_patches(const RgbImage& resized, ProcessedImages& out) const {
  const int patch = config_.patch_size;
  const int merge = config_.merge_size;
  const int temporal = config_.temporal_patch_size;
  const int grid_h = resized.height / patch;
  const int grid_w = resized.width / patch;
  const PixelNormalizer normalizer{
      config_.do_rescale, config_.rescale_factor, config_.do_normalize,
      {static_cast<float>(config_.image_mean[0]), static_cast<float>(config_.image_mean[1]),
       static_cast<float>(config_.image_mean[2])},
      {static_cast<float>(config_.image_std[0]), static_cast<float>(config_.image_std[1]),
       static_cast<float>(config_.image_std[2])}};
  size_t offset = out.pixel_values.size();
  out.pixel_values.resize(offset + static_cast<size_t>(grid_h) * grid_w * out.patch_dim);
  for (int block_y = 0; block_y < grid_h / merge; ++block_y) {
    for (int block_x = 0; block_x < grid_w / merge; ++block_x) {
      for (int my = 0; my < merge; ++my) {
        for (int mx = 0; mx < merge; ++mx) {
          const int top = (block_y * merge + my) * patch;
          const int left = (block_x * merge + mx) * patch;
          for (int channel = 0; channel < kChannels; ++channel) {
            for (int t = 0; t < temporal; ++t) {
              for (int py = 0; py < patch; ++py) {
                const uint8_t* row = &resized.pixels[(static_cast<size_t>(top + py) * resized.width + left) * kChannels];
                for (int px = 0; px < patch; ++px) out.pixel_values[offset++] = normalizer(row[px * kChannels + channel], channel);
              }
            }
          }
        }
      }
    }
  }
  out.grid_thw.push_back({1, grid_h, grid_w});
  out.tokens_per_image.push_back(static_cast<int64_t>(grid_h) * grid_w / (merge * merge));
}

}  // namespace surogate::vision
