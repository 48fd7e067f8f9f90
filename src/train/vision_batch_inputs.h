// The image-side inputs of the vision-language model graph (models/vision_model.h) for one
// data::PackedBatch: the rows' images (already at the processor's target size) turned into
// pixel_values and grids by the folder's ImageProcessor, the tower's window-order indices
// (vision/window_layout.h), the splice index from the rows' <|image_pad|> tokens, and the batch's
// M-RoPE positions [3, B, T] for the decoder's position_ids.
//
// The graph is built for a fixed patch count while each micro-batch's images differ. One plan
// serves every micro-batch: it is built for the most patches any micro-batch can hold
// (vision_patch_capacity), and each batch's images are padded up to that count by one padding
// image of zero pixels. The padding image is its own frame and windows, so no real patch attends
// to it, and its merged features are never spliced into the tokens, so they get no gradient and
// nothing of the padding reaches the loss or a weight's gradient: the result is the unpadded
// model's (the tower's weight gradients sum exact zeros for the padding rows). The price is the
// tower's work on the padding rows. (A plan per patch count would waste nothing but needs a
// training device that swaps plans over the same parameters.)
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "compiler/execution_plan.h"
#include "data/packing.h"
#include "models/qwen3_vl_model.h"
#include "models/vision_model.h"
#include "runtime/backend.h"
#include "vision/image_processor.h"
#include "vision/window_layout.h"

namespace surogate::train {

struct VisionBatchTensors {
  int64_t patches = 0;                             // pixel_values' rows: the plan's patch count
  int64_t padding_patches = 0;                     // of which the padding image's (the last rows)
  std::vector<float> pixel_values;                 // [patches, C·T·p·p], the images in row order
  std::vector<std::array<int64_t, 3>> grid_thw;    // per image of the batch (the padding image not listed)
  vision::VisionTowerIndices tower;                // Qwen2.5-VL's tower's index inputs
  models::Qwen3VisionTowerInputs qwen3_tower;      // Qwen3-VL's (the padding image's frame included)
  std::vector<int32_t> splice_index;               // I32 [B, T] (models::vision_splice_index)
  std::vector<int32_t> deepstack_index;            // I32 [B, T], Qwen3-VL's (models::vision_deepstack_index)
};

// The tensors of `batch`, for a plan of `plan_patches` patches (padded up to it as above), or
// (nullopt) of exactly the batch's. A batch whose image-pad count differs from its images' merged
// patch count, an image the processor cannot patch (a side not a multiple of patch · merge), a
// processor whose patch geometry is not the tower's, M-RoPE positions missing for a batch with
// images, or more patches than `plan_patches` (or a padding that is not whole merged patches) is a
// UserError naming `where` (the dataset / batch).
VisionBatchTensors vision_batch_tensors(const data::PackedBatch& batch, const vision::ImageProcessor& processor,
                                        const models::VisionModelConfig& config, std::string_view where,
                                        std::optional<int64_t> plan_patches = std::nullopt);

// The same for a Qwen3-VL plan (models/qwen3_vl_model.h): qwen3_tower and deepstack_index in
// place of tower. The padding image is its own frame, so no real patch attends to it, and
// neither the splice nor the DeepStack index reads its merged features.
VisionBatchTensors vision_batch_tensors(const data::PackedBatch& batch, const vision::ImageProcessor& processor,
                                        const models::Qwen3VLModelConfig& config, std::string_view where,
                                        std::optional<int64_t> plan_patches = std::nullopt);

// The patch count a plan must be built for so that any micro-batch of `batch` rows of `rows`
// fits: `batch` times the most patches one row's images have (patch_size² pixels each at their
// stored target size, one frame per image); 0 when no row has an image.
int64_t vision_patch_capacity(const data::PackedRowsView& rows, int64_t batch, int64_t patch_size);

// `text_bindings` (BatchInputs::bind's, for the same batch) with position_ids bound to
// mrope_position_ids [3, B, T] instead, and the image inputs and the splice index added: every
// input of `plan` (built by models::build_vision_model_graph for tensors.patches patches).
// `tensors` and `mrope_position_ids` must outlive the bindings.
std::vector<runtime::InputBinding> vision_batch_bindings(const compiler::ExecutionPlan& plan,
                                                         std::vector<runtime::InputBinding> text_bindings,
                                                         const VisionBatchTensors& tensors,
                                                         std::span<const int32_t> mrope_position_ids);

// The same for a Qwen3-VL plan (models::build_qwen3_vl_model_graph): pixel_values and the
// interpolation weights as given (the plan's dtype; must outlive the bindings), the tower's
// index inputs, the splice and DeepStack indices.
std::vector<runtime::InputBinding> qwen3_vl_batch_bindings(const compiler::ExecutionPlan& plan,
                                                           std::vector<runtime::InputBinding> text_bindings,
                                                           const VisionBatchTensors& tensors,
                                                           std::span<const int32_t> mrope_position_ids,
                                                           std::span<const std::byte> pixel_values,
                                                           std::span<const std::byte> interpolation_weights);

}  // namespace surogate::train
