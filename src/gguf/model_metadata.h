// config.json → the GGUF architecture and its hyperparameter keys, as convert_hf_to_gguf.py writes
// them for the decoders Surogate trains, and the refusal of what llama.cpp would run wrongly.
#pragma once

#include <string>

#include "gguf/export_type.h"
#include "gguf/gguf_writer.h"
#include "gguf/tensor_plan.h"
#include "io/model_config.h"

namespace surogate::gguf {

// The architecture llama.cpp runs the model as: llama (Llama, Mistral, Mixtral), qwen2, qwen3,
// qwen2moe, qwen3moe. A UserError naming the obstacle for anything llama.cpp does not run, or would
// run differently from the engine: other architectures (OLMo-2), dynamic RoPE, llama3 RoPE outside
// the llama architecture, partial rotary dimensions, attention biases on Qwen3, MoE models with
// dense layers, a top-k renormalisation llama.cpp's graph does not do.
ModelFacts model_facts(const io::ModelConfig& config);

// general.* and <arch>.* keys. `model_name` is written as general.name.
void add_model_metadata(Metadata& metadata, const ModelFacts& facts, const io::ModelConfig& config, ExportType type,
                        const std::string& model_name);

// general.size_label as gguf-py computes it from the tensors: "19M", "1.5B"; for MoE
// "<experts>x<shared + one expert's parameters>", e.g. "8x7.2B".
std::string size_label(const std::vector<PlannedTensor>& tensors);

// llama3 RoPE: the per-frequency divisors llama.cpp reads from rope_freqs.weight (what
// convert_hf_to_gguf.py computes from rope_scaling: 1 for short wavelengths, factor for long ones,
// smoothly between).
std::vector<float> llama3_rope_factors(const io::ModelConfig& config);

}  // namespace surogate::gguf
