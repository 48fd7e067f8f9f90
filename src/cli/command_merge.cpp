// `surogate merge --model BASE --adapter ADAPTER --output OUT`: merges a PEFT LoRA adapter
// (adapter_config.json + adapter_model.safetensors, e.g. a `surogate sft` LoRA output) into its
// base model and writes a Hugging Face model folder: W + scaling · B · A in fp32 for every adapted
// projection, saved in the base model's torch_dtype with its config, generation config and
// tokenizer files (train/model_outputs.h). The adapter is checked against the base model first
// (models/adapter_io.h), so a mismatched pair is one clear error and nothing is written.
// `--model_definition FILE` (the Python DSL's model.py, or a JSON IR that names its weights) gives
// the weight table of an architecture Surogate has no C++ for (models/defined_weights.h). A
// Qwen2.5-VL or Qwen3-VL folder merges its adapter (the text model's projections, and the
// tower's when the run adapted them) and writes the folder as train/vision_outputs.h does.
#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/error.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "models/adapter_io.h"
#include "models/defined_weights.h"
#include "models/model_spec.h"
#include "models/python_definition.h"
#include "models/vision_model.h"
#include "models/weight_io.h"
#include "train/model_outputs.h"
#include "train/vision_outputs.h"
#include "train/vision_stage.h"
#include "train/vision_tower_lora.h"
#include "vision/vision_model_folder.h"

