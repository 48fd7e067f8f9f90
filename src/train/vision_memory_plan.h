// The vision tower's share of the dry run's memory plan (docs/vision.md, "Training"): the patch
// count the trainer plans the tower for (per_device_train_batch_size × the most patches one packed
// row of the training split holds) read from the data itself, and, when the plan does not fit,
// the max_pixels that would bring the count down far enough.
//
// The dry run reads the training rows the run would train on (the token cache when it is up to
// date, else the datasets tokenized in memory: a dry run writes nothing), so the plan is the
// run's own, not a bound.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "config/config.h"
#include "vision/image_processor.h"

namespace surogate::train {

// The training split's images as packed: each row's images at their resized sizes.
struct VisionRowImages {
  vision::ImageProcessorConfig processor;       // the data's (max_pixels applied)
  std::vector<std::vector<std::pair<int, int>>> rows;  // per row: (width, height) of each image
  int64_t row_patches = 0;                      // the most patches one row's images hold
};

// The training rows of `config` (a vision-language model's): its up-to-date token cache's, else
// tokenized here (data::prepare_data) without writing a cache.
VisionRowImages read_vision_rows(const Config& config);

// The most patches one row holds once every image is resized again under `max_pixels` (from its
// current size: an estimate of what the original files give, exact when they are resized alike).
int64_t row_patches_under(const VisionRowImages& images, int64_t max_pixels);

// The largest max_pixels in [min_pixels, the data's max_pixels) under which `fits(row patches)`
// holds, assuming the rows keep their images; nullopt when not even min_pixels fits.
std::optional<int64_t> max_pixels_that_fits(const VisionRowImages& images, const std::function<bool(int64_t)>& fits);

}  // namespace surogate::train
