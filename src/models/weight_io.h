// Moving a model's weights between a Hugging Face folder and the engine, by the parameter list
// of models/model_spec.h. Loading checks the whole checkpoint before handing out any tensor:
// every expected HF tensor present, none left over (a stray tensor usually means the config
// does not describe the checkpoint), every shape right; each problem is one UserError naming
// the folder, the tensor and what to do. Any float dtype the checkpoint holds (F32, BF16, F16,
// F64) is passed on as stored: the sink converts (CpuBackend::write_converted) or calls
// io::read_tensor_as_float32. A checkpoint saved in FP8 with block scales (config.json's
// quantization_config, io/model_config_quantization.h) loads too: each F8_E4M3 weight with its
// `<hf_name>_scale_inv` is dequantized (quant/fp8_blocks.h) to F32 and passed on like a float
// tensor, unless an Fp8BlockSink takes it as stored. A checkpoint saved by bitsandbytes in 4 bits
// (quant_method "bitsandbytes", load_in_4bit) likewise: each U8 weight with its quant state
// (models/bnb_checkpoint.h) is dequantized to F32 unless a Bnb4bitSink takes it as stored. Stacked
// MoE experts load from one tensor per expert, or from transformers 5's fused layout
// (`mlp.experts.gate_up_proj` [E, 2I, H] and `mlp.experts.down_proj`, what
// save_pretrained(save_original_format=False) writes). Saving writes HF names (one tensor per
// expert), F32, sharded like save_pretrained.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <vector>

#include "io/safetensors.h"
#include "models/bnb_checkpoint.h"
#include "models/model_spec.h"
#include "quant/fp8_blocks.h"

namespace surogate::models {

using WeightSink = std::function<void(const ParameterSpec& spec, const io::SafetensorsTensor& tensor)>;

// A weight the checkpoint stores in FP8 blocks, as stored.
struct Fp8BlockTensor {
  const io::SafetensorsTensor& codes;      // F8_E4M3 [rows, cols]
  const io::SafetensorsTensor& scale_inv;  // a float dtype [row_blocks, col_blocks]
  quant::Fp8BlockShape shape;
};
// Takes an FP8 block weight as stored and returns true, or returns false to have it dequantized
// and passed to the WeightSink.
using Fp8BlockSink = std::function<bool(const ParameterSpec& spec, const Fp8BlockTensor& tensor)>;

// Opens the checkpoint in `model_dir` (single file or sharded), validates it against `specs`
// and calls `fp8_sink` (FP8 block weights, when given), `bnb_sink` (bitsandbytes 4-bit weights, when
// given) or `sink` once per spec, in spec order.
void load_hf_weights(const std::filesystem::path& model_dir, std::span<const ParameterSpec> specs,
                     const WeightSink& sink, const Fp8BlockSink& fp8_sink = {}, const Bnb4bitSink& bnb_sink = {});

// Every parameter of `specs` read from `model_dir` as float32, in spec order.
std::vector<std::vector<float>> load_hf_weights_as_float32(const std::filesystem::path& model_dir,
                                                           std::span<const ParameterSpec> specs);

// Writes the parameters under their HF names into `model_dir` as F32 safetensors
// (model.safetensors, or shards of at most `max_shard_bytes` plus the index). `values[i]`
// belongs to `specs[i]` and must hold shape-product floats.
void save_hf_weights(const std::filesystem::path& model_dir, std::span<const ParameterSpec> specs,
                     std::span<const std::vector<float>> values, uint64_t max_shard_bytes = 5'000'000'000);

}  // namespace surogate::models
