// A vision-language model folder (vision/vision_model_folder.h: Qwen2.5-VL or Qwen3-VL) as the
// trainer sees it, through one object: the text decoder's config (what LoRA targets, the recompute
// groups and the memory plan count layers of), the parameters (the text model's under the
// folder's own names, then the vision tower's), the training graph (models/vision_model.h or
// models/qwen3_vl_model.h), the weights read from the folder, and the image inputs each
// micro-batch binds (train/vision_batch_inputs.h).
// The trainer asks vision_stage() once; null means a text model and every path stays as it was.
//
// The graph is built for a fixed patch count (plan_patches): per_device_train_batch_size times
// the most patches one packed row of the training split holds, so one plan serves every
// micro-batch (train/vision_batch_inputs.h pads each batch's images up to it). The dry run reads
// the same rows first (train/vision_memory_plan.h) and plans the same count.
// The tower is frozen by default (no gradients, no optimizer state): LoRA adapts the text
// projections, full fine-tuning trains the text model, QLoRA and fp8_hybrid quantize its projections
// as a text model's, for either family. freeze_vision: false makes the tower's parameters
// trainable: full fine-tuning trains the tower and the merger (Qwen3-VL's DeepStack mergers too),
// and LoRA's target modules reach their linear layers (train/vision_tower_lora.h).
// config/feature_support_vision.cpp refuses what is not wired yet (sequence / pipeline parallelism).
// The evaluator builds the same model at the validation split's patch count; model folders are
// written by train/vision_outputs.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <filesystem>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "graph/op_registry.h"
#include "io/model_config.h"
#include "models/decoder_graph.h"
#include "models/lora.h"
#include "models/model_spec.h"
#include "models/qwen3_vl_model.h"
#include "models/vision_model.h"
#include "models/vision_tower.h"
#include "train/batch_inputs.h"
#include "train/checkpoint_io.h"
#include "train/model_weights.h"
#include "vision/image_processor.h"

namespace surogate::train {

// Either family's model config.
using VisionLanguageModel = std::variant<models::VisionModelConfig, models::Qwen3VLModelConfig>;

// The folder's config.json read as its vision-language graph reads it (`architecture`:
// vision::vision_language_architecture's answer); UserErrors name the file and key.
VisionLanguageModel read_vision_language_model(const std::string& model_dir, const std::string& architecture);
// Its text decoder (read as Qwen2ForCausalLM or Qwen3ForCausalLM) and its tower's parameters
// (the checkpoint's visual.* names, models/vision_tower.h or models/qwen3_vision_tower.h).
const io::ModelConfig& vision_text_config(const VisionLanguageModel& model);
std::vector<models::VisionTowerParameter> vision_tower_parameter_list(const VisionLanguageModel& model);

class VisionStage {
public:
  VisionStage(const Config& config, VisionLanguageModel model);

  // The decoder's config, read as Qwen2ForCausalLM or Qwen3ForCausalLM.
  const io::ModelConfig& text() const;
  const VisionLanguageModel& model() const { return model_; }
  // The text model's parameters (the folder's checkpoint names: transformers 5's
  // model.language_model.* or the hub's model.*), then the tower's (visual.*).
  const std::vector<models::ParameterSpec>& specs() const { return specs_; }

  // The patch counts the graphs are built for, set from the rows before planning: the training
  // plan's (the training split) and the evaluator's (the validation split, its own plan).
  int64_t plan_patches() const { return plan_patches_; }
  int64_t eval_patches() const { return eval_patches_; }
  int64_t merge_unit() const;  // patches per merged token (the least a plan holds)
  void set_plan_patches(const data::PackedRowsView& train, const data::PackedRowsView& eval, int64_t batch);
  // The dry run's (train/vision_memory_plan.h): from the most patches one training row holds, the
  // evaluator planned at the same count.
  void set_plan_patches(int64_t row_patches, int64_t batch);

  // The model's forward graph for `options` (the decoder's shape, dtype, kernels options), at
  // plan_patches() or at `patches`.
  models::DecoderGraph build_graph(const graph::OpRegistry& registry, const models::DecoderGraphOptions& options) const;
  models::DecoderGraph build_graph(const graph::OpRegistry& registry, const models::DecoderGraphOptions& options,
                                   int64_t patches) const;

  // freeze_vision: false: the tower and the merger(s) train.
  bool trains_tower() const { return train_tower_; }
  // The tower's module names lora_target_modules may name (train/vision_tower_lora.h); none
  // while the tower is frozen.
  std::vector<std::string> tower_lora_modules() const;
  // Appends the adapters on the tower's projections that lora.options.target_modules names.
  void add_tower_adapters(models::LoraSetup& lora) const;
  // The text adapters' checkpoint names (and so their PEFT keys) as this folder spells its text
  // model (the tower's already carry transformers' module path).
  void name_adapters(models::LoraSetup& lora) const;
  // adapter_config.json's extra keys: PEFT must adapt exactly the run's modules (Qwen2.5-VL's
  // tower's gate_proj / up_proj / down_proj share the text model's names; train/vision_tower_lora.h).
  void restrict_adapter_config(nlohmann::json& adapter_config, const models::LoraSetup& lora) const;

  // The folder's weights into `views` (specs() order, fp32), `written` called with each view's
  // index once it holds its values (QLoRA and fp8_hybrid quantize the text projections then:
  // train/base_weights.h; the tower is never quantized, models/qlora.h takes "layers." weights only).
  void load_weights(std::span<const WeightView> views, const WeightWritten& written = {}) const;
  // The trained or merged model as an HF folder (train/vision_outputs.h): `weights` in specs()
  // order (a frozen tower's are not read: the folder's are copied; a trained one's are written).
  void save_model(const std::filesystem::path& output_dir, std::span<const WeightView> weights) const;

  // The image inputs of every micro-batch bound to `plan` (one built by build_graph).
  BatchInputs::ExtraInputs batch_inputs(const compiler::ExecutionPlan& plan) const;

private:
  std::string model_dir_;
  VisionLanguageModel model_;
  vision::ImageProcessor processor_;
  std::vector<models::ParameterSpec> specs_;
  size_t text_parameters_ = 0;  // specs_' first ones are the text model's
  bool train_tower_ = false;    // !freeze_vision
  int64_t plan_patches_ = 0;
  int64_t eval_patches_ = 0;
};

// The stage of config.model's folder, or null when it is not a vision-language model.
std::shared_ptr<VisionStage> vision_stage(const Config& config);

}  // namespace surogate::train
