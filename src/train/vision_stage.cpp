// A vision-language folder as the trainer sees it; see vision_stage.h.
#include "train/vision_stage.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/bfloat16.h"
#include "core/error.h"
#include "data/pipeline.h"
#include "io/safetensors.h"
#include "models/qwen3_vision_tower.h"
#include "models/vision_tower.h"
#include "ops/parallel_for.h"
#include "train/vision_batch_inputs.h"
#include "train/vision_outputs.h"
#include "train/vision_tower_lora.h"
#include "vision/vision_model_folder.h"

namespace surogate::train {
namespace {

// The processor the data pipeline uses for this configuration (the folder's, max_pixels applied).
vision::ImageProcessor data_processor(const Config& config) {
  const data::DataSettings settings = data::data_settings_from_config(config);
  SUROGATE_CHECK(settings.vision.has_value(), "a vision-language folder has the image stage on");
  return vision::ImageProcessor(settings.vision->processor);
}

std::vector<models::ParameterSpec> stage_specs(const VisionLanguageModel& model, const std::string& model_dir) {
  std::vector<models::ParameterSpec> specs = models::vision_model_text_parameters(vision_text_config(model), model_dir);
  for (const models::VisionTowerParameter& parameter : vision_tower_parameter_list(model)) {
    specs.push_back({parameter.name, parameter.name, parameter.shape});
  }
  return specs;
}

// What one micro-batch's image inputs point into, kept until the next bind.
struct BoundImages {
  VisionBatchTensors tensors;
  std::vector<uint16_t> pixel_values_bf16;  // the CUDA plan's dtype
  std::vector<uint16_t> interpolation_weights_bf16;  // Qwen3-VL's, likewise
  int64_t micro_batches = 0;
};

// `values` rounded to bf16 into `storage` (kept between micro-batches, so no fresh pages each
// time), in contiguous chunks on threads: a micro-batch's pixel values are tens of millions.
void round_to_bf16(std::span<const float> values, std::vector<uint16_t>& storage) {
  storage.resize(values.size());
  constexpr size_t kChunk = size_t{1} << 20;  // a thread's share is whole chunks of a million values
  const auto chunks = static_cast<int64_t>((values.size() + kChunk - 1) / kChunk);
  ops::parallel_for(chunks, [&](int64_t chunk) {
    const size_t begin = static_cast<size_t>(chunk) * kChunk, end = std::min(values.size(), begin + kChunk);
    std::transform(values.begin() + begin, values.begin() + end, storage.begin() + begin, float_to_bf16);
  });
}

// `values` as the plan reads them: fp32 as they are, or the bf16 copy made into `storage`.
std::span<const std::byte> plan_bytes(std::span<const float> values, bool bf16, std::vector<uint16_t>& storage) {
  if (!bf16) return std::as_bytes(values);
  round_to_bf16(values, storage);
  return std::as_bytes(std::span<const uint16_t>(storage));
}

}  // namespace

VisionLanguageModel read_vision_language_model(const std::string& model_dir, const std::string& architecture) {
  if (architecture == "Qwen3VLForConditionalGeneration") return models::Qwen3VLModelConfig::from_folder(model_dir);
  return models::VisionModelConfig::from_folder(model_dir);
}

const io::ModelConfig& vision_text_config(const VisionLanguageModel& model) {
  return std::visit([](const auto& config) -> const io::ModelConfig& { return config.text; }, model);
}

std::vector<models::VisionTowerParameter> vision_tower_parameter_list(const VisionLanguageModel& model) {
  if (const auto* qwen3 = std::get_if<models::Qwen3VLModelConfig>(&model)) {
    return models::qwen3_vision_tower_parameters(qwen3->vision);
  }
  return models::vision_tower_parameters(std::get<models::VisionModelConfig>(model).vision);
}

VisionStage::VisionStage(const Config& config, VisionLanguageModel model)
    : model_dir_(config.model.name_or_path),
      model_(std::move(model)),
      processor_(data_processor(config)),
      specs_(stage_specs(model_, model_dir_)),
      text_parameters_(models::vision_model_text_parameters(text(), model_dir_).size()),
      train_tower_(!config.model.freeze_vision) {}

const io::ModelConfig& VisionStage::text() const { return vision_text_config(model_); }

int64_t VisionStage::merge_unit() const {
  return std::visit([](const auto& config) { return config.vision.merge_unit(); }, model_);
}

void VisionStage::set_plan_patches(const data::PackedRowsView& train, const data::PackedRowsView& eval,
                                   int64_t batch) {
  // A plan needs a tower of at least one merged patch; a split without images binds padding only.
  const int patch_size = std::visit([](const auto& config) { return config.vision.patch_size; }, model_);
  plan_patches_ = std::max(vision_patch_capacity(train, batch, patch_size), merge_unit());
  eval_patches_ = std::max(vision_patch_capacity(eval, batch, patch_size), merge_unit());
}

void VisionStage::set_plan_patches(int64_t row_patches, int64_t batch) {
  // The dry run reads the training rows only: the evaluator is planned at the training count.
  plan_patches_ = std::max(batch * row_patches, merge_unit());
  eval_patches_ = plan_patches_;
}

models::DecoderGraph VisionStage::build_graph(const graph::OpRegistry& registry,
                                              const models::DecoderGraphOptions& options) const {
  return build_graph(registry, options, plan_patches_);
}

models::DecoderGraph VisionStage::build_graph(const graph::OpRegistry& registry,
                                              const models::DecoderGraphOptions& options, int64_t patches) const {
  SUROGATE_CHECK(patches > 0, "the plan's patch count is set before the graph is built");
  models::DecoderGraph graph;
  if (const auto* qwen3 = std::get_if<models::Qwen3VLModelConfig>(&model_)) {
    models::Qwen3VLModelGraph built =
        models::build_qwen3_vl_model_graph(*qwen3, registry, options, patches, train_tower_);
    graph.graph = std::move(built.graph);
    graph.loss = built.loss;
    return graph;
  }
  models::VisionModelGraph built = models::build_vision_model_graph(std::get<models::VisionModelConfig>(model_),
                                                                    registry, options, patches, train_tower_);
  graph.graph = std::move(built.graph);
  graph.loss = built.loss;
  return graph;
}

std::vector<std::string> VisionStage::tower_lora_modules() const {
  if (!train_tower_) return {};
  return vision_tower_lora_modules(model_);
}

void VisionStage::add_tower_adapters(models::LoraSetup& lora) const {
  if (!train_tower_) return;
  for (models::LoraAdapter& adapter :
       vision_tower_lora_adapters(model_, lora.options.target_modules, lora.options.rank)) {
    lora.adapters.push_back(std::move(adapter));
  }
}

void VisionStage::name_adapters(models::LoraSetup& lora) const {
  // PEFT names modules by the model transformers builds, whatever the checkpoint's layout: since
  // transformers 4.52 the text model is model.language_model.
  for (models::LoraAdapter& adapter : lora.adapters) {
    if (is_vision_tower_adapter(adapter)) continue;
    std::string& name = adapter.base.hf_name;
    name = vision_peft_module_path(name);
    adapter.a.hf_name = models::peft_key(name, 'A');
    adapter.b.hf_name = models::peft_key(name, 'B');
  }
}

void VisionStage::restrict_adapter_config(nlohmann::json& adapter_config, const models::LoraSetup& lora) const {
  exclude_unadapted_vision_modules(adapter_config, lora.adapters);
}

void VisionStage::load_weights(std::span<const WeightView> views, const WeightWritten& written) const {
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < views.size(); ++i) by_name[views[i].name] = i;
  SUROGATE_CHECK(by_name.size() == specs_.size(), "one weight view per parameter of the vision-language model");
  auto read = [&](const std::string& name, const io::SafetensorsTensor& tensor) {
    const size_t index = by_name.at(name);
    io::read_tensor_as_float32(tensor, views[index].values);
    if (written) written(index);
  };
  models::load_vision_model_text_weights(model_dir_, text(), [&](const models::ParameterSpec& spec,
                                                                 const io::SafetensorsTensor& tensor) {
    read(spec.name, tensor);
  });
  // The patch embedding's 5-D Conv3d weight has pixel_values' column order: its bytes are the 2-D weight's.
  models::load_visual_weights(model_dir_, vision_tower_parameter_list(model_),
                              [&](const models::VisionTowerParameter& parameter, const io::SafetensorsTensor& tensor) {
                                read(parameter.name, tensor);
                              });
}

