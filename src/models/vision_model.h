// Qwen2.5-VL (transformers' Qwen2_5_VLForConditionalGeneration) as one graph: the vision tower
// (models/vision_tower.h) over all images of the micro-batch, its features spliced into the token
// embeddings at the <|image_pad|> positions in order, then the Qwen2-style text decoder
// (models/decoder_graph.h: q/k/v biases, no q/k norm) with M-RoPE tables (mrope_cos_sin over the
// [3, B, T] positions of vision/mrope_positions.h) and the LM loss on the shifted targets.
//
// The splice uses existing ops: the embeddings [B, T, H] reshaped to [B·T, H] and concatenated
// with the features [N, H] into one table, from which `embedding` gathers row
// vision_splice_index[b, t] (b·T + t for a text token, B·T + k for the k-th image pad). Its
// gradient is the scatter-add back into both: image-pad rows of the embedding table get none, as
// with transformers' masked_scatter, and the tower gets the features' gradient.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "models/decoder_graph.h"
#include "models/model_spec.h"
#include "models/vision_tower.h"

namespace surogate::models {

struct VisionModelConfig {
  io::ModelConfig text;             // the text decoder, read as Qwen2ForCausalLM
  VisionTowerConfig vision;
  std::vector<int64_t> mrope_section;  // rope_scaling's / rope_parameters' [t, h, w]
  int32_t image_token_id = 151655;     // <|image_pad|>

  // Reads model_dir/config.json of a Qwen2_5_VLForConditionalGeneration folder: the text settings
  // under text_config (transformers 5) or top-level (the hub's older configs). A missing
  // mrope_section or another architecture is a UserError naming the file and the key.
  static VisionModelConfig from_folder(const std::filesystem::path& model_dir);
};

// The text side of a vision-language config.json (Qwen2.5-VL's and Qwen3-VL's): the text settings
// under text_config (transformers 5) or top-level, read as `text_architecture` (model_type
// `text_model_type`); mrope_section (and Qwen3-VL's mrope_interleaved) from rope_parameters or
// rope_scaling; image_token_id. Refused, naming config.json: architectures other than
// [`architecture`], no mrope_section, an image_token_id outside the vocabulary.
struct VisionLanguageText {
  io::ModelConfig text;
  std::vector<int64_t> mrope_section;
  bool mrope_interleaved = false;
  int32_t image_token_id = 151655;
};
VisionLanguageText read_vision_language_text(const std::filesystem::path& model_dir, std::string_view architecture,
                                             std::string_view text_architecture, std::string_view text_model_type);

// The splice's index input, I32 [B, T] (see above).
inline constexpr const char* kVisionSpliceIndex = "vision_splice_index";

// The index for input ids [batch, sequence] and `features` merged image features: a count of
// image pads other than `features` is a UserError naming `where`.
std::vector<int32_t> vision_splice_index(std::span<const int32_t> input_ids, int64_t batch, int64_t sequence,
                                         int32_t image_token_id, int64_t features, std::string_view where);

struct VisionModelGraph {
  graph::Graph graph;
  graph::TensorId loss = graph::kNoTensor;
  graph::TensorId features = graph::kNoTensor;
};

// The whole model for one micro-batch of options.batch × options.sequence tokens with `patches`
// patches of pixel_values; the tower's parameters are trainable when `train_vision`. Inputs: the
// decoder's (position_ids I32 [3, B, T]), the tower's (models/vision_tower.h) and
// vision_splice_index. options.mrope_section and splice_embeddings are set here.
VisionModelGraph build_vision_model_graph(const VisionModelConfig& config, const graph::OpRegistry& registry,
                                          DecoderGraphOptions options, int64_t patches, bool train_vision);

// The text decoder's parameters (models/model_spec.h) with hf_name as the checkpoint in
// model_dir spells it: transformers 5's model.language_model.* or the hub's model.*.
std::vector<ParameterSpec> vision_model_text_parameters(const VisionModelConfig& config,
                                                        const std::filesystem::path& model_dir);
std::vector<ParameterSpec> vision_model_text_parameters(const io::ModelConfig& text,
                                                        const std::filesystem::path& model_dir);

// Reads the text decoder's parameters (vision_model_text_parameters) from model_dir, checking
// each tensor's element count; a missing or mis-sized tensor is a UserError naming it.
void load_vision_model_text_weights(const std::filesystem::path& model_dir, const VisionModelConfig& config,
                                    const std::function<void(const ParameterSpec&, const io::SafetensorsTensor&)>& sink);
void load_vision_model_text_weights(const std::filesystem::path& model_dir, const io::ModelConfig& text,
                                    const std::function<void(const ParameterSpec&, const io::SafetensorsTensor&)>& sink);

}  // namespace surogate::models
