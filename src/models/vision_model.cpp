// Builds the Qwen2.5-VL model graph and reads its config and text weights; see vision_model.h.
#include "models/vision_model.h"

#include <fstream>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::models {
namespace {

nlohmann::json read_json_object(const std::filesystem::path& file) {
  std::ifstream stream(file);
  if (!stream) fail_user("{}: not found", file.string());
  nlohmann::json json = nlohmann::json::parse(stream, nullptr, false);
  if (json.is_discarded() || !json.is_object()) fail_user("{}: not a JSON object", file.string());
  return json;
}

// Takes mrope_section out of the rope object under `key` (rope_parameters or rope_scaling); an
// rope_scaling of type mrope is transformers 4's spelling of default RoPE with sections.
std::vector<int64_t> take_mrope_section(nlohmann::json& text, const char* key) {
  if (!text.contains(key) || !text[key].is_object() || !text[key].contains("mrope_section")) return {};
  nlohmann::json& rope = text[key];
  std::vector<int64_t> sections;
  for (const nlohmann::json& size : rope["mrope_section"]) {
    if (!size.is_number_integer()) return {};
    sections.push_back(size.get<int64_t>());
  }
  rope.erase("mrope_section");
  for (const char* type_key : {"type", "rope_type"}) {
    if (rope.contains(type_key) && rope[type_key] == "mrope") rope[type_key] = "default";
  }
  return sections;
}

}  // namespace

VisionLanguageText read_vision_language_text(const std::filesystem::path& model_dir, std::string_view architecture,
                                             std::string_view text_architecture, std::string_view text_model_type) {
  const std::filesystem::path file = model_dir / "config.json";
  const nlohmann::json json = read_json_object(file);
  const nlohmann::json architectures = json.value("architectures", nlohmann::json::array());
  if (architectures != nlohmann::json::array({std::string(architecture)})) {
    fail_user("{}: architectures is {}; the vision-language graph is built for {}", file.string(), architectures.dump(),
              architecture);
  }
  // transformers 5 nests the text settings under text_config; older configs keep them top-level.
  nlohmann::json text = json.contains("text_config") && json["text_config"].is_object() ? json["text_config"] : json;
  text.erase("vision_config");
  text.erase("text_config");
  if (!text.contains("tie_word_embeddings") && json.contains("tie_word_embeddings")) {
    text["tie_word_embeddings"] = json["tie_word_embeddings"];
  }
  VisionLanguageText result;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!result.mrope_section.empty()) break;
    // Qwen3-VL's interleaved layout sits beside the sections.
    if (text.contains(key) && text[key].is_object() && text[key].contains("mrope_interleaved")) {
      if (!text[key]["mrope_interleaved"].is_boolean()) {
        fail_user("{}: {}.mrope_interleaved is not a boolean", file.string(), key);
      }
      result.mrope_interleaved = text[key]["mrope_interleaved"].get<bool>();
      text[key].erase("mrope_interleaved");
    }
    result.mrope_section = take_mrope_section(text, key);
  }
  if (result.mrope_section.empty()) {
    fail_user("{}: no mrope_section (three integers) in rope_parameters or rope_scaling; {}'s text model needs its "
              "M-RoPE sections", file.string(), architecture);
  }
  if (text.contains("rope_scaling") && text["rope_scaling"].is_object() &&
      text["rope_scaling"].value("type", text["rope_scaling"].value("rope_type", "")) == "default") {
    text.erase("rope_scaling");  // the legacy parser reads rope_theta; "default" scaling is no scaling
  }
  text["architectures"] = nlohmann::json::array({std::string(text_architecture)});
  text["model_type"] = std::string(text_model_type);
  result.text = io::parse_model_config(text.dump(), file.string() + " (text model)");
  const nlohmann::json& ids = json.contains("image_token_id") ? json : text;
  if (ids.contains("image_token_id")) {
    if (!ids["image_token_id"].is_number_integer()) fail_user("{}: image_token_id is not an integer", file.string());
    result.image_token_id = ids["image_token_id"].get<int32_t>();
  }
  if (result.image_token_id < 0 || result.image_token_id >= result.text.vocab_size) {
    fail_user("{}: image_token_id {} is outside the vocabulary (vocab_size {})", file.string(), result.image_token_id,
              result.text.vocab_size);
  }
  return result;
}

