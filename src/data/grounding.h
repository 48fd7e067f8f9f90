// Grounding rows (docs/vision.md, "Grounding"): ms-swift's `objects` column, whose `ref` entries
// replace the messages' <ref-object> placeholders and whose `bbox` entries replace their <bbox>
// placeholders, in order, as ms-swift's Qwen-VL templates render them (the default, "legacy"
// format): <|object_ref_start|>REF<|object_ref_end|> and <|box_start|>(x1,y1),(x2,y2)<|box_end|>.
//
// A box's coordinates are normalised as `norm_bbox` says (ms-swift's Template.normalize_bbox):
//   norm1000  int(round(v / size · 1000))               the 0..1000 grid (Qwen2-VL, Qwen3-VL)
//   none      int(round(v / size · resized size))       pixels of the resized image (Qwen2.5-VL)
// where `size` is the image's own width or height (bbox_type "real", the default) or 1 (bbox_type
// "norm1": coordinates in 0..1), the image being objects.image_id's (0 for every box by default),
// and round is Python's (half to even). A 4-number box has its corners ordered first (x1 ≤ x2,
// y1 ≤ y2), as ms-swift's preprocessor does.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "config/config_enums.h"
#include "data/formatter.h"

namespace surogate::data {

// An image of the row: its size as decoded (EXIF orientation applied) and as the processor resized it.
struct GroundingImage {
  int64_t width = 0, height = 0;
  int64_t resized_width = 0, resized_height = 0;
};

// The model's own normalisation, what a null norm_bbox means (ms-swift's template defaults):
// `none` for Qwen2.5-VL (absolute coordinates of the resized image), `norm1000` for the others
// (Qwen2-VL, Qwen3-VL and ms-swift's base template).
NormBbox default_norm_bbox(std::string_view architecture);

// Whether the row has a non-null `field` (the objects column).
bool has_grounding_objects(const RowValue& row, const std::string& field);

// Renders the objects of `row[field]` into the messages of `row[messages_field]` (each message's
// `content_key`: a string, or the "text" of its {"type": "text"} parts), in message order.
// UserError naming the row (`where`) and the field: objects that are not an object (or a JSON
// string of one); ref not a list of strings; bbox not a list of boxes of 2 or 4 numbers; an
// unknown bbox_type; an image_id that is not a list of image indices of the row; boxes without
// any image; more or fewer refs / boxes than <ref-object> / <bbox> placeholders; a coordinate
// beyond 64-bit integers once normalised.
void render_grounding(RowValue& row, const std::string& field, const std::string& messages_field,
                      const std::string& content_key, std::span<const GroundingImage> images, NormBbox norm,
                      const std::string& where);

}  // namespace surogate::data
