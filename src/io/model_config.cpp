// config.json → ModelConfig for Llama, Mistral, Qwen2, Qwen3, Qwen2-MoE, Qwen3-MoE, Mixtral and OLMo-2, with
// the defaults of the matching transformers configuration classes, and for any other architecture
// (Defined: the generic keys, the rest left to its model definition), and the reverse
// (save_model_config). The MoE keys are io/model_config_moe.cpp's.
#include "io/model_config.h"

#include <array>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/model_config_bounds.h"
#include "io/json_fields.h"
#include "io/model_config_moe.h"
#include "io/model_config_quantization.h"
#include "io/model_config_rope.h"

namespace surogate::io {
namespace {

using nlohmann::json;

struct ArchitectureInfo {
  Architecture architecture;
  std::string_view class_name;
  std::string_view model_type;
  int64_t default_max_position_embeddings;
};

constexpr std::array<ArchitectureInfo, 8> kArchitectures{{
    {Architecture::Llama, "LlamaForCausalLM", "llama", 2048},
    {Architecture::Mistral, "MistralForCausalLM", "mistral", 4096 * 32},
    {Architecture::Qwen2, "Qwen2ForCausalLM", "qwen2", 32768},
    {Architecture::Qwen3, "Qwen3ForCausalLM", "qwen3", 32768},
    {Architecture::Qwen2Moe, "Qwen2MoeForCausalLM", "qwen2_moe", 32768},
    {Architecture::Qwen3Moe, "Qwen3MoeForCausalLM", "qwen3_moe", 32768},
    {Architecture::Mixtral, "MixtralForCausalLM", "mixtral", 4096 * 32},
    {Architecture::Olmo2, "Olmo2ForCausalLM", "olmo2", 2048},
}};

constexpr int64_t kMaxLayers = 10000;

const ArchitectureInfo& info(Architecture architecture) {
  for (const auto& entry : kArchitectures) {
    if (entry.architecture == architecture) return entry;
  }
  return kArchitectures[0];
}

std::string supported_list() {
  std::string names;
  for (const auto& entry : kArchitectures) {
    if (!names.empty()) names += ", ";
    names += entry.class_name;
  }
  return names;
}

// What config.json names, and whether Surogate has C++ for it.
struct ArchitectureReading {
  Architecture architecture = Architecture::Defined;
  std::string class_name;
  std::string model_type;
  std::string refusal;  // set for Defined: the message that refuses it without a model definition
};

std::string unsupported(const std::string& source, std::string_view key, const std::string& given) {
  return fmt::format("{}: '{}' is {}, which Surogate does not support (supported: {}); or give a model_definition "
                     "that writes its graph and declares its weights (docs/models.md)",
                     source, key, given, supported_list());
}

ArchitectureReading parse_architecture(const json& config, const JsonFields& fields, const std::string& source) {
  ArchitectureReading reading;
  reading.model_type = fields.text("model_type").value_or("");
  if (config.contains("architectures") && !config["architectures"].is_null()) {
    const json& list = config["architectures"];
    if (!list.is_array() || list.empty()) fields.fail("architectures", "must be a non-empty list of class names");
    std::string given;
    for (const json& item : list) {
      if (!item.is_string()) fields.fail("architectures", "must hold class names (strings)");
      for (const auto& entry : kArchitectures) {
        if (item.get<std::string>() == entry.class_name) {
          return {entry.architecture, std::string(entry.class_name), std::string(entry.model_type), ""};
        }
      }
      given += (given.empty() ? "" : ", ") + item.get<std::string>();
    }
    reading.class_name = list.front().get<std::string>();
    reading.refusal = unsupported(source, "architectures", given);
    return reading;
  }
  if (reading.model_type.empty()) {
    fields.fail("architectures", fmt::format("is missing (and so is model_type); set it to one of {}",
                                             supported_list()));
  }
  for (const auto& entry : kArchitectures) {
    if (reading.model_type == entry.model_type) {
      return {entry.architecture, std::string(entry.class_name), std::string(entry.model_type), ""};
    }
  }
  reading.refusal = unsupported(source, "model_type", "'" + reading.model_type + "'");
  return reading;
}

std::vector<int64_t> parse_token_ids(const json& config, const JsonFields& fields, std::string_view key) {
  std::vector<int64_t> ids;
  auto found = config.find(std::string(key));
  if (found == config.end() || found->is_null()) return ids;
  if (found->is_array()) {
    for (const json& item : *found) {
      if (!item.is_number_integer()) fields.fail(key, "must be a token id or a list of token ids");
      ids.push_back(item.get<int64_t>());
    }
  } else if (auto id = fields.integer(key)) {
    ids.push_back(*id);
  }
  return ids;
}

void parse_sliding_window(const json& config, const JsonFields& fields, ModelConfig& model) {
  const auto layers = static_cast<size_t>(model.num_hidden_layers);
  model.sliding_window_layers.assign(layers, false);
  if (model.architecture == Architecture::Llama || model.architecture == Architecture::Olmo2 ||
      model.architecture == Architecture::Defined) {
    return;  // a definition reads its own window keys (config.json's raw keys, surogate.dsl.ModelConfig)
  }
  if (model.architecture == Architecture::Mistral || model.architecture == Architecture::Mixtral) {
    // MistralConfig: sliding_window (default 4096; null disables) on every layer; MixtralConfig the
    // same with default null.
    const bool given = config.contains("sliding_window") && !config["sliding_window"].is_null();
    if (given || (model.architecture == Architecture::Mistral && !config.contains("sliding_window"))) {
      model.sliding_window = fields.positive_integer_or("sliding_window", 4096);
      model.sliding_window_layers.assign(layers, true);
    }
  } else if (model.architecture == Architecture::Qwen3Moe) {
    // Qwen3-MoE releases train without a window; transformers 4.x and 5.x disagree on which layers
    // a window would cover, so it is refused rather than guessed.
    if (fields.boolean("use_sliding_window").value_or(false)) {
      fields.fail("use_sliding_window", "is true; Surogate trains Qwen3-MoE with full attention only: set it to false");
    }
  } else if (fields.boolean("use_sliding_window").value_or(false)) {
    // Qwen2/Qwen3: layers at index >= max_window_layers use the window.
    model.sliding_window = fields.positive_integer_or("sliding_window", 4096);
    int64_t max_window_layers = fields.integer("max_window_layers").value_or(28);
    if (max_window_layers < 0) fields.fail("max_window_layers", "must not be negative");
    for (size_t i = 0; i < layers; ++i) model.sliding_window_layers[i] = static_cast<int64_t>(i) >= max_window_layers;
  }
  if (config.contains("layer_types") && !config["layer_types"].is_null()) {
    const json& types = config["layer_types"];
    if (!types.is_array() || types.size() != layers) {
      fields.fail("layer_types", fmt::format("must list one entry per layer ({})", layers));
    }
    bool any_sliding = false;
    for (size_t i = 0; i < layers; ++i) {
      std::string type = types[i].is_string() ? types[i].get<std::string>() : "";
      if (type != "full_attention" && type != "sliding_attention") {
        fields.fail("layer_types", "entries must be \"full_attention\" or \"sliding_attention\"");
      }
      model.sliding_window_layers[i] = type == "sliding_attention";
      any_sliding = any_sliding || model.sliding_window_layers[i];
    }
    if (any_sliding && !model.sliding_window) {
      model.sliding_window = fields.positive_integer_or("sliding_window", 4096);
    }
  }
  bool any = false;
  for (bool sliding : model.sliding_window_layers) any = any || sliding;
  if (!any) model.sliding_window.reset();
}

}  // namespace

std::string_view architecture_class_name(Architecture architecture) {
  return architecture == Architecture::Defined ? "an architecture of a model definition" : info(architecture).class_name;
}
std::string_view architecture_model_type(Architecture architecture) {
  return architecture == Architecture::Defined ? "defined" : info(architecture).model_type;
}

void require_builtin_support(const ModelConfig& config) {
  if (!config.builtin_refusal.empty()) throw UserError(config.builtin_refusal);
}

ModelConfig parse_model_config(std::string_view json_text, const std::string& source) {
  json config = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    fail_user("{}: not a valid JSON object; re-download the model or fix the file", source);
  }
  JsonFields fields(config, source);
  ModelConfig model;
  ArchitectureReading architecture = parse_architecture(config, fields, source);
  model.architecture = architecture.architecture;
  model.architecture_class = std::move(architecture.class_name);
  model.model_type = std::move(architecture.model_type);
  model.builtin_refusal = std::move(architecture.refusal);
  // A vision-language folder (config.json with a vision_config): only `surogate sft` / `merge` read it, through
  // models/vision_model.h (which parses its text model here without the vision_config).
  if (config.contains("vision_config")) {
    if (model.architecture_class != "Qwen2_5_VLForConditionalGeneration" &&
        model.architecture_class != "Qwen3VLForConditionalGeneration") {
      fail_user("{}: {} is a vision-language model surogate does not train yet (Qwen2_5_VLForConditionalGeneration "
                "and Qwen3VLForConditionalGeneration only; docs/vision.md)", source, model.architecture_class);
    }
    fail_user("{}: {} is a vision-language model; `surogate sft` trains it, `surogate merge` merges an "
              "adapter into it and `surogate generate` runs it (docs/vision.md), other commands read text models "
              "only so far", source,
              model.architecture_class);
  }
  CheckpointQuantization quantization = parse_quantization_config(config, source);
  model.fp8_block_checkpoint = quantization.fp8_blocks;
  model.bnb_4bit_checkpoint = quantization.bnb_4bit;
  model.vocab_size = fields.required_positive_integer("vocab_size");
  model.hidden_size = fields.required_positive_integer("hidden_size");
  model.intermediate_size = fields.required_positive_integer("intermediate_size");
  model.num_hidden_layers = fields.required_positive_integer("num_hidden_layers");
  // A sanity bound, not a capability limit: published decoders have at most a few hundred layers,
  // and a typo here (320000 for 32) would otherwise exhaust memory building the graph and be
  // killed by the operating system without a message.
  if (model.num_hidden_layers > kMaxLayers) {
    fields.fail("num_hidden_layers", fmt::format("is {}, more than the {} layers Surogate accepts; check the value",
                                                 model.num_hidden_layers, kMaxLayers));
  }
  model.num_attention_heads = fields.required_positive_integer("num_attention_heads");
  model.num_key_value_heads = fields.positive_integer_or("num_key_value_heads", model.num_attention_heads);
  if (model.num_attention_heads % model.num_key_value_heads != 0) {
    fields.fail("num_key_value_heads", fmt::format("({}) must divide num_attention_heads ({})",
                                                   model.num_key_value_heads, model.num_attention_heads));
  }
  if (fields.has("head_dim")) {
    model.head_dim = fields.positive_integer_or("head_dim", 0);
  } else if (model.architecture == Architecture::Qwen3) {
    model.head_dim = 128;  // Qwen3Config's default
  } else {
    if (model.hidden_size % model.num_attention_heads != 0) {
      fields.fail("num_attention_heads",
                  fmt::format("({}) must divide hidden_size ({}) when head_dim is not given",
                              model.num_attention_heads, model.hidden_size));
    }
    model.head_dim = model.hidden_size / model.num_attention_heads;
  }
  model.rms_norm_eps = fields.positive_number_or("rms_norm_eps", model.architecture == Architecture::Olmo2 ? 1e-5 : 1e-6);
  model.max_position_embeddings = fields.positive_integer_or(
      "max_position_embeddings",
      model.architecture == Architecture::Defined ? 2048 : info(model.architecture).default_max_position_embeddings);
  model.tie_word_embeddings = fields.boolean("tie_word_embeddings").value_or(false);

