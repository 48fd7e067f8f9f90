// M-RoPE position ids (Qwen2-VL / Qwen2.5-VL images): transformers'
// Qwen2VLModel.get_rope_index. Text tokens get the same position on all three axes, counting on
// from the previous token; the tokens of an image (its expanded <|image_pad|> run, in merge-window
// order) get start + (t, h, w) over the merged grid [grid_t, grid_h / merge, grid_w / merge], and
// the text after it continues at start + max(grid_h, grid_w) / merge. Packed documents each start
// at 0 again (the positions of a packed row are those of its documents computed alone).
//
// Not covered: videos (their temporal interval), Qwen3-VL's timestamps.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace surogate::vision {

struct MropePositions {
  std::vector<int32_t> ids;  // [3, tokens] row-major: temporal, height, width
  // Per document: max position + 1 − its length (transformers' mrope_position_deltas, what
  // generation adds to the positions of later tokens).
  std::vector<int64_t> deltas;
};

// `ids` holds the documents back to back (`document_lengths`, summing to ids.size(); one
// document when empty). Images are consumed in order across the documents: `grid_thw[k]` is the
// k-th image's patch grid (ProcessedImages::grid_thw). A run of image_pad_id tokens is split
// into images of grid_t·grid_h·grid_w / merge² tokens each; a run that does not end on an image
// boundary, a document boundary inside an image, or a token/grid count mismatch is a UserError
// naming `where`.
MropePositions mrope_positions(std::span<const int32_t> ids, int32_t image_pad_id,
                               std::span<const std::array<int64_t, 3>> grid_thw, int merge_size,
                               std::span<const int64_t> document_lengths, std::string_view where);

}  // namespace surogate::vision
