// The trained model as the ecosystem reads it: a Hugging Face model folder in output_dir with
// config.json (io::save_model_config), the weights under their HF names in the model's dtype
// (torch_dtype; float32 when unset), sharded like save_pretrained (5 GB shards + index),
// generation_config.json (copied from the base model, else made from the token ids) and the
// tokenizer files copied from the model folder. Files are written atomically. LoRA runs write a
// PEFT adapter folder instead (save_peft_output).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "io/safetensors_writer.h"
#include "models/lora.h"
#include "models/model_spec.h"
#include "train/checkpoint_io.h"

namespace surogate::train {

// The tokenizer / chat-template files copied next to the weights when present.
std::span<const char* const> tokenizer_file_names();

void save_hf_model(const std::filesystem::path& output_dir, const io::ModelConfig& config,
                   const std::filesystem::path& source_model_dir, std::span<const models::ParameterSpec> specs,
                   std::span<const WeightView> weights, uint64_t max_shard_bytes = 5'000'000'000);

// save_hf_model's parts, for folders whose config.json is not io::save_model_config's
// (train/vision_outputs.h):
// the weights as it writes them, specs[i] in dtypes[i] under its HF name(s); `converted` keeps the
// 16-bit copies the tensors point into.
std::vector<io::TensorToWrite> hf_weight_tensors(std::span<const DType> dtypes,
                                                 std::span<const models::ParameterSpec> specs,
                                                 std::span<const WeightView> weights,
                                                 std::vector<std::vector<uint16_t>>& converted);
// `tensors` sharded into output_dir (an earlier save's weights removed first).
void write_hf_weights(const std::filesystem::path& output_dir, std::span<const io::TensorToWrite> tensors,
                      uint64_t max_shard_bytes = 5'000'000'000);
// generation_config.json (the source's, else made from `config`'s token ids), the tokenizer files
// and `extra_names` copied from source_model_dir when present.
void copy_model_files(const std::filesystem::path& output_dir, const std::filesystem::path& source_model_dir,
                      const io::ModelConfig& config, std::span<const char* const> extra_names = {});

// A LoRA run's output: the PEFT adapter (models/adapter_io.h: adapter_config.json +
// adapter_model.safetensors) plus the base model's tokenizer files, so the folder is what
// `PeftModel.from_pretrained(base, folder)` and `AutoTokenizer.from_pretrained(folder)` read.
// `weights` holds (at least) every adapter matrix, by engine name.
void save_peft_output(const std::filesystem::path& output_dir, const std::filesystem::path& source_model_dir,
                      const std::vector<models::LoraAdapter>& adapters, std::span<const WeightView> weights,
                      const nlohmann::json& adapter_config);

// Where merge_adapter puts the merged HF model folder: output_dir/merged.
std::filesystem::path merged_model_dir(const std::filesystem::path& output_dir);

// The base weights (weights[i] for specs[i], i < specs.size()) with every adapter of `lora` merged
// in: W + (alpha / r) · B · A, fp32. `weights` also holds the adapter matrices, by engine name.
std::vector<std::vector<float>> merge_lora_weights(const models::LoraSetup& lora,
                                                   std::span<const models::ParameterSpec> specs,
                                                   std::span<const WeightView> weights);

}  // namespace surogate::train