namespace surogate::cli {
namespace {
namespace fs = std::filesystem;

struct MergeArguments {
  std::string model;
  std::string adapter;
  std::string output;
  std::string model_definition;
};

// A Qwen2.5-VL or Qwen3-VL folder (docs/vision.md; `architecture`: config.json's): the adapter (PEFT's
// keys under model.language_model for the text model, model.visual for the tower and the mergers,
// which a freeze_vision: false run adapts) merged, the folder written as train/vision_outputs.h
// does: the tower copied unchanged unless the adapter reaches it.
int merge_vision_adapter(const fs::path& model, const std::string& architecture, const fs::path& adapter_dir,
                         const fs::path& output) {
  const train::VisionLanguageModel folder = train::read_vision_language_model(model.string(), architecture);
  const io::ModelConfig& text = train::vision_text_config(folder);
  const std::vector<models::VisionTowerParameter> tower_parameters = train::vision_tower_parameter_list(folder);
  std::vector<models::ParameterSpec> specs = models::vision_model_text_parameters(text, model);
  const size_t text_parameters = specs.size();
  std::vector<models::ParameterSpec> peft_specs = specs;
  for (models::ParameterSpec& spec : peft_specs) spec.hf_name = train::vision_peft_module_path(spec.hf_name);
  // The tower's projections under model.visual (not the patch embedding), which a
  // freeze_vision: false run adapts.
  const std::vector<std::string>& tower_modules = train::vision_tower_lora_modules(folder);
  for (const models::LoraAdapter& projection : train::vision_tower_lora_adapters(folder, tower_modules, 1)) {
    peft_specs.push_back(projection.base);
  }
  for (const models::VisionTowerParameter& parameter : tower_parameters) {
    specs.push_back({parameter.name, parameter.name, parameter.shape});
  }
  const models::PeftAdapter adapter = models::load_peft_adapter(adapter_dir, text, peft_specs, tower_modules);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < specs.size(); ++i) index[specs[i].name] = i;
  std::vector<std::vector<float>> weights(specs.size());
  const auto read = [&](const std::string& name, const io::SafetensorsTensor& tensor) {
    weights[index.at(name)] = io::read_tensor_as_float32(tensor);
  };
  models::load_vision_model_text_weights(
      model, text, [&](const models::ParameterSpec& spec, const io::SafetensorsTensor& tensor) { read(spec.name, tensor); });
  models::load_visual_weights(model, tower_parameters,
                              [&](const models::VisionTowerParameter& parameter, const io::SafetensorsTensor& tensor) {
                                read(parameter.name, tensor);
                              });
  models::merge_peft_adapter(adapter, specs, weights);
  std::vector<train::WeightView> views;
  for (size_t i = 0; i < specs.size(); ++i) views.push_back({specs[i].name, specs[i].shape, weights[i]});
  const std::span<const train::WeightView> all(views);
  const auto tower = std::count_if(adapter.matrices.begin(), adapter.matrices.end(),
                                   [](const models::AdapterMatrices& m) { return m.base.name.starts_with("visual."); });
  train::save_vision_model(output, model, text, tower_parameters, std::span(specs).first(text_parameters),
                           all.first(text_parameters),
                           tower > 0 ? all.subspan(text_parameters) : std::span<const train::WeightView>());
  fmt::print("merged {} adapted projections (scaling {}) into {} ({})\n", adapter.matrices.size(), adapter.scaling,
             output.string(), tower > 0 ? fmt::format("{} of them on the vision tower", tower)
                                        : std::string("the vision tower copied unchanged"));
  return 0;
}

int run_merge(const MergeArguments& arguments) {
  const fs::path model(arguments.model), adapter_dir(arguments.adapter), output(arguments.output);
  if (!fs::is_directory(model)) fail_user("--model {}: not a folder; give the base model's Hugging Face folder", arguments.model);
  if (!fs::is_directory(adapter_dir)) fail_user("--adapter {}: not a folder; give a PEFT adapter folder", arguments.adapter);
  if (fs::exists(output) && (fs::equivalent(output, model) || fs::equivalent(output, adapter_dir))) {
    fail_user("--output {}: must not be the base model or adapter folder", arguments.output);
  }
  const std::string& definition = arguments.model_definition;
  if (!definition.empty() && !models::is_python_definition(definition) && !fs::is_regular_file(definition)) {
    fail_user("--model_definition {}: not a file; give the model's definition (the DSL's model.py, or its JSON IR)",
              definition);
  }
  if (const std::optional<std::string> architecture = vision::vision_language_architecture(model)) {
    if (!definition.empty()) {
      fail_user("--model_definition {}: {} is a vision-language folder, whose weights are the built-in {} "
                "model's; leave --model_definition out", definition, arguments.model, *architecture);
    }
    return merge_vision_adapter(model, *architecture, adapter_dir, output);
  }
  io::ModelConfig config =
      models::load_model_config(model, {definition, "--model_definition " + definition});
  std::vector<models::ParameterSpec> specs = models::parameter_specs(config);
  models::PeftAdapter adapter = models::load_peft_adapter(adapter_dir, config);
  std::vector<std::vector<float>> weights = models::load_hf_weights_as_float32(model, specs);
  models::merge_peft_adapter(adapter, specs, weights);
  std::vector<train::WeightView> views;
  for (size_t i = 0; i < specs.size(); ++i) views.push_back({specs[i].name, specs[i].shape, weights[i]});
  train::save_hf_model(output, config, model, specs, views);
  fmt::print("merged {} adapted projections (scaling {}) into {}\n", adapter.matrices.size(), adapter.scaling,
             output.string());
  return 0;
}

}  // namespace

Command register_merge_command(CLI::App& parent) {
  auto arguments = std::make_shared<MergeArguments>();
  CLI::App* app = parent.add_subcommand("merge", "Merge a LoRA adapter into its base model (writes an HF model folder)");
  app->add_option("--model", arguments->model, "Base model folder (config.json + safetensors)")->required();
  app->add_option("--adapter", arguments->adapter, "PEFT adapter folder (adapter_config.json + adapter_model.safetensors)")
      ->required();
  app->add_option("--output", arguments->output, "Folder for the merged model")->required();
  app->add_option("--model_definition", arguments->model_definition,
                  "The model's definition (the DSL's model.py or its JSON IR), for its weight table");
  return Command{app, [arguments] { return run_merge(*arguments); }};
}

const CommandRegistration kMergeRegistration{90, register_merge_command};

}  // namespace surogate::cli