VisionModelConfig VisionModelConfig::from_folder(const std::filesystem::path& model_dir) {
  const std::filesystem::path file = model_dir / "config.json";
  VisionLanguageText text =
      read_vision_language_text(model_dir, "Qwen2_5_VLForConditionalGeneration", "Qwen2ForCausalLM", "qwen2");
  if (text.mrope_interleaved) {
    fail_user("{}: mrope_interleaved is true; Qwen2.5-VL's M-RoPE sections are consecutive", file.string());
  }
  VisionModelConfig config;
  config.text = std::move(text.text);
  config.mrope_section = std::move(text.mrope_section);
  config.image_token_id = text.image_token_id;
  config.vision = VisionTowerConfig::from_config_json(file);
  if (config.vision.out_hidden_size != config.text.hidden_size) {
    fail_user("{}: vision_config.out_hidden_size {} differs from the text model's hidden_size {}", file.string(),
              config.vision.out_hidden_size, config.text.hidden_size);
  }
  return config;
}

std::vector<int32_t> vision_splice_index(std::span<const int32_t> input_ids, int64_t batch, int64_t sequence,
                                         int32_t image_token_id, int64_t features, std::string_view where) {
  if (static_cast<int64_t>(input_ids.size()) != batch * sequence) {
    fail_user("{}: {} input ids for a batch of {} × {}", where, input_ids.size(), batch, sequence);
  }
  std::vector<int32_t> index(input_ids.size());
  int64_t image = 0;
  for (size_t i = 0; i < input_ids.size(); ++i) {
    const bool pad = input_ids[i] == image_token_id;
    index[i] = static_cast<int32_t>(pad ? batch * sequence + image : static_cast<int64_t>(i));
    if (pad) ++image;
  }
  if (image != features) {
    fail_user("{}: {} image tokens (id {}) but the images give {} features; each image needs "
              "grid_t·grid_h·grid_w / merge² tokens", where, image, image_token_id, features);
  }
  return index;
}

VisionModelGraph build_vision_model_graph(const VisionModelConfig& config, const graph::OpRegistry& registry,
                                          DecoderGraphOptions options, int64_t patches, bool train_vision) {
  VisionModelGraph result;
  const int64_t rows = options.batch * options.sequence;
  options.mrope_section = config.mrope_section;
  options.splice_embeddings = [&](graph::GraphBuilder& b, graph::TensorId embeddings) {
    result.features = add_vision_tower(b, config.vision, patches, options.dtype, train_vision);
    const graph::TensorId index = b.input(kVisionSpliceIndex, DType::I32, {options.batch, options.sequence});
    const graph::TensorId flat = b.op("reshape", {embeddings}, {{"shape", {rows, config.text.hidden_size}}},
                                      "vision.splice_rows");
    const graph::TensorId table = b.op("concat", {flat, result.features}, {{"axis", 0}}, "vision.splice_table");
    return b.op("embedding", {index, table}, nlohmann::json::object(), "vision.splice");
  };
  DecoderGraph decoder = build_decoder_graph(config.text, registry, options);
  result.graph = std::move(decoder.graph);
  result.loss = decoder.loss;
  return result;
}

std::vector<ParameterSpec> vision_model_text_parameters(const VisionModelConfig& config,
                                                        const std::filesystem::path& model_dir) {
  return vision_model_text_parameters(config.text, model_dir);
}

std::vector<ParameterSpec> vision_model_text_parameters(const io::ModelConfig& text,
                                                        const std::filesystem::path& model_dir) {
  const io::SafetensorsCheckpoint checkpoint = io::SafetensorsCheckpoint::open(model_dir);
  std::vector<ParameterSpec> specs = parameter_specs(text);
  for (ParameterSpec& spec : specs) {
    if (!spec.hf_name.starts_with("model.") || checkpoint.contains(spec.hf_name)) continue;
    const std::string nested = "model.language_model." + spec.hf_name.substr(std::string_view("model.").size());
    if (checkpoint.contains(nested)) spec.hf_name = nested;
  }
  return specs;
}

void load_vision_model_text_weights(const std::filesystem::path& model_dir, const VisionModelConfig& config,
                                    const std::function<void(const ParameterSpec&, const io::SafetensorsTensor&)>& sink) {
  load_vision_model_text_weights(model_dir, config.text, sink);
}

void load_vision_model_text_weights(const std::filesystem::path& model_dir, const io::ModelConfig& text,
                                    const std::function<void(const ParameterSpec&, const io::SafetensorsTensor&)>& sink) {
  const io::SafetensorsCheckpoint checkpoint = io::SafetensorsCheckpoint::open(model_dir);
  for (const ParameterSpec& spec : vision_model_text_parameters(text, model_dir)) {
    const io::SafetensorsTensor* tensor = checkpoint.find(spec.hf_name);
    if (tensor == nullptr) {
      fail_user("{}: no tensor {} (nor under model.language_model.); the checkpoint does not hold the text model "
                "config.json describes", model_dir.string(), spec.hf_name);
    }
    require_float_elements(checkpoint, *tensor, graph::shape_numel(spec.shape), "config.json's text model");
    sink(spec, *tensor);
  }
}

}  // namespace surogate::models
