// The Qwen3-VL vision tower (transformers' Qwen3VLVisionModel) as a graph:
//
//   pixel_values [P, C·T·p·p] ─ linear + bias (patch_embed: the Conv3d with kernel = stride)
//   ─ + the learned position embeddings resampled to each grid: Σ_k embedding(taps_k, pos_embed)
//       · weights_k over the four bilinear taps (vision/position_interpolation.h)
//   ─ depth × block: h += proj(attention(rope(q), rope(k), v)) over layernorm(h), within each
//     frame; h += fc2(gelu_tanh(fc1(layernorm(h)))); every linear and norm with a bias
//     └ after each block of deepstack_visual_indexes: a DeepStack merger (reshape [P / m², m²·H],
//       layernorm, fc1, exact GELU, fc2) ─► deepstack feature j [P / m², out_hidden_size]
//   ─ merger: layernorm, reshape [P / m², m²·H], fc1, exact GELU, fc2 ─► features [P / m², out]
//
// Patches stay in pixel_values' merge-window order throughout (no windows, no reorder). The 2-D
// rotary tables are Qwen2.5-VL's (mrope_cos_sin over (frame, row, column), inv_freq = [f, f],
// mrope_section = [0, head_dim / 4, head_dim / 4]). Parameters carry the checkpoint's names
// (`visual.blocks.0.attn.qkv.weight`, ...), the patch embedding's [H, C, T, p, p] weight as the
// graph's [H, C·T·p·p]. The interpolation weights are an input of [4, P] (one a tap and patch),
// applied to the gathered rows by `scale_rows`.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "core/dtype.h"
#include "graph/builder.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "io/safetensors.h"
#include "models/vision_tower.h"
#include "runtime/backend.h"

namespace surogate::models {

// config.json's vision_config of a Qwen3VLForConditionalGeneration folder.
struct Qwen3VisionTowerConfig {
  int64_t depth = 0, hidden_size = 0, intermediate_size = 0, num_heads = 0, out_hidden_size = 0;
  int64_t in_channels = 3, patch_size = 16, temporal_patch_size = 2, spatial_merge_size = 2;
  int64_t num_position_embeddings = 2304;
  std::vector<int64_t> deepstack_visual_indexes;
  std::string hidden_act = "gelu_pytorch_tanh";  // the block MLP's; the mergers' GELU is exact
  double rope_theta = 10000.0;

  int64_t head_dim() const { return hidden_size / num_heads; }
  int64_t patch_columns() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  int64_t merge_unit() const { return spatial_merge_size * spatial_merge_size; }
  int64_t grid_side() const;  // sqrt(num_position_embeddings), checked whole when read

  // Reads `config_json`'s vision_config; a missing or unsupported key is a UserError naming the
  // file and the key.
  static Qwen3VisionTowerConfig from_config_json(const std::filesystem::path& config_json);
};

std::vector<VisionTowerParameter> qwen3_vision_tower_parameters(const Qwen3VisionTowerConfig& config);

// The graph's inputs besides those of vision_tower.h it shares (pixel_values,
// vision_position_ids, vision_frame_documents).
inline constexpr const char* kVisionInterpolationTaps = "vision_interpolation_taps";        // I32 [4, P]
inline constexpr const char* kVisionInterpolationWeights = "vision_interpolation_weights";  // [4, P]

struct Qwen3VisionTowerOutputs {
  graph::TensorId features = graph::kNoTensor;  // [P / m², out_hidden_size]
  // One per deepstack_visual_indexes entry, same shape, in block order (transformers'
  // deepstack_features: the text model adds entry i after its layer i).
  std::vector<graph::TensorId> deepstack;
};

struct Qwen3VisionTowerGraph {
  graph::Graph graph;
  Qwen3VisionTowerOutputs outputs;
};

// Adds the tower to `b` (its inputs and parameters) for `patches` patches in `dtype`;
// parameters are trainable when `trainable`. Nothing is marked as an output.
Qwen3VisionTowerOutputs add_qwen3_vision_tower(graph::GraphBuilder& b, const Qwen3VisionTowerConfig& config,
                                               int64_t patches, DType dtype, bool trainable);

// The tower alone, its features and DeepStack features marked as outputs.
Qwen3VisionTowerGraph build_qwen3_vision_tower_graph(const Qwen3VisionTowerConfig& config,
                                                     const graph::OpRegistry& registry, int64_t patches, DType dtype,
                                                     bool trainable = true);

// The host values of the tower's index inputs for a batch's grids.
struct Qwen3VisionTowerInputs {
  std::vector<int32_t> position_ids;        // [3, P] (frame, row, column)
  std::vector<int32_t> frame_document_ids;  // [P]
  std::vector<int32_t> interpolation_taps;  // [4, P]
  std::vector<float> interpolation_weights; // [4, P], a tap's weight a patch (fp32; converted to the plan's dtype when bound)
};
Qwen3VisionTowerInputs qwen3_vision_tower_inputs(const Qwen3VisionTowerConfig& config,
                                                 std::span<const std::array<int64_t, 3>> grid_thw);

// The tower's inputs of `plan` bound to `inputs` and to pixel_values / interpolation weights
// already in the plan's dtype (fp32, or bf16 on CUDA); all must outlive the bindings.
std::vector<runtime::InputBinding> qwen3_vision_tower_bindings(const compiler::ExecutionPlan& plan,
                                                               const Qwen3VisionTowerInputs& inputs,
                                                               std::span<const std::byte> pixel_values,
                                                               std::span<const std::byte> interpolation_weights);

// Reads every tower parameter from the checkpoint in `model_dir` under its `visual.` name or
// transformers 5's `model.visual.` one (calls `sink` in qwen3_vision_tower_parameters' order); a
// missing tensor or a size config.json does not imply is a UserError naming the file and tensor.
void load_qwen3_vision_tower_weights(
    const std::filesystem::path& model_dir, const Qwen3VisionTowerConfig& config,
    const std::function<void(const VisionTowerParameter&, const io::SafetensorsTensor&)>& sink);

}  // namespace surogate::models
