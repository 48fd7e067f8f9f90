// Prompt rows of `surogate generate` on a vision-language folder; see vl_generation_rows.h.
#include "train/vl_generation_rows.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/image_rows.h"
#include "vision/decode_image.h"
#include "vision/image_tokens.h"

namespace surogate::train {

VisionPromptRows::VisionPromptRows(generate::PromptBuilder& prompts, vision::ImageProcessor processor,
                                   int32_t image_pad_id, std::filesystem::path base_dir)
    : prompts_(prompts), processor_(std::move(processor)), image_pad_id_(image_pad_id), base_dir_(std::move(base_dir)) {}

VisionPromptRow VisionPromptRows::from_row(const nlohmann::ordered_json& row, const std::string& file, uint64_t line) {
  const data::RowOrigin origin{file, line, true};
  const std::string where = origin.describe();
  if (!row.is_object()) fail_user("{}: a prompt row must be a JSON object, got {}", where, row.type_name());
  // The data stage's gathering: the same part types, image sources and errors as a training row.
  data::ImageRowOptions options;
  options.base_dir = base_dir_;
  options.image_pad_id = image_pad_id_;
  const data::GatheredImages gathered = data::gather_row_images({row, origin}, DatasetConfig{}, options);
  std::vector<int32_t> ids = prompts_.from_row(gathered.row.value, where);
  std::vector<vision::RgbImage> images;
  for (const data::RowImage& image : gathered.images) {
    vision::DecodeOptions decode;
    decode.alpha = image.alpha;
    try {
      images.push_back(processor_.resize(vision::decode_image(image.bytes, decode), image.bytes.name));
    } catch (const UserError& error) {
      fail_user("{}: {}", where, error.what());
    }
  }
  return expanded(std::move(ids), std::move(images), where);
}

VisionPromptRow VisionPromptRows::from_text(const std::string& text) {
  return expanded(prompts_.from_text(text), {}, "--prompt");
}

VisionPromptRow VisionPromptRows::expanded(std::vector<int32_t> ids, std::vector<vision::RgbImage> images,
                                           const std::string& where) const {
  VisionPromptRow out;
  const vision::ProcessedImages processed = processor_.patches(images);
  // One <|image_pad|> per image (the chat template's), repeated to its merged patch count; another
  // count is one error naming the row with both numbers.
  for (size_t source : vision::image_pad_expansion(ids, image_pad_id_, processed.tokens_per_image, where)) {
    out.ids.push_back(ids[source]);
  }
  out.grid_thw = processed.grid_thw;
  out.patches = processed.patch_dim > 0 ? static_cast<int64_t>(processed.pixel_values.size()) / processed.patch_dim : 0;
  out.images = std::move(images);
  return out;
}

}  // namespace surogate::train
