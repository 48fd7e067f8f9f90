// A run's base model weights on their way to the training device: read from the model folder (or
// initialised when it holds no safetensors), each weight the plan stores quantized quantized as it
// arrives, or, from a checkpoint saved in FP8 blocks or bitsandbytes 4-bit of the plan's format and
// block size, taken as stored.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config/config.h"
#include "io/model_config.h"
#include "models/bnb_checkpoint.h"
#include "models/lora.h"
#include "models/model_spec.h"
#include "models/qlora.h"
#include "models/quantized_weight.h"
#include "models/weight_io.h"
#include "train/device/training_device.h"
#include "train/model_weights.h"

namespace surogate::train {

// The base model's weights into `views` (spec order): from the model folder, or the deterministic
// initialisation when it holds no safetensors. `written` sees each one filled; `stored_fp8` /
// `stored_bnb` may take the weights a checkpoint saved in FP8 blocks / bitsandbytes 4-bit holds as
// they are.
void read_base_weights(const Config& config, std::span<const models::ParameterSpec> specs,
                       std::span<const WeightView> views, const WeightWritten& written = {},
                       const models::Fp8BlockSink& stored_fp8 = {}, const models::Bnb4bitSink& stored_bnb = {});

// The weight of `quantized` named `name`, or null.
const models::QuantizedWeight* find_quantized(std::span<const models::QuantizedWeight> quantized,
                                              const std::string& name);

// Reads the base weights into `views` (spec order), calling `written` with each index once its view
// holds the values: a vision-language folder's reader (train/vision_stage.h: the text model and the
// tower by the folder's own names) in place of read_base_weights.
using BaseWeightReader = std::function<void(std::span<const WeightView> views, const WeightWritten& written)>;

struct BaseWeightSetup {
  const Config* config = nullptr;
  const io::ModelConfig* model = nullptr;
  std::span<const models::ParameterSpec> specs;
  std::span<const models::QuantizedWeight> quantized;  // the plan's quantized weights
  const models::QloraOptions* qlora = nullptr;          // QLoRA's format, or null
  bool cuda = false;                                    // dequantized to bf16 (CUDA) or fp32 (CPU)
  BaseWeightReader reader;                              // null: read_base_weights (no weight taken as stored)
};

// Reads the base weights into `device_views` (spec order; the values of a weight the plan stores
// quantized are not read: it goes through scratch buffers) and hands each quantized one to `device`
// (store_quantized), quantized one weight behind the reader (train/overlapped_quantizer.h); returns
// the lines to print: a model initialised from scratch, checkpoint weights dequantized on load, how
// long the host quantized, QLoRA's storage.
std::vector<std::string> load_base_weights(const BaseWeightSetup& setup, std::span<const WeightView> device_views,
                                           TrainingDevice& device);

// merge_adapter: the adapters merged into the base. `weights` are the device's (base then adapters,
// as TrainingDevice::weights()); with a quantized base (QLoRA) the adapters merge into the base as
// the model folder holds it (full precision; a checkpoint saved in FP8 blocks or bitsandbytes 4-bit
// dequantized), read again here (by `reader` when given), not into its quantized approximation.
std::vector<std::vector<float>> merge_into_base(const Config& config, std::span<const models::ParameterSpec> specs,
                                                const models::LoraSetup& lora, std::span<const WeightView> weights,
                                                std::span<const WeightView> trainable, bool quantized_base,
                                                const BaseWeightReader& reader = {});

}  // namespace surogate::train
