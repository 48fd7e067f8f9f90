// The image-side inputs of the vision-language model graph (models/vision_model.h) for one
// data::PackedBatch: the rows' images (already at the processor's target size) turned into
// pixel_values and grids by the folder's ImageProcessor, the tower's window-order indices
// (vision/window_layout.h), the splice index from the rows' <|image_pad|> tokens, and the batch's
// M-RoPE positions [3, B, T] for the decoder's position_ids.
//
// The graph is built for a fixed patch count while each micro-batch's images differ: `patches`
// is the count a plan must have been built for, so the trainer keeps one plan per patch count
// (the cache key). A batch without images has 0 patches.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "compiler/execution_plan.h"
#include "data/packing.h"
#include "models/vision_model.h"
#include "runtime/backend.h"
#include "vision/image_processor.h"
#include "vision/window_layout.h"

namespace surogate::train {

struct VisionBatchTensors {
  int64_t patches = 0;                             // pixel_values' rows: the plan's patch count
  std::vector<float> pixel_values;                 // [patches, C·T·p·p], the images in row order
  std::vector<std::array<int64_t, 3>> grid_thw;    // per image
  vision::VisionTowerIndices tower;                // the tower's index inputs
  std::vector<int32_t> splice_index;               // I32 [B, T] (models::vision_splice_index)
};

// The tensors of `batch`. A batch whose image-pad count differs from its images' merged patch
// count, an image the processor cannot patch (a side not a multiple of patch · merge), a
// processor whose patch geometry is not the tower's, or M-RoPE positions missing for a batch with
// images is a UserError naming `where` (the dataset / batch).
VisionBatchTensors vision_batch_tensors(const data::PackedBatch& batch, const vision::ImageProcessor& processor,
                                        const models::VisionModelConfig& config, std::string_view where);

// `text_bindings` (BatchInputs::bind's, for the same batch) with position_ids bound to
// mrope_position_ids [3, B, T] instead, and the image inputs and the splice index added: every
// input of `plan` (built by models::build_vision_model_graph for tensors.patches patches).
// `tensors` and `mrope_position_ids` must outlive the bindings.
std::vector<runtime::InputBinding> vision_batch_bindings(const compiler::ExecutionPlan& plan,
                                                         std::vector<runtime::InputBinding> text_bindings,
                                                         const VisionBatchTensors& tensors,
                                                         std::span<const int32_t> mrope_position_ids);

}  // namespace surogate::train
