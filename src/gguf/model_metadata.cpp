#include "gguf/model_metadata.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/model_config_moe.h"

namespace surogate::gguf {
namespace {

using nlohmann::json;

json source_json(const io::ModelConfig& config) {
  if (config.source_json.empty()) return json::object();
  return json::parse(config.source_json, nullptr, false);
}

// The RoPE parameters object as config.json spells it (rope_parameters or rope_scaling), or {}.
json rope_parameters(const json& source) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (source.contains(key) && source[key].is_object()) return source[key];
  }
  return json::object();
}

}  // namespace

ModelFacts model_facts(const io::ModelConfig& config) {
  using io::Architecture;
  const std::string_view class_name = io::architecture_class_name(config.architecture);
  ModelFacts facts;
  switch (config.architecture) {
    case Architecture::Llama:
    case Architecture::Mistral:
    case Architecture::Mixtral:
      facts.architecture = "llama";
      facts.llama_layout = true;
      break;
    case Architecture::Qwen2: facts.architecture = "qwen2"; break;
    case Architecture::Qwen3: facts.architecture = "qwen3"; break;
    case Architecture::Qwen2Moe: facts.architecture = "qwen2moe"; break;
    case Architecture::Qwen3Moe: facts.architecture = "qwen3moe"; break;
    default:
      fail_user("config.json: {} cannot be exported to GGUF: surogate export writes the architectures llama.cpp "
                "runs as llama / qwen2 / qwen3 / qwen2moe / qwen3moe (LlamaForCausalLM, MistralForCausalLM, "
                "MixtralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM)",
                class_name);
  }
  const io::RopeConfig& rope = config.rope;
  if (rope.type == io::RopeType::Dynamic) {
    fail_user("config.json: {} uses dynamic RoPE scaling, which llama.cpp's {} architecture does not implement; "
              "export a model without it", class_name, facts.architecture);
  }
  if (rope.type == io::RopeType::Llama3 && !facts.llama_layout) {
    fail_user("config.json: llama3 RoPE scaling on {}: llama.cpp applies it (rope_freqs) only to the llama "
              "architecture", class_name);
  }
  if (rope.rotary_dim != config.head_dim) {
    fail_user("config.json: partial_rotary_factor {} rotates {} of {} head dimensions; llama.cpp's {} architecture "
              "rotates whole heads", rope.partial_rotary_factor, rope.rotary_dim, config.head_dim, facts.architecture);
  }
  const bool qwen3_family = config.architecture == Architecture::Qwen3 || config.architecture == Architecture::Qwen3Moe;
  if (qwen3_family && (config.qkv_bias || config.o_proj_bias)) {
    fail_user("config.json: {} with attention_bias: llama.cpp's {} architecture has no attention biases",
              class_name, facts.architecture);
  }
  if (config.moe) {
    for (size_t layer = 0; layer < config.moe->sparse_layers.size(); ++layer) {
      if (!config.moe->sparse_layers[layer]) {
        fail_user("config.json: layer {} of {} is a dense MLP (mlp_only_layers / decoder_sparse_step); llama.cpp's "
                  "{} architecture needs every layer to be a mixture of experts", layer, class_name,
                  facts.architecture);
      }
    }
    // llama.cpp renormalises the top-k router weights for llama (Mixtral) and qwen3moe, never for qwen2moe.
    const bool llama_cpp_normalizes = config.architecture != Architecture::Qwen2Moe;
    if (config.moe->normalize_top_k != llama_cpp_normalizes) {
      fail_user("config.json: {} with norm_topk_prob {}: llama.cpp's {} architecture always {} the top-k router "
                "weights", class_name, config.moe->normalize_top_k, facts.architecture,
                llama_cpp_normalizes ? "renormalises" : "keeps unnormalised");
    }
    facts.experts = config.moe->experts;
  }
  facts.layers = config.num_hidden_layers;
  facts.heads = config.num_attention_heads;
  facts.kv_heads = config.num_key_value_heads;
  return facts;
}