  switch (model.architecture) {
    case Architecture::Llama:
      model.qkv_bias = model.o_proj_bias = fields.boolean("attention_bias").value_or(false);
      model.mlp_bias = fields.boolean("mlp_bias").value_or(false);
      break;
    case Architecture::Mistral:
      break;
    case Architecture::Qwen2:
      model.qkv_bias = true;  // Qwen2 always has q/k/v biases and none on o_proj
      break;
    case Architecture::Qwen3:
    case Architecture::Qwen3Moe:
      model.qkv_bias = model.o_proj_bias = fields.boolean("attention_bias").value_or(false);
      model.qk_norm = true;
      break;
    case Architecture::Qwen2Moe:
      model.qkv_bias = fields.boolean("qkv_bias").value_or(true);  // transformers 5's key; 4.x always has them
      break;
    case Architecture::Mixtral:
      break;
    case Architecture::Olmo2:
      // Olmo2Config: q_norm / k_norm always, over the whole q and k projections (not per head).
      model.qkv_bias = model.o_proj_bias = fields.boolean("attention_bias").value_or(false);
      model.qk_norm = true;
      break;
    case Architecture::Defined:
      break;  // its definition declares its weights
  }
  parse_sliding_window(config, fields, model);
  model.moe = parse_moe_config(config, fields, model.architecture, model.num_hidden_layers, model.intermediate_size);

