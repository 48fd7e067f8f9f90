// The Qwen2-VL / Qwen2.5-VL / Qwen3-VL image processor (transformers' slow, Pillow-based
// Qwen2VLImageProcessorPil; Qwen3-VL folders use it with patch_size 16 and mean = std = 0.5 from
// their preprocessor_config.json): smart_resize, Pillow's bicubic resize, rescale and normalise
// in numpy's float order, the temporal patch (each image repeated temporal_patch_size times) and
// the flattening of pixel_values, one row per patch in merge-window order.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vision/bicubic_resize.h"
#include "vision/decoded_image.h"
#include "vision/smart_resize.h"

namespace surogate::vision {

struct ImageProcessorConfig {
  int patch_size = 14;
  int temporal_patch_size = 2;
  int merge_size = 2;
  int64_t min_pixels = 56 * 56;         // size.shortest_edge
  int64_t max_pixels = 28 * 28 * 1280;  // size.longest_edge
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255;
  bool do_normalize = true;
  std::array<double, 3> image_mean{0.48145466, 0.4578275, 0.40821073};  // OPENAI_CLIP_MEAN
  std::array<double, 3> image_std{0.26862954, 0.26130258, 0.27577711};  // OPENAI_CLIP_STD
  // Not a preprocessor_config.json key: which Pillow's pass order to reproduce (bicubic_resize.h).
  ResampleOrder resample_order = ResampleOrder::pillow13;

  // The keys of a preprocessor_config.json (transformers' class defaults for absent ones). A key
  // this processor does not reproduce (another resample filter, do_resize false, another
  // processor type) is a UserError naming `source` and the key.
  static ImageProcessorConfig from_json(const nlohmann::json& json, const std::string& source);
  static ImageProcessorConfig from_folder(const std::filesystem::path& model_dir);
};

struct ProcessedImages {
  int64_t patch_dim = 0;                           // channels * temporal_patch_size * patch_size^2
  std::vector<float> pixel_values;                 // [sum of patches, patch_dim], row-major
  std::vector<std::array<int64_t, 3>> grid_thw;    // per image: 1, grid_h, grid_w
  std::vector<int64_t> tokens_per_image;           // <|image_pad|> count: grid_h * grid_w / merge^2
};

class ImageProcessor {
 public:
  explicit ImageProcessor(ImageProcessorConfig config);

  const ImageProcessorConfig& config() const { return config_; }
  // The size smart_resize gives (multiples of patch_size * merge_size).
  ImageSize target_size(int height, int width, const std::string& image_name) const;
  // The uint8 image the processor normalises: Pillow's bicubic resize to target_size.
  RgbImage resize(const RgbImage& image, const std::string& image_name) const;
  // `names` (one per image, or empty) name the images in errors.
  ProcessedImages process(const std::vector<RgbImage>& images, const std::vector<std::string>& names = {}) const;
  // pixel_values of images already at their target size (resize's output, as the token cache
  // keeps them): process() without the resize. Each side must be a multiple of patch_size · merge_size.
  // `reserve_values`: room for that many values allocated at once, for a caller that pads the
  // result to a fixed size afterwards (the trainer's plan), so the padding does not reallocate.
  ProcessedImages patches(const std::vector<RgbImage>& resized, size_t reserve_values = 0) const;
  int64_t tokens_for_size(int height, int width, const std::string& image_name) const;

 private:
  std::array<float, 256 * 3> normalized_values() const;
  // One image's rows of pixel_values, from `out` on.
  void write_patches(const RgbImage& resized, const std::array<float, 256 * 3>& table, float* out) const;
  ImageProcessorConfig config_;
};

}  // namespace surogate::vision
