// Qwen3-VL (transformers' Qwen3VLForConditionalGeneration, dense) as one graph: the vision tower
// (models/qwen3_vision_tower.h) over all images of the micro-batch, its features spliced into the
// token embeddings at the <|image_pad|> positions as Qwen2.5-VL's are (models/vision_model.h),
// the Qwen3 text decoder (q/k norms per head, then rope) with the interleaved M-RoPE tables
// (mrope_cos_sin with mrope_interleaved) over the [3, B, T] positions, and after text layer i
// (i < the DeepStack count) DeepStack feature i added to the hidden states at the image tokens
// (transformers' _deepstack_process); then the LM loss on the shifted targets.
//
// The DeepStack add uses existing ops: feature i [N, H] is concatenated under a zero row into a
// table [1 + N, H], from which `embedding` gathers row vision_deepstack_index[b, t] (0 for a text
// token, 1 + k for the k-th image pad), and the result is added to the stream. Its gradient
// scatter-adds back into feature i; the zero row's is dropped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "models/decoder_graph.h"
#include "models/qwen3_vision_tower.h"
#include "models/vision_model.h"

namespace surogate::models {

struct Qwen3VLModelConfig {
  io::ModelConfig text;                // the text decoder, read as Qwen3ForCausalLM
  Qwen3VisionTowerConfig vision;
  std::vector<int64_t> mrope_section;  // [t, h, w]
  bool mrope_interleaved = true;
  int32_t image_token_id = 151655;     // <|image_pad|>

  // Reads model_dir/config.json of a Qwen3VLForConditionalGeneration folder (the text settings
  // under text_config). Refused, naming config.json: another architecture, no mrope_section, an
  // image_token_id outside the vocabulary, an out_hidden_size other than the text hidden_size,
  // more DeepStack features than text layers.
  static Qwen3VLModelConfig from_folder(const std::filesystem::path& model_dir);
};

// The DeepStack index input, I32 [B, T] (see above).
inline constexpr const char* kVisionDeepstackIndex = "vision_deepstack_index";

// The DeepStack index from the splice index (vision_splice_index's, of `rows` = B · T rows):
// 0 where the splice reads a token's embedding, 1 + k where it reads image feature k.
std::vector<int32_t> vision_deepstack_index(std::span<const int32_t> splice_index, int64_t rows);

struct Qwen3VLModelGraph {
  graph::Graph graph;
  graph::TensorId loss = graph::kNoTensor;
  Qwen3VisionTowerOutputs features;
};

// The whole model for one micro-batch of options.batch × options.sequence tokens with `patches`
// patches of pixel_values; the tower's parameters are trainable when `train_vision`. Inputs: the
// decoder's (position_ids I32 [3, B, T]), the tower's (models/qwen3_vision_tower.h),
// vision_splice_index and vision_deepstack_index. options' M-RoPE fields, splice_embeddings and
// after_layer are set here.
Qwen3VLModelGraph build_qwen3_vl_model_graph(const Qwen3VLModelConfig& config, const graph::OpRegistry& registry,
                                             DecoderGraphOptions options, int64_t patches, bool train_vision);

}  // namespace surogate::models
