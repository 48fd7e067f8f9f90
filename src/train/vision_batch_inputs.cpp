// See vision_batch_inputs.h.
#include "train/vision_batch_inputs.h"

#include <algorithm>

#include "core/error.h"
#include "models/vision_tower.h"

namespace surogate::train {
namespace {

// The processor must cut the patches the tower's patch embedding reads (either family's tower).
template <typename Tower>
void require_matching_geometry(const vision::ImageProcessorConfig& processor, const Tower& tower,
                               std::string_view where) {
  if (processor.patch_size != tower.patch_size || processor.temporal_patch_size != tower.temporal_patch_size ||
      processor.merge_size != tower.spatial_merge_size) {
    fail_user("{}: the image processor's patch_size {}, temporal_patch_size {}, merge_size {} differ from "
              "config.json's vision_config ({}, {}, {})",
              where, processor.patch_size, processor.temporal_patch_size, processor.merge_size, tower.patch_size,
              tower.temporal_patch_size, tower.spatial_merge_size);
  }
}

// One image of zero pixels filling the plan's remaining patches: 1 frame, merge patches high.
template <typename Tower>
void add_padding_image(VisionBatchTensors& tensors, int64_t plan_patches, const Tower& tower,
                       std::vector<std::array<int64_t, 3>>& tower_grids, std::string_view where) {
  const int64_t padding = plan_patches - tensors.patches;
  if (padding < 0) {
    fail_user("{}: the batch's images have {} patches, more than the {} the training plan was built for", where,
              tensors.patches, plan_patches);
  }
  if (padding == 0) return;
  if (padding % tower.merge_unit() != 0) {
    fail_user("{}: the plan's {} patches leave {} for padding, not whole merged patches of {}", where, plan_patches,
              padding, tower.merge_unit());
  }
  tower_grids.push_back({1, tower.spatial_merge_size, padding / tower.spatial_merge_size});
  tensors.pixel_values.resize(static_cast<size_t>(plan_patches * tower.patch_columns()), 0.0f);
  tensors.padding_patches = padding;
  tensors.patches = plan_patches;
}

}  // namespace

int64_t vision_patch_capacity(const data::PackedRowsView& rows, int64_t batch, int64_t patch_size) {
  if (!rows.vision()) return 0;
  int64_t most = 0;
  for (size_t row = 0; row < rows.rows(); ++row) {
    int64_t patches = 0;
    for (uint64_t image = rows.row_image_offsets[row]; image < rows.row_image_offsets[row + 1]; ++image) {
      const int64_t width = rows.image_sizes[2 * image], height = rows.image_sizes[2 * image + 1];
      patches += (width / patch_size) * (height / patch_size);
    }
    most = std::max(most, patches);
  }
  return batch * most;
}

namespace {

// The batch's pixel values, grids and splice index, and the grids the tower runs (the padding
// image's appended when the plan has more patches than the batch).
template <typename Model>
VisionBatchTensors batch_images(const data::PackedBatch& batch, const vision::ImageProcessor& processor,
                                const Model& config, std::string_view where, std::optional<int64_t> plan_patches,
                                std::vector<std::array<int64_t, 3>>& tower_grids) {
  require_matching_geometry(processor.config(), config.vision, where);
  const int64_t tokens = batch.batch_size * batch.sequence_length;
  if (static_cast<int64_t>(batch.mrope_position_ids.size()) != 3 * tokens) {
    fail_user("{}: the batch carries {} M-RoPE positions for [3, {}, {}] tokens", where,
              batch.mrope_position_ids.size(), batch.batch_size, batch.sequence_length);
  }
  VisionBatchTensors tensors;
  if (!batch.images.empty()) {
    // Room for the plan's padding image too (add_padding_image): ~90 MB not copied a micro-batch.
    const size_t plan_values = plan_patches ? static_cast<size_t>(*plan_patches * config.vision.patch_columns()) : 0;
    vision::ProcessedImages processed = processor.patches(batch.images, plan_values);
    tensors.pixel_values = std::move(processed.pixel_values);
    tensors.grid_thw = std::move(processed.grid_thw);
    tensors.patches = static_cast<int64_t>(tensors.pixel_values.size()) / config.vision.patch_columns();
  }
  // The splice reads the batch's own merged patches only: the padding image's come after them.
  tensors.splice_index =
      models::vision_splice_index(batch.input_ids, batch.batch_size, batch.sequence_length, config.image_token_id,
                                  tensors.patches / config.vision.merge_unit(), where);
  tower_grids = tensors.grid_thw;
  if (plan_patches) add_padding_image(tensors, *plan_patches, config.vision, tower_grids, where);
  return tensors;
}

// `text_bindings` with position_ids bound to the batch's [3, B, T] M-RoPE positions instead.
std::vector<runtime::InputBinding> with_mrope_positions(const compiler::ExecutionPlan& plan,
                                                        std::vector<runtime::InputBinding> text_bindings,
                                                        std::span<const int32_t> mrope_position_ids) {
  const graph::TensorId position_ids = plan.tensor("position_ids");
  std::erase_if(text_bindings, [&](const runtime::InputBinding& binding) { return binding.tensor == position_ids; });
  text_bindings.push_back({position_ids, std::as_bytes(mrope_position_ids)});
  return text_bindings;
}

}  // namespace

VisionBatchTensors vision_batch_tensors(const data::PackedBatch& batch, const vision::ImageProcessor& processor,
                                        const models::VisionModelConfig& config, std::string_view where,
                                        std::optional<int64_t> plan_patches) {
  std::vector<std::array<int64_t, 3>> tower_grids;
  VisionBatchTensors tensors = batch_images(batch, processor, config, where, plan_patches, tower_grids);
  tensors.tower = vision::vision_tower_indices(tower_grids, static_cast<int>(config.vision.spatial_merge_size),
                                               static_cast<int>(config.vision.window_size),
                                               static_cast<int>(config.vision.patch_size));
  return tensors;
}

VisionBatchTensors vision_batch_tensors(const data::PackedBatch& batch, const vision::ImageProcessor& processor,
                                        const models::Qwen3VLModelConfig& config, std::string_view where,
                                        std::optional<int64_t> plan_patches) {
  std::vector<std::array<int64_t, 3>> tower_grids;
  VisionBatchTensors tensors = batch_images(batch, processor, config, where, plan_patches, tower_grids);
  tensors.qwen3_tower = models::qwen3_vision_tower_inputs(config.vision, tower_grids);
  tensors.deepstack_index =
      models::vision_deepstack_index(tensors.splice_index, batch.batch_size * batch.sequence_length);
  return tensors;
}

std::vector<runtime::InputBinding> vision_batch_bindings(const compiler::ExecutionPlan& plan,
                                                         std::vector<runtime::InputBinding> text_bindings,
                                                         const VisionBatchTensors& tensors,
                                                         std::span<const int32_t> mrope_position_ids) {
  std::vector<runtime::InputBinding> bindings = with_mrope_positions(plan, std::move(text_bindings), mrope_position_ids);
  for (const runtime::InputBinding& binding : models::vision_tower_bindings(plan, tensors.tower, std::as_bytes(std::span<const float>(tensors.pixel_values)))) {
    bindings.push_back(binding);
  }
  bindings.push_back(
      {plan.tensor(models::kVisionSpliceIndex), std::as_bytes(std::span<const int32_t>(tensors.splice_index))});
  return bindings;
}

std::vector<runtime::InputBinding> qwen3_vl_batch_bindings(const compiler::ExecutionPlan& plan,
                                                           std::vector<runtime::InputBinding> text_bindings,
                                                           const VisionBatchTensors& tensors,
                                                           std::span<const int32_t> mrope_position_ids,
                                                           std::span<const std::byte> pixel_values,
                                                           std::span<const std::byte> interpolation_weights) {
  std::vector<runtime::InputBinding> bindings = with_mrope_positions(plan, std::move(text_bindings), mrope_position_ids);
  for (const runtime::InputBinding& binding :
       models::qwen3_vision_tower_bindings(plan, tensors.qwen3_tower, pixel_values, interpolation_weights)) {
    bindings.push_back(binding);
  }
  auto ints = [](const std::vector<int32_t>& values) { return std::as_bytes(std::span<const int32_t>(values)); };
  bindings.push_back({plan.tensor(models::kVisionSpliceIndex), ints(tensors.splice_index)});
  bindings.push_back({plan.tensor(models::kVisionDeepstackIndex), ints(tensors.deepstack_index)});
  return bindings;
}

}  // namespace surogate::train
