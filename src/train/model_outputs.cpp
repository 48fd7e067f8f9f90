// HF model folder output; see model_outputs.h.
#include "train/model_outputs.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/bfloat16.h"
#include "core/error.h"
#include "io/safetensors_writer.h"
#include "models/adapter_io.h"
#include "train/checkpoint_store.h"

namespace surogate::train {
namespace fs = std::filesystem;

std::span<const char* const> tokenizer_file_names() {
  static constexpr const char* kNames[] = {"tokenizer.json",   "tokenizer_config.json", "special_tokens_map.json",
                                           "tokenizer.model",  "vocab.json",            "merges.txt",
                                           "added_tokens.json", "chat_template.jinja"};
  return kNames;
}

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream stream(path, std::ios::binary);
  std::stringstream text;
  text << stream.rdbuf();
  return text.str();
}

nlohmann::json generation_config(const io::ModelConfig& config) {
  nlohmann::json json = nlohmann::json::object();
  if (config.bos_token_id) json["bos_token_id"] = *config.bos_token_id;
  if (config.eos_token_ids.size() == 1) json["eos_token_id"] = config.eos_token_ids[0];
  if (config.eos_token_ids.size() > 1) json["eos_token_id"] = config.eos_token_ids;
  if (config.pad_token_id) json["pad_token_id"] = *config.pad_token_id;
  return json;
}

}  // namespace

std::vector<io::TensorToWrite> hf_weight_tensors(std::span<const DType> dtypes,
                                                 std::span<const models::ParameterSpec> specs,
                                                 std::span<const WeightView> weights,
                                                 std::vector<std::vector<uint16_t>>& converted) {
  SUROGATE_CHECK(specs.size() == weights.size() && specs.size() == dtypes.size(), "one weight view per parameter");
  std::vector<io::TensorToWrite> tensors;
  converted.reserve(converted.size() + specs.size());  // (a moved inner vector keeps its buffer: spans stay valid)
  for (size_t i = 0; i < specs.size(); ++i) {
    const DType dtype = dtypes[i];
    std::span<const float> values = weights[i].values;
    std::span<const std::byte> bytes = std::as_bytes(values);
    if (dtype != DType::F32) {
      std::vector<uint16_t>& half = converted.emplace_back(values.size());
      for (size_t j = 0; j < values.size(); ++j) {
        half[j] = dtype == DType::BF16 ? float_to_bf16(values[j]) : float_to_f16(values[j]);
      }
      bytes = std::as_bytes(std::span<const uint16_t>(half));
    }
    const size_t element = dtype_size_bytes(dtype);
    for (models::HfPiece& piece : models::hf_pieces(specs[i])) {  // one tensor per expert of a stacked parameter
      tensors.push_back({std::move(piece.name), dtype, piece.shape,
                         bytes.subspan(static_cast<size_t>(piece.offset) * element,
                                       static_cast<size_t>(graph::shape_numel(piece.shape)) * element)});
    }
  }
  return tensors;
}

void write_hf_weights(const fs::path& output_dir, std::span<const io::TensorToWrite> tensors, uint64_t max_shard_bytes) {
  fs::create_directories(output_dir);
  // Remove weights of an earlier save so a folder never mixes shardings.
  for (const auto& entry : fs::directory_iterator(output_dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("model") && (name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json"))) {
      fs::remove(entry.path());
    }
  }
  io::write_safetensors_sharded(output_dir, tensors, max_shard_bytes, {{"format", "pt"}});
}

void copy_model_files(const fs::path& output_dir, const fs::path& source_model_dir, const io::ModelConfig& config,
                      std::span<const char* const> extra_names) {
  const fs::path generation = source_model_dir / "generation_config.json";
  write_file_atomically(output_dir / "generation_config.json",
                        fs::exists(generation) ? read_text(generation) : generation_config(config).dump(2) + "\n");
  for (std::span<const char* const> names : {tokenizer_file_names(), extra_names}) {
    for (const char* name : names) {
      const fs::path source = source_model_dir / name;
      if (fs::exists(source)) write_file_atomically(output_dir / name, read_text(source));
    }
  }
}

void save_hf_model(const fs::path& output_dir, const io::ModelConfig& config, const fs::path& source_model_dir,
                   std::span<const models::ParameterSpec> specs, std::span<const WeightView> weights,
                   uint64_t max_shard_bytes) {
  const DType dtype = config.torch_dtype.value_or(DType::F32);
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16) {
    fail_user("model torch_dtype {} cannot be written; use float32, bfloat16 or float16", dtype_safetensors_name(dtype));
  }
  // Converted copies live until the writer is done.
  std::vector<std::vector<uint16_t>> converted;
  const std::vector<DType> dtypes(specs.size(), dtype);
  const std::vector<io::TensorToWrite> tensors = hf_weight_tensors(dtypes, specs, weights, converted);
  write_hf_weights(output_dir, tensors, max_shard_bytes);
  io::save_model_config(config, output_dir);
  copy_model_files(output_dir, source_model_dir, config);
}

fs::path merged_model_dir(const fs::path& output_dir) { return output_dir / "merged"; }

std::vector<std::vector<float>> merge_lora_weights(const models::LoraSetup& lora,
                                                   std::span<const models::ParameterSpec> specs,
                                                   std::span<const WeightView> weights) {
  auto values_of = [&](const std::string& name) -> std::span<const float> {
    for (const WeightView& weight : weights) {
      if (weight.name == name) return weight.values;
    }
    SUROGATE_CHECK(false, "no weight view named {}", name);
    return {};
  };
  std::vector<std::vector<float>> merged;
  for (const models::ParameterSpec& spec : specs) {
    std::span<const float> values = values_of(spec.name);
    merged.emplace_back(values.begin(), values.end());
  }
  models::PeftAdapter adapter;
  adapter.scaling = models::lora_scaling(lora.options);
  for (const models::LoraAdapter& entry : lora.adapters) {
    std::span<const float> a = values_of(entry.a.name), b = values_of(entry.b.name);
    adapter.matrices.push_back({entry.base, {a.begin(), a.end()}, {b.begin(), b.end()}, lora.options.rank});
  }
  models::merge_peft_adapter(adapter, specs, merged);
  return merged;
}

void save_peft_output(const fs::path& output_dir, const fs::path& source_model_dir,
                      const std::vector<models::LoraAdapter>& adapters, std::span<const WeightView> weights,
                      const nlohmann::json& adapter_config) {
  models::save_peft_adapter(
      output_dir, adapters,
      [&](const models::ParameterSpec& matrix) -> std::span<const float> {
        for (const WeightView& weight : weights) {
          if (weight.name == matrix.name) return weight.values;
        }
        SUROGATE_CHECK(false, "no weight view for adapter matrix {}", matrix.name);
        return {};
      },
      adapter_config);
  for (const char* name : tokenizer_file_names()) {
    const fs::path source = source_model_dir / name;
    if (fs::exists(source)) write_file_atomically(output_dir / name, read_text(source));
  }
}

}  // namespace surogate::train