  model.hidden_act = fields.text("hidden_act").value_or("silu");
  if (model.hidden_act == "swish") model.hidden_act = "silu";
  if (model.hidden_act != "silu" && model.builtin_refusal.empty()) {
    model.builtin_refusal = fmt::format("{}: 'hidden_act' is '{}'; Surogate's built-in graphs support only 'silu' "
                                        "(SwiGLU MLPs); a model_definition chooses its own activation (docs/models.md)",
                                        source, model.hidden_act);
  }
  std::string_view dtype_key = fields.has("dtype") ? "dtype" : "torch_dtype";
  if (auto dtype_name = fields.text(dtype_key)) {
    model.torch_dtype = dtype_from_torch_name(*dtype_name);
    if (!model.torch_dtype) {
      fields.fail(dtype_key, fmt::format("is '{}', not a known dtype (e.g. bfloat16, float16, float32)", *dtype_name));
    }
    // The dtype the model's weights are written back in (training outputs, merge): a float type
    // Surogate writes. Caught here, not after a whole training run.
    if (*model.torch_dtype != DType::F32 && *model.torch_dtype != DType::BF16 && *model.torch_dtype != DType::F16) {
      fields.fail(dtype_key, fmt::format("is '{}'; a model's dtype must be bfloat16, float16 or float32", *dtype_name));
    }
  }
  model.bos_token_id = fields.integer("bos_token_id");
  model.pad_token_id = fields.integer("pad_token_id");
  model.eos_token_ids = parse_token_ids(config, fields, "eos_token_id");
  check_model_size_bounds(model, fields);
  model.rope = parse_rope_config(config, model.head_dim, model.max_position_embeddings, source);
  model.source_json = std::string(json_text);
  return model;
}

