// The Qwen2.5-VL vision tower (transformers' Qwen2_5_VisionTransformerPretrainedModel) as a graph:
//
//   pixel_values [P, C·T·p·p] ─ linear (patch_embed: the Conv3d with kernel = stride, as a matmul
//     over pixel_values' columns) ─ embedding(patch_order) (the window reorder, a row gather)
//   ─ depth × block: h += proj(attention(rope(q), rope(k), v)) over rmsnorm(h), within windows
//     (window_document_ids) or, in fullatt_block_indexes, within frames (frame_document_ids);
//     h += down(silu(gate) · up) over rmsnorm(h); every linear with a bias
//   ─ merger: rmsnorm (ln_q), reshape [P / m², m² · hidden], linear, exact GELU, linear
//   ─ embedding(merged_restore) (the inverse window reorder) ─► features [P / m², out_hidden_size]
//
// The 2-D rotary tables are mrope_cos_sin over (frame, row, column) positions with inv_freq
// = [f, f] and mrope_section = [0, head_dim / 4, head_dim / 4] (vision/patch_positions.h). The
// index inputs come from vision::vision_tower_indices (vision/window_layout.h). Parameters carry
// the checkpoint's names (`visual.blocks.0.attn.qkv.weight`, ...); the patch embedding's
// [hidden, C, T, p, p] weight is the graph's [hidden, C·T·p·p].
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "graph/builder.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "io/safetensors.h"
#include "compiler/execution_plan.h"
#include "runtime/backend.h"
#include "vision/window_layout.h"

namespace surogate::models {

// config.json's vision_config of a Qwen2_5_VLForConditionalGeneration folder.
struct VisionTowerConfig {
  int64_t depth = 0, hidden_size = 0, intermediate_size = 0, num_heads = 0, out_hidden_size = 0;
  int64_t in_channels = 3, patch_size = 14, temporal_patch_size = 2, spatial_merge_size = 2, window_size = 112;
  std::vector<int64_t> fullatt_block_indexes;
  double rope_theta = 10000.0;

  int64_t head_dim() const { return hidden_size / num_heads; }
  int64_t patch_columns() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  int64_t merge_unit() const { return spatial_merge_size * spatial_merge_size; }

  // Reads `config_json`'s vision_config; a missing or unsupported key is a UserError naming the
  // file and the key (hidden_act other than silu, a head_dim not a multiple of 4, ...).
  static VisionTowerConfig from_config_json(const std::filesystem::path& config_json);
};

// The vision rotary embedding's inv_freq for mrope_cos_sin (Qwen2.5-VL's and Qwen3-VL's): the
// default RoPE frequencies of dimension head_dim / 2, once for the row and once for the column.
std::vector<double> vision_inverse_frequencies(int64_t head_dim, double rope_theta);

struct VisionTowerParameter {
  std::string name;    // the checkpoint's name, "visual." + transformers' module path
  graph::Shape shape;  // the graph's shape (the patch embedding flattened to 2-D)
};
std::vector<VisionTowerParameter> vision_tower_parameters(const VisionTowerConfig& config);

// The graph's inputs, named as here.
inline constexpr const char* kVisionPixelValues = "pixel_values";              // [P, C·T·p·p]
inline constexpr const char* kVisionPatchOrder = "vision_patch_order";         // I32 [1, P]
inline constexpr const char* kVisionPositionIds = "vision_position_ids";       // I32 [3, 1, P]
inline constexpr const char* kVisionWindowDocuments = "vision_window_documents";  // I32 [1, P]
inline constexpr const char* kVisionFrameDocuments = "vision_frame_documents";    // I32 [1, P]
inline constexpr const char* kVisionMergedRestore = "vision_merged_restore";   // I32 [P / m²]

struct VisionTowerGraph {
  graph::Graph graph;
  graph::TensorId features = graph::kNoTensor;  // [P / m², out_hidden_size], pixel_values' merged order
};

// The tower for `patches` patches (all images of a batch together) in `dtype`; parameters are
// trainable when `trainable`. `features` is marked as an output.
VisionTowerGraph build_vision_tower_graph(const VisionTowerConfig& config, const graph::OpRegistry& registry,
                                          int64_t patches, DType dtype, bool trainable = true);

// Adds the tower to `b` (its inputs, named as above, and its parameters) and returns the features,
// not marked as an output: how the vision-language model (models/vision_model.h) embeds it.
graph::TensorId add_vision_tower(graph::GraphBuilder& b, const VisionTowerConfig& config, int64_t patches, DType dtype,
                                 bool trainable);

// The tower's inputs of `plan` bound to `indices` (vision/window_layout.h's vision_tower_indices
// for the batch's grids) and pixel_values (in the plan's dtype: fp32, or bf16 on CUDA); both must
// outlive the bindings.
std::vector<runtime::InputBinding> vision_tower_bindings(const compiler::ExecutionPlan& plan,
                                                         const vision::VisionTowerIndices& indices,
                                                         std::span<const std::byte> pixel_values);

// Reads every tower parameter from the checkpoint in `model_dir` (single file or sharded), under
// its `visual.` name or transformers 5's `model.visual.` one, checking the element count; calls
// `sink` once per parameter in vision_tower_parameters' order. A missing tensor or a size that
// does not match config.json is a UserError naming the file and the tensor.
void load_vision_tower_weights(
    const std::filesystem::path& model_dir, const VisionTowerConfig& config,
    const std::function<void(const VisionTowerParameter&, const io::SafetensorsTensor&)>& sink);

// What load_vision_tower_weights does for any list of tower parameters (Qwen3-VL's too).
void load_visual_weights(const std::filesystem::path& model_dir, std::span<const VisionTowerParameter> parameters,
                         const std::function<void(const VisionTowerParameter&, const io::SafetensorsTensor&)>& sink);

// A UserError naming the file and `tensor` unless it is a float tensor of `elements` elements
// (`what`: the config section that implies the size).
void require_float_elements(const io::SafetensorsCheckpoint& checkpoint, const io::SafetensorsTensor& tensor,
                            int64_t elements, std::string_view what);

}  // namespace surogate::models
