// The <|image_pad|> expansion of Qwen2-VL's processor (Qwen2VLProcessor.__call__): the chat
// template writes one <|image_pad|> per image; the processor repeats the k-th one
// grid_t · grid_h · grid_w / merge² times (ProcessedImages::tokens_per_image). transformers does
// it on the text before tokenizing; <|image_pad|> is an added token, so it always tokenizes
// alone and expanding the token ids gives the same ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace surogate::vision {

// For every token of the expanded sequence, the index of the token of `ids` it copies (callers
// expand labels and weights through it). The number of image_pad_id tokens in `ids` must equal
// tokens_per_image.size(): else one UserError naming `where` (the row) with both counts.
std::vector<size_t> image_pad_expansion(std::span<const int32_t> ids, int32_t image_pad_id,
                                        std::span<const int64_t> tokens_per_image, std::string_view where);

// transformers' mm_token_type_ids: 1 for image_pad_id tokens, else 0.
std::vector<int32_t> image_token_types(std::span<const int32_t> ids, int32_t image_pad_id);

}  // namespace surogate::vision