ModelConfig load_model_config(const std::filesystem::path& model_dir) {
  std::filesystem::path path = model_dir / "config.json";
  std::ifstream stream(path, std::ios::binary);
  if (!stream) {
    fail_user("{}: not found; the model folder must hold a Hugging Face config.json", path.string());
  }
  std::ostringstream text;
  text << stream.rdbuf();
  return parse_model_config(text.str(), path.string());
}

std::string model_config_to_json(const ModelConfig& model) {
  json config = json::object();
  if (!model.source_json.empty()) {
    json source = json::parse(model.source_json, nullptr, /*allow_exceptions=*/false);
    if (source.is_object()) config = std::move(source);
  }
  const bool as_rope_parameters = config.contains("rope_parameters");
  config.erase("quantization_config");  // the weights Surogate writes are full precision
  if (model.architecture == Architecture::Defined) {
    // Surogate interprets none of its architecture's keys: the file goes back as it came, with
    // the dtype the weights are written in.
    if (model.torch_dtype) {
      config.erase("dtype");
      config["torch_dtype"] = std::string(dtype_torch_name(*model.torch_dtype));
    }
    return config.dump(2) + "\n";
  }
  config["architectures"] = {std::string(architecture_class_name(model.architecture))};
  config["model_type"] = std::string(architecture_model_type(model.architecture));
  config["vocab_size"] = model.vocab_size;
  config["hidden_size"] = model.hidden_size;
  config["intermediate_size"] = model.intermediate_size;
  config["num_hidden_layers"] = model.num_hidden_layers;
  config["num_attention_heads"] = model.num_attention_heads;
  config["num_key_value_heads"] = model.num_key_value_heads;
  config["head_dim"] = model.head_dim;
  config["rms_norm_eps"] = model.rms_norm_eps;
  config["max_position_embeddings"] = model.max_position_embeddings;
  config["tie_word_embeddings"] = model.tie_word_embeddings;
  config["hidden_act"] = model.hidden_act;
  switch (model.architecture) {
    case Architecture::Llama:
      config["attention_bias"] = model.qkv_bias;
      config["mlp_bias"] = model.mlp_bias;
      break;
    case Architecture::Qwen3:
    case Architecture::Qwen3Moe:
    case Architecture::Olmo2:
      config["attention_bias"] = model.qkv_bias;
      break;
    case Architecture::Qwen2Moe:
      config["qkv_bias"] = model.qkv_bias;
      break;
    default:
      break;
  }
  if (model.moe) write_moe_config(*model.moe, model.architecture, config);
  if (model.architecture == Architecture::Mistral || model.architecture == Architecture::Mixtral) {
    config["sliding_window"] = model.sliding_window ? json(*model.sliding_window) : json(nullptr);
  } else if (model.architecture != Architecture::Llama && model.architecture != Architecture::Olmo2) {
    config["use_sliding_window"] = model.sliding_window.has_value();
    if (model.sliding_window) {
      config["sliding_window"] = *model.sliding_window;
      int64_t first = model.num_hidden_layers;
      for (size_t i = 0; i < model.sliding_window_layers.size(); ++i) {
        if (model.sliding_window_layers[i]) { first = static_cast<int64_t>(i); break; }
      }
      config["max_window_layers"] = first;
    }
  }
  if (model.torch_dtype) {
    config.erase("dtype");
    config["torch_dtype"] = std::string(dtype_torch_name(*model.torch_dtype));
  }
  config["bos_token_id"] = model.bos_token_id ? json(*model.bos_token_id) : json(nullptr);
  config["pad_token_id"] = model.pad_token_id ? json(*model.pad_token_id) : json(nullptr);
  if (model.eos_token_ids.size() == 1) {
    config["eos_token_id"] = model.eos_token_ids[0];
  } else if (model.eos_token_ids.empty()) {
    config["eos_token_id"] = nullptr;
  } else {
    config["eos_token_id"] = model.eos_token_ids;
  }
  write_rope_config(model.rope, as_rope_parameters, config);
  return config.dump(2) + "\n";
}

void save_model_config(const ModelConfig& config, const std::filesystem::path& model_dir) {
  write_text_file_atomically(model_dir / "config.json", model_config_to_json(config));
}

}  // namespace surogate::io
