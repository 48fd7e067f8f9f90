// Conversation rows with images (vision-language models, docs/vision.md): the row's images are
// gathered and decoded, its messages rewritten into the content-part form chat templates of
// Qwen2-VL / Qwen2.5-VL render (<|vision_start|><|image_pad|><|vision_end|> per image part),
// the conversation formatted as any other (assistant loss mask, Formatter), each image's
// <|image_pad|> expanded to its merged patch count, and the M-RoPE position ids computed.
//
// Row layouts accepted (messages under messages_field, property mappings as for conversations):
//   HF processor   content is a list of parts: {"type": "text", "text": ...} and
//                  {"type": "image", "image": PATH | data: URI}; an image part without "image"
//                  takes the next image of the images column.
//   ms-swift / TRL content strings with "<image>" placeholders, one per image of the images column
//                  (in order), e.g. {"messages": [...], "images": ["a.png", "b.jpg"]}.
// Images column entries: a path (relative to the dataset file's folder) or data: URI, or a
// Parquet image struct {"bytes", "path"} (HF datasets' Image feature). Paths and URIs are
// converted to RGB as transformers' load_image does (alpha dropped), structs as the processor
// does with PIL images (alpha over white); see vision/decode_image.h.
// A row with ms-swift's grounding column (`objects`) gets its <ref-object> / <bbox> placeholders
// rendered from it (data/grounding.h) against its images' decoded and resized sizes.
// Errors (one UserError naming the row, and the file where there is one): an unknown part type,
// an images column that is not a list of those entries, more or fewer images than placeholders,
// an image that is missing or undecodable, larger than the decoder's limit, or of an aspect
// ratio above 200.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/config_enums.h"
#include "data/formatter.h"
#include "vision/decode_image.h"
#include "vision/decoded_image.h"
#include "vision/image_processor.h"

namespace surogate::data {

// A row's images as they will be decoded.
struct RowImage {
  vision::ImageBytes bytes;
  vision::AlphaHandling alpha = vision::AlphaHandling::drop;
};

struct ImageRowOptions {
  std::string images_field = "images";
  // The folder relative image paths start from; ImageRowFormatter: empty means each row's file's folder.
  std::filesystem::path base_dir;
  int32_t image_pad_id = -1;       // the tokenizer's id of <|image_pad|>
  // Grounding (data/grounding.h): the column of ms-swift's objects and how boxes are normalised
  // (the configuration's norm_bbox, or the model's default_norm_bbox).
  std::string objects_field = "objects";
  NormBbox norm_bbox = NormBbox::Norm1000;
};

// The key holding a message's content: message_property_mappings' target of "content", or
// ShareGPT's "value" when the first message has "from" / "value" (as Formatter reads it).
std::string message_content_key(const RowValue& first_message, const DatasetConfig& dataset);

// `row` with its messages in content-part form and the images they refer to, in order. The
// message content key follows message_property_mappings (ShareGPT's "value" too).
struct GatheredImages {
  Row row;
  std::vector<RowImage> images;
};
GatheredImages gather_row_images(const Row& row, const DatasetConfig& dataset, const ImageRowOptions& options);

struct ImageSample {
  TokenizedSample sample;  // <|image_pad|> expanded; no loss on image tokens
  vision::ProcessedImages images;
  std::vector<vision::RgbImage> resized;  // the uint8 images `images` normalises (what the token cache keeps)
  std::vector<int32_t> position_ids;  // [3, tokens]: M-RoPE (vision/mrope_positions.h)
  std::string text;                   // the rendered text, one <|image_pad|> per image
  // The text tokenized span by span (for the loss mask) differs from tokenizing it whole, as
  // transformers' processor does (FormattedRow::tokenization_differs, docs/data.md).
  bool tokenization_differs = false;
};

class ImageRowFormatter {
 public:
  // `format` gets content_parts set. The image processor is usually
  // ImageProcessor(ImageProcessorConfig::from_folder(model_dir)).
  ImageRowFormatter(DatasetConfig dataset, FormatOptions format, TextCodec codec, ChatRenderer renderer,
                    vision::ImageProcessor processor, ImageRowOptions options);
  // Empty when the row is dropped (drop_reason says why, as Formatter).
  std::optional<ImageSample> format(const Row& row, std::string* drop_reason = nullptr);
  const std::string& resolved_type() const { return formatter_.resolved_type(); }

 private:
  DatasetConfig dataset_;
  Formatter formatter_;
  vision::ImageProcessor processor_;
  ImageRowOptions options_;
};

}  // namespace surogate::data
