// See vision_batch_inputs.h.
#include "train/vision_batch_inputs.h"

#include "core/error.h"
#include "models/vision_tower.h"

namespace surogate::train {
namespace {

// The processor must cut the patches the tower's patch embedding reads.
void require_matching_geometry(const vision::ImageProcessorConfig& processor, const models::VisionTowerConfig& tower,
                               std::string_view where) {
  if (processor.patch_size != tower.patch_size || processor.temporal_patch_size != tower.temporal_patch_size ||
      processor.merge_size != tower.spatial_merge_size) {
    fail_user("{}: the image processor's patch_size {}, temporal_patch_size {}, merge_size {} differ from "
              "config.json's vision_config ({}, {}, {})",
              where, processor.patch_size, processor.temporal_patch_size, processor.merge_size, tower.patch_size,
              tower.temporal_patch_size, tower.spatial_merge_size);
  }
}

}  // namespace

VisionBatchTensors vision_batch_tensors(const data::PackedBatch& batch, const vision::ImageProcessor& processor,
                                        const models::VisionModelConfig& config, std::string_view where) {
  require_matching_geometry(processor.config(), config.vision, where);
  const int64_t tokens = batch.batch_size * batch.sequence_length;
  if (static_cast<int64_t>(batch.mrope_position_ids.size()) != 3 * tokens) {
    fail_user("{}: the batch carries {} M-RoPE positions for [3, {}, {}] tokens", where,
              batch.mrope_position_ids.size(), batch.batch_size, batch.sequence_length);
  }
  VisionBatchTensors tensors;
  if (!batch.images.empty()) {
    vision::ProcessedImages processed = processor.patches(batch.images);
    tensors.pixel_values = std::move(processed.pixel_values);
    tensors.grid_thw = std::move(processed.grid_thw);
    tensors.patches = static_cast<int64_t>(tensors.pixel_values.size()) / config.vision.patch_columns();
  }
  tensors.splice_index =
      models::vision_splice_index(batch.input_ids, batch.batch_size, batch.sequence_length, config.image_token_id,
                                  tensors.patches / config.vision.merge_unit(), where);
  tensors.tower = vision::vision_tower_indices(tensors.grid_thw, static_cast<int>(config.vision.spatial_merge_size),
                                               static_cast<int>(config.vision.window_size),
                                               static_cast<int>(config.vision.patch_size));
  return tensors;
}

std::vector<runtime::InputBinding> vision_batch_bindings(const compiler::ExecutionPlan& plan,
                                                         std::vector<runtime::InputBinding> text_bindings,
                                                         const VisionBatchTensors& tensors,
                                                         std::span<const int32_t> mrope_position_ids) {
  const graph::TensorId position_ids = plan.tensor("position_ids");
  std::erase_if(text_bindings, [&](const runtime::InputBinding& binding) { return binding.tensor == position_ids; });
  text_bindings.push_back({position_ids, std::as_bytes(mrope_position_ids)});
  for (const runtime::InputBinding& binding : models::vision_tower_bindings(plan, tensors.tower, std::as_bytes(std::span<const float>(tensors.pixel_values)))) {
    text_bindings.push_back(binding);
  }
  text_bindings.push_back(
      {plan.tensor(models::kVisionSpliceIndex), std::as_bytes(std::span<const int32_t>(tensors.splice_index))});
  return text_bindings;
}

}  // namespace surogate::train
