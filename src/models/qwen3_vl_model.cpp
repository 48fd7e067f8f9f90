// Builds the Qwen3-VL model graph and reads its config; see qwen3_vl_model.h.
#include "models/qwen3_vl_model.h"

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::models {

Qwen3VLModelConfig Qwen3VLModelConfig::from_folder(const std::filesystem::path& model_dir) {
  const std::filesystem::path file = model_dir / "config.json";
  VisionLanguageText text =
      read_vision_language_text(model_dir, "Qwen3VLForConditionalGeneration", "Qwen3ForCausalLM", "qwen3");
  Qwen3VLModelConfig config;
  config.text = std::move(text.text);
  config.mrope_section = std::move(text.mrope_section);
  config.mrope_interleaved = text.mrope_interleaved;
  config.image_token_id = text.image_token_id;
  config.vision = Qwen3VisionTowerConfig::from_config_json(file);
  if (config.vision.out_hidden_size != config.text.hidden_size) {
    fail_user("{}: vision_config.out_hidden_size {} differs from the text model's hidden_size {}", file.string(),
              config.vision.out_hidden_size, config.text.hidden_size);
  }
  if (static_cast<int64_t>(config.vision.deepstack_visual_indexes.size()) > config.text.num_hidden_layers) {
    fail_user("{}: vision_config.deepstack_visual_indexes has {} entries, more than the text model's {} layers",
              file.string(), config.vision.deepstack_visual_indexes.size(), config.text.num_hidden_layers);
  }
  return config;
}

std::vector<int32_t> vision_deepstack_index(std::span<const int32_t> splice_index, int64_t rows) {
  std::vector<int32_t> index(splice_index.size());
  for (size_t i = 0; i < splice_index.size(); ++i) {
    index[i] = splice_index[i] >= rows ? static_cast<int32_t>(splice_index[i] - rows + 1) : 0;
  }
  return index;
}

Qwen3VLModelGraph build_qwen3_vl_model_graph(const Qwen3VLModelConfig& config, const graph::OpRegistry& registry,
                                             DecoderGraphOptions options, int64_t patches, bool train_vision) {
  Qwen3VLModelGraph result;
  const int64_t rows = options.batch * options.sequence, hidden = config.text.hidden_size;
  options.mrope_section = config.mrope_section;
  options.mrope_interleaved = config.mrope_interleaved;
  graph::TensorId deepstack_index = graph::kNoTensor;
  options.splice_embeddings = [&](graph::GraphBuilder& b, graph::TensorId embeddings) {
    result.features = add_qwen3_vision_tower(b, config.vision, patches, options.dtype, train_vision);
    const graph::TensorId index = b.input(kVisionSpliceIndex, DType::I32, {options.batch, options.sequence});
    deepstack_index = b.input(kVisionDeepstackIndex, DType::I32, {options.batch, options.sequence});
    const graph::TensorId flat = b.op("reshape", {embeddings}, {{"shape", {rows, hidden}}}, "vision.splice_rows");
    const graph::TensorId table = b.op("concat", {flat, result.features.features}, {{"axis", 0}}, "vision.splice_table");
    return b.op("embedding", {index, table}, nlohmann::json::object(), "vision.splice");
  };
  for (size_t i = 0; i < config.vision.deepstack_visual_indexes.size(); ++i) {
    options.after_layer.push_back([&, i](graph::GraphBuilder& b, graph::TensorId stream) {
      auto scope = b.scope(fmt::format("vision.deepstack_add.{}", i));
      const graph::TensorId zero = b.op(
          "fill", {}, {{"value", 0.0}, {"shape", {int64_t{1}, hidden}}, {"dtype", std::string(dtype_safetensors_name(options.dtype))}},
          "zero_row");
      const graph::TensorId table = b.op("concat", {zero, result.features.deepstack[i]}, {{"axis", 0}}, "table");
      const graph::TensorId added = b.op("embedding", {deepstack_index, table}, nlohmann::json::object(), "gather");
      return b.op("add", {stream, added}, nlohmann::json::object(), "add");
    });
  }
  DecoderGraph decoder = build_decoder_graph(config.text, registry, options);
  result.graph = std::move(decoder.graph);
  result.loss = decoder.loss;
  return result;
}

}  // namespace surogate::models