void VisionStage::save_model(const std::filesystem::path& output_dir, std::span<const WeightView> weights) const {
  SUROGATE_CHECK(weights.size() == specs_.size(), "one weight view per parameter of the vision-language model");
  // A trained tower (freeze_vision: false) is written from `weights`; a frozen one copied.
  save_vision_model(output_dir, model_dir_, text(), vision_tower_parameter_list(model_),
                    std::span(specs_).first(text_parameters_), weights.first(text_parameters_),
                    train_tower_ ? weights.subspan(text_parameters_) : std::span<const WeightView>());
}

BatchInputs::ExtraInputs VisionStage::batch_inputs(const compiler::ExecutionPlan& plan) const {
  const graph::TensorType& pixels = plan.graph.tensor(plan.tensor(models::kVisionPixelValues)).type;
  const int64_t plan_patches = pixels.numel() / pixels.shape.back();  // [P, ·] or Qwen3-VL's [1, P, ·]
  const bool bf16 = pixels.dtype == DType::BF16;
  auto bound = std::make_shared<BoundImages>();
  return [&plan, plan_patches, bf16, bound, model = model_, processor = processor_, where = model_dir_](
             const data::PackedBatch& batch, std::vector<runtime::InputBinding> text) {
    const std::string micro_batch = fmt::format("{}: micro-batch {}", where, bound->micro_batches++);
    if (const auto* qwen3 = std::get_if<models::Qwen3VLModelConfig>(&model)) {
      bound->tensors = vision_batch_tensors(batch, processor, *qwen3, micro_batch, plan_patches);
      const std::span<const std::byte> pixel_values =
          plan_bytes(bound->tensors.pixel_values, bf16, bound->pixel_values_bf16);
      const std::span<const std::byte> weights =
          plan_bytes(bound->tensors.qwen3_tower.interpolation_weights, bf16, bound->interpolation_weights_bf16);
      return qwen3_vl_batch_bindings(plan, std::move(text), bound->tensors, batch.mrope_position_ids, pixel_values,
                                     weights);
    }
    bound->tensors = vision_batch_tensors(batch, processor, std::get<models::VisionModelConfig>(model), micro_batch,
                                          plan_patches);
    std::vector<runtime::InputBinding> bindings =
        vision_batch_bindings(plan, std::move(text), bound->tensors, batch.mrope_position_ids);
    if (!bf16) return bindings;
    // The CUDA plan reads pixel_values in bf16: the binding points at a rounded copy instead.
    const std::span<const std::byte> rounded = plan_bytes(bound->tensors.pixel_values, true, bound->pixel_values_bf16);
    const graph::TensorId pixel_values = plan.tensor(models::kVisionPixelValues);
    for (runtime::InputBinding& binding : bindings) {
      if (binding.tensor == pixel_values) binding.data = rounded;
    }
    return bindings;
  };
}

std::shared_ptr<VisionStage> vision_stage(const Config& config) {
  const std::optional<std::string> architecture = vision::vision_language_architecture(config.model.name_or_path);
  if (!architecture) return nullptr;
  return std::make_shared<VisionStage>(config, read_vision_language_model(config.model.name_or_path, *architecture));
}

}  // namespace surogate::train
