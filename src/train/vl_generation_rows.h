// Prompt rows of `surogate generate` on a vision-language folder (docs/generation.md, "Images"): a
// JSONL row (or --prompt) turned into what the model reads — the prompt ids with each image's
// <|image_pad|> expanded to its merged patch count, and the row's images decoded and resized by
// the folder's image processor — exactly as the training data stage reads image rows
// (data/image_rows.h: the HF processor's content parts {"type": "image", "image": PATH | data URI}
// and {"type": "text"}, or ms-swift's "<image>" placeholders with an "images" column; paths
// relative to the input file), but rendered with the generation prompt (generate/prompts.h).
// Lives in train/ because it reads data/'s image rows, which generate/ sits beside.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/prompts.h"
#include "vision/decoded_image.h"
#include "vision/image_processor.h"

namespace surogate::train {

struct VisionPromptRow {
  std::vector<int32_t> ids;                        // <|image_pad|> runs expanded
  std::vector<vision::RgbImage> images;            // at the processor's target size, in order
  std::vector<std::array<int64_t, 3>> grid_thw;    // per image
  int64_t patches = 0;                             // the images' patches (pixel_values' rows)
};

class VisionPromptRows {
public:
  // `base_dir`: the folder relative image paths start from (the input file's).
  VisionPromptRows(generate::PromptBuilder& prompts, vision::ImageProcessor processor, int32_t image_pad_id,
                   std::filesystem::path base_dir);

  // A row as generate/prompts.h's PromptBuilder::from_row reads it ("prompt", "messages" or
  // "input_ids"), its messages' images gathered as the data stage gathers them. UserError naming
  // the row (file:line): a part type other than text / image, a missing or undecodable image, an
  // images column whose count differs from the placeholders, <|image_pad|> tokens in the prompt
  // (input_ids) that do not match the images.
  VisionPromptRow from_row(const nlohmann::ordered_json& row, const std::string& file, uint64_t line);
  // --prompt TEXT: the text tokenized as for a text model (no images).
  VisionPromptRow from_text(const std::string& text);

private:
  VisionPromptRow expanded(std::vector<int32_t> ids, std::vector<vision::RgbImage> images, const std::string& where) const;

  generate::PromptBuilder& prompts_;
  vision::ImageProcessor processor_;
  int32_t image_pad_id_;
  std::filesystem::path base_dir_;
};

}  // namespace surogate::train
