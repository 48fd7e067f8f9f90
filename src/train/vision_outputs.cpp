// A vision-language folder's HF output; see vision_outputs.h.
#include "train/vision_outputs.h"

#include <map>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "models/vision_model.h"
#include "models/vision_tower.h"
#include "train/model_outputs.h"

namespace surogate::train {
namespace fs = std::filesystem;

std::span<const char* const> vision_processor_file_names() {
  static constexpr const char* kNames[] = {"config.json", "preprocessor_config.json", "processor_config.json",
                                           "video_preprocessor_config.json", "chat_template.json"};
  return kNames;
}

std::string vision_peft_module_path(const std::string& checkpoint_name) {
  if (checkpoint_name.starts_with("model.") && !checkpoint_name.starts_with("model.language_model.")) {
    return "model.language_model." + checkpoint_name.substr(std::string_view("model.").size());
  }
  return checkpoint_name;
}

namespace {

// A trained or merged tensor is written in its source tensor's dtype, which must be a float one.
DType written_dtype(const fs::path& source_model_dir, const io::SafetensorsTensor& tensor) {
  if (tensor.dtype != DType::F32 && tensor.dtype != DType::BF16 && tensor.dtype != DType::F16) {
    fail_user("{}: tensor {} is {}; a trained or merged folder is written in float32, bfloat16 or float16",
              source_model_dir.string(), tensor.name, dtype_safetensors_name(tensor.dtype));
  }
  return tensor.dtype;
}

}  // namespace

void save_vision_model(const fs::path& output_dir, const fs::path& source_model_dir,
                       const io::ModelConfig& text, std::span<const models::VisionTowerParameter> tower,
                       std::span<const models::ParameterSpec> text_specs, std::span<const WeightView> text_weights,
                       std::span<const WeightView> tower_weights) {
  SUROGATE_CHECK(text_specs.size() == text_weights.size(), "one weight view per text parameter");
  // Each text tensor in the dtype the source checkpoint stores it in (its config.json is copied).
  std::map<std::string, DType> stored;
  models::load_vision_model_text_weights(
      source_model_dir, text, [&](const models::ParameterSpec& spec, const io::SafetensorsTensor& tensor) {
        stored[spec.name] = written_dtype(source_model_dir, tensor);
      });
  std::vector<DType> dtypes;
  for (const models::ParameterSpec& spec : text_specs) dtypes.push_back(stored.at(spec.name));
  // The tower as the folder holds it: each tensor's name, shape (the patch embedding's 5-D) and dtype.
  std::vector<models::ParameterSpec> tower_specs;
  std::vector<DType> tower_dtypes;
  std::vector<std::vector<std::byte>> copied;  // a frozen tower's bytes (moving the outer vector keeps them in place)
  std::vector<io::TensorToWrite> copied_tensors;
  models::load_visual_weights(
      source_model_dir, tower, [&](const models::VisionTowerParameter& parameter, const io::SafetensorsTensor& tensor) {
        if (!tower_weights.empty()) {
          tower_specs.push_back({parameter.name, tensor.name, tensor.shape});
          tower_dtypes.push_back(written_dtype(source_model_dir, tensor));
          return;
        }
        const std::vector<std::byte>& bytes = copied.emplace_back(tensor.bytes.begin(), tensor.bytes.end());
        copied_tensors.push_back({tensor.name, tensor.dtype, tensor.shape, bytes});
      });
  SUROGATE_CHECK(tower_weights.empty() || tower_weights.size() == tower_specs.size(),
                 "one weight view per tower parameter");
  std::vector<std::vector<uint16_t>> converted;
  std::vector<io::TensorToWrite> tensors = hf_weight_tensors(dtypes, text_specs, text_weights, converted);
  if (!tower_weights.empty()) {
    std::vector<io::TensorToWrite> tower = hf_weight_tensors(tower_dtypes, tower_specs, tower_weights, converted);
    tensors.insert(tensors.end(), tower.begin(), tower.end());
  }
  tensors.insert(tensors.end(), copied_tensors.begin(), copied_tensors.end());
  write_hf_weights(output_dir, tensors);
  copy_model_files(output_dir, source_model_dir, text, vision_processor_file_names());
}

}  // namespace surogate::train
