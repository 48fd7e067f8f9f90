#include "vision/image_processor.h"

#include <algorithm>
#include <thread>

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

ProcessedImages ImageProcessor::patches(const std::vector<RgbImage>& resized, size_t reserve_values) const {
  ProcessedImages out;
  out.patch_dim = static_cast<int64_t>(kChannels) * config_.temporal_patch_size * config_.patch_size * config_.patch_size;
  const int unit = config_.patch_size * config_.merge_size;
  // Each image's first row: the whole batch is allocated once and the images are written side by
  // side (a micro-batch of Qwen3-VL-8B images is ~90 MB of fp32 values: the trainer binds one per
  // micro-batch while the GPU runs the previous one).
  std::vector<size_t> first_value(resized.size() + 1, 0);
  for (size_t i = 0; i < resized.size(); ++i) {
    const RgbImage& image = resized[i];
    SUROGATE_CHECK(image.width > 0 && image.height > 0 && image.width % unit == 0 && image.height % unit == 0,
                   "image of {} x {} is not at a target size (multiples of {})", image.width, image.height, unit);
    const int grid_h = image.height / config_.patch_size, grid_w = image.width / config_.patch_size;
    first_value[i + 1] = first_value[i] + static_cast<size_t>(grid_h) * grid_w * out.patch_dim;
    out.grid_thw.push_back({1, grid_h, grid_w});
    out.tokens_per_image.push_back(static_cast<int64_t>(grid_h) * grid_w / (config_.merge_size * config_.merge_size));
  }
  out.pixel_values.reserve(std::max(first_value.back(), reserve_values));
  out.pixel_values.resize(first_value.back());
  const std::array<float, 256 * kChannels> table = normalized_values();
  const size_t threads = std::min<size_t>(resized.size(), std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 1) {
    for (size_t i = 0; i < resized.size(); ++i) write_patches(resized[i], table, out.pixel_values.data() + first_value[i]);
    return out;
  }
  // Images on threads, each writing its own rows: the values do not depend on the split.
  std::vector<std::thread> workers;
  for (size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (size_t i = t; i < resized.size(); i += threads) {
        write_patches(resized[i], table, out.pixel_values.data() + first_value[i]);
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  return out;
}

// Every uint8 value of every channel as the processor normalises it (a table: the same value
// always gives the same float).
std::array<float, 256 * 3> ImageProcessor::normalized_values() const {
  const PixelNormalizer normalizer{
      config_.do_rescale, config_.rescale_factor, config_.do_normalize,
      {static_cast<float>(config_.image_mean[0]), static_cast<float>(config_.image_mean[1]),
       static_cast<float>(config_.image_mean[2])},
      {static_cast<float>(config_.image_std[0]), static_cast<float>(config_.image_std[1]),
       static_cast<float>(config_.image_std[2])}};
  std::array<float, 256 * kChannels> table{};
  for (int channel = 0; channel < kChannels; ++channel) {
    for (int value = 0; value < 256; ++value) {
      table[static_cast<size_t>(channel * 256 + value)] = normalizer(static_cast<uint8_t>(value), channel);
    }
  }
  return table;
}

// pixel_values row = ((block_y * blocks_x + block_x) * merge + my) * merge + mx (merge-window
// order), column = ((channel * temporal + t) * patch + py) * patch + px, the same for every t.
void ImageProcessor::write_patches(const RgbImage& resized, const std::array<float, 256 * 3>& table,
                                   float* out) const {
  const int patch = config_.patch_size;
  const int merge = config_.merge_size;
  const int temporal = config_.temporal_patch_size;
  const int grid_h = resized.height / patch;
  const int grid_w = resized.width / patch;
  size_t offset = 0;
  for (int block_y = 0; block_y < grid_h / merge; ++block_y) {
    for (int block_x = 0; block_x < grid_w / merge; ++block_x) {
      for (int my = 0; my < merge; ++my) {
        for (int mx = 0; mx < merge; ++mx) {
          const int top = (block_y * merge + my) * patch;
          const int left = (block_x * merge + mx) * patch;
          for (int channel = 0; channel < kChannels; ++channel) {
            const float* values = table.data() + channel * 256;
            for (int t = 0; t < temporal; ++t) {
              for (int py = 0; py < patch; ++py) {
                const uint8_t* row = &resized.pixels[(static_cast<size_t>(top + py) * resized.width + left) * kChannels];
                for (int px = 0; px < patch; ++px) out[offset++] = values[row[px * kChannels + channel]];
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace surogate::vision