void add_model_metadata(Metadata& metadata, const ModelFacts& facts, const io::ModelConfig& config, ExportType type,
                        const std::string& model_name) {
  const std::string& arch = facts.architecture;
  const auto key = [&](std::string_view name) { return fmt::format("{}.{}", arch, name); };
  const json source = source_json(config);
  metadata.set_string("general.architecture", arch);
  metadata.set_string("general.type", "model");
  metadata.set_string("general.name", model_name);
  metadata.set_u32(key("block_count"), static_cast<uint32_t>(config.num_hidden_layers));
  metadata.set_u32(key("context_length"), static_cast<uint32_t>(config.max_position_embeddings));
  metadata.set_u32(key("embedding_length"), static_cast<uint32_t>(config.hidden_size));
  metadata.set_u32(key("feed_forward_length"), static_cast<uint32_t>(config.intermediate_size));
  metadata.set_u32(key("attention.head_count"), static_cast<uint32_t>(config.num_attention_heads));
  metadata.set_u32(key("attention.head_count_kv"), static_cast<uint32_t>(config.num_key_value_heads));
  const io::RopeConfig& rope = config.rope;
  if (rope.type == io::RopeType::Linear) {
    metadata.set_string(key("rope.scaling.type"), "linear");
    metadata.set_f32(key("rope.scaling.factor"), static_cast<float>(rope.factor));
  } else if (rope.type == io::RopeType::Yarn) {
    const json parameters = rope_parameters(source);
    metadata.set_string(key("rope.scaling.type"), "yarn");
    metadata.set_f32(key("rope.scaling.factor"), static_cast<float>(rope.factor));
    metadata.set_u32(key("rope.scaling.original_context_length"),
                     static_cast<uint32_t>(rope.original_max_position_embeddings));
    // Only what config.json states, as the converter does; llama.cpp derives the rest.
    const auto optional_number = [&](std::initializer_list<const char*> names, std::string_view gguf_key) {
      for (const char* name : names) {
        if (parameters.contains(name) && parameters[name].is_number()) {
          metadata.set_f32(key(gguf_key), parameters[name].get<float>());
          return;
        }
      }
    };
    optional_number({"extrapolation_factor"}, "rope.scaling.yarn_ext_factor");
    optional_number({"attention_factor", "attn_factor"}, "rope.scaling.yarn_attn_factor");
    optional_number({"beta_fast"}, "rope.scaling.yarn_beta_fast");
    optional_number({"beta_slow"}, "rope.scaling.yarn_beta_slow");
  }
  metadata.set_f32(key("rope.freq_base"), static_cast<float>(rope.theta));
  metadata.set_f32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(config.rms_norm_eps));
  if (config.moe) {
    metadata.set_u32(key("expert_count"), static_cast<uint32_t>(config.moe->experts));
    metadata.set_u32(key("expert_used_count"), static_cast<uint32_t>(config.moe->experts_per_token));
  }
  // The converter writes the head size only when config.json gives head_dim; llama.cpp otherwise
  // assumes hidden / heads, so it is written too whenever that would be wrong.
  if (source.contains("head_dim") || config.head_dim * config.num_attention_heads != config.hidden_size) {
    metadata.set_u32(key("attention.key_length"), static_cast<uint32_t>(config.head_dim));
    metadata.set_u32(key("attention.value_length"), static_cast<uint32_t>(config.head_dim));
  }
  metadata.set_u32("general.file_type", llama_file_type(type));
  if (facts.llama_layout) {
    metadata.set_u32(key("vocab_size"), static_cast<uint32_t>(config.vocab_size));
    metadata.set_u32(key("rope.dimension_count"), static_cast<uint32_t>(config.head_dim));
  }
  if (config.moe && (arch == "qwen2moe" || arch == "qwen3moe")) {
    metadata.set_u32(key("expert_feed_forward_length"), static_cast<uint32_t>(config.moe->expert_intermediate_size));
  }
  if (config.moe && arch == "qwen2moe") {
    metadata.set_u32(key("expert_shared_feed_forward_length"),
                     static_cast<uint32_t>(config.moe->shared_expert_intermediate_size));
  }
  metadata.set_u32("general.quantization_version", 2);
}

namespace {

// gguf-py's model_weight_count_rounded_notation(count, min_digits=2).
std::string rounded_count(int64_t count) {
  double scaled = static_cast<double>(count) * 1e-3;
  std::string suffix = "K";
  if (count > 1e12) {
    scaled = static_cast<double>(count) * 1e-12, suffix = "T";
  } else if (count > 1e9) {
    scaled = static_cast<double>(count) * 1e-9, suffix = "B";
  } else if (count > 1e6) {
    scaled = static_cast<double>(count) * 1e-6, suffix = "M";
  }
  const double whole = std::nearbyint(scaled);  // Python's round: half to even
  const std::string digits = whole == 0 ? "" : fmt::format("{:.0f}", whole);
  const int decimals = std::max(0, 2 - static_cast<int>(digits.size()));
  return fmt::format("{:.{}f}{}", scaled, decimals, suffix);
}

}  // namespace

std::string size_label(const std::vector<PlannedTensor>& tensors) {
  int64_t total = 0, shared = 0, expert = 0, expert_sum = 0, expert_tensors = 0;
  for (const PlannedTensor& tensor : tensors) {
    const int64_t size = tensor_elements(tensor.info);
    total += size;
    if (tensor.info.name.find("_exps.") != std::string::npos && tensor.info.dims.size() >= 3) {
      const int64_t experts = tensor.info.dims[2];
      expert += size / experts;
      expert_sum += experts;
      ++expert_tensors;
    } else {
      shared += size;
    }
  }
  if (expert_tensors > 0) return fmt::format("{}x{}", expert_sum / expert_tensors, rounded_count(shared + expert));
  return rounded_count(total);
}

std::vector<float> llama3_rope_factors(const io::ModelConfig& config) {
  // In float32 throughout, as the converter computes it with torch float32 tensors.
  const io::RopeConfig& rope = config.rope;
  const int64_t dim = rope.rotary_dim;
  const float old_context = static_cast<float>(rope.original_max_position_embeddings);
  const float low_freq = static_cast<float>(rope.low_freq_factor), high_freq = static_cast<float>(rope.high_freq_factor);
  const float low_wavelength = static_cast<float>(rope.original_max_position_embeddings / rope.low_freq_factor);
  const float high_wavelength = static_cast<float>(rope.original_max_position_embeddings / rope.high_freq_factor);
  const float factor = static_cast<float>(rope.factor);
  const float two_pi = static_cast<float>(2 * std::numbers::pi);
  std::vector<float> factors;
  for (int64_t i = 0; i < dim; i += 2) {
    const float frequency =
        1.0f / std::pow(static_cast<float>(rope.theta), static_cast<float>(i) / static_cast<float>(dim));
    const float wavelength = two_pi / frequency;
    if (wavelength < high_wavelength) {
      factors.push_back(1.0f);
    } else if (wavelength > low_wavelength) {
      factors.push_back(factor);
    } else {
      const float smooth = (old_context / wavelength - low_freq) / (high_freq - low_freq);
      factors.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return factors;
}

}  // namespace surogate::gguf
