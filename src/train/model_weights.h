// Getting a model's weights into the trainer: from the model folder's safetensors (any float
// dtype, converted to the fp32 masters), or, when the folder has no safetensors (training from
// scratch), a deterministic initialisation: normal(0, 0.02) for matrices, ones for norms, zeros
// for biases, and zeros for the output projections (o_proj, down_proj) when
// init_projections_to_zero is set, so every block starts as the identity on the residual stream.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>

#include "models/lora.h"
#include "models/model_spec.h"
#include "models/weight_io.h"
#include "train/checkpoint_io.h"

namespace surogate::train {

// True when `model_dir` holds a *.safetensors file or a safetensors index.
bool has_safetensors(const std::filesystem::path& model_dir);

// Called with i once weights[i] holds its values (QLoRA quantizes it then; views may share memory).
using WeightWritten = std::function<void(size_t index)>;

// `weights[i]` belongs to `specs[i]`.
void initialize_weights(std::span<const models::ParameterSpec> specs, std::span<const WeightView> weights,
                        uint64_t seed, bool projections_to_zero, const WeightWritten& written = {});

// PEFT's initialisation of the LoRA adapters among `weights`: A ~ kaiming-uniform(a = √5) =
// U(−1/√in, 1/√in), B = 0, so the adapted model starts exactly at the base model. Seeded from
// `seed` (train_seed; its own stream).
void initialize_lora(const models::LoraSetup& lora, std::span<const WeightView> weights, uint64_t seed);

// `stored_fp8` / `stored_bnb`: take the weights the checkpoint stores in FP8 blocks / bitsandbytes
// 4-bit as they are (models/weight_io.h); those taken are neither written into `weights` nor reported
// to `written`.
void load_weights(const std::filesystem::path& model_dir, std::span<const models::ParameterSpec> specs,
                  std::span<const WeightView> weights, const WeightWritten& written = {},
                  const models::Fp8BlockSink& stored_fp8 = {}, const models::Bnb4bitSink& stored_bnb = {});

}  // namespace surogate::train
