// Builds the Qwen3-VL vision tower graph; see qwen3_vision_tower.h.
#include "models/qwen3_vision_tower.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "models/vision_tower_parts.h"
#include "vision/patch_positions.h"
#include "vision/position_interpolation.h"

namespace surogate::models {
namespace qwen3_tower {
namespace {
using graph::GraphBuilder;
using graph::TensorId;

// The eps of every nn.LayerNorm of Qwen3VLVisionModel, fixed in transformers (not in the config).
constexpr double kNormEps = 1e-6;

using Qwen3TowerParameters = vision_parts::TowerParameters;
constexpr auto linear = vision_parts::biased_linear;

TensorId layernorm(GraphBuilder& b, const Qwen3TowerParameters& p, TensorId x,
                   const std::string& prefix, const std::string& label) {
  return b.op("layernorm", {x, p.get(prefix + ".weight"), p.get(prefix + ".bias")},
              {{"eps", kNormEps}}, label)[0];
}

std::string block_approximation(const Qwen3VisionTowerConfig& config) {
  return config.hidden_act == "gelu" ? "none" : "tanh";
}

// Qwen3VLVisionBlock: pre-norm attention within the frame and the GELU MLP, each added.
TensorId qwen3_vision_block(GraphBuilder& b, const Qwen3TowerParameters& p,
                            const Qwen3VisionTowerConfig& config, int64_t block, TensorId hidden,
                            TensorId cos, TensorId sin, TensorId documents) {
  const std::string prefix = fmt::format("visual.blocks.{}", block);
  auto scope = b.scope(fmt::format("vision.blocks.{}", block));
  TensorId normed = layernorm(b, p, hidden, prefix + ".norm1", "norm1");
  hidden = vision_parts::vision_attention_residual(b, p, hidden, normed, prefix, cos, sin,
                                                   documents, config.hidden_size, config.num_heads);
  normed = layernorm(b, p, hidden, prefix + ".norm2", "norm2");
  TensorId up = linear(b, p, normed, prefix + ".mlp.linear_fc1", "fc1");
  TensorId activated = b.op("gelu", {up}, {{"approximate", block_approximation(config)}}, "gelu");
  return b.op("add", {hidden, linear(b, p, activated, prefix + ".mlp.linear_fc2", "fc2")},
              nlohmann::json::object(), "mlp_residual");
}

// Qwen3VLVisionPatchMerger: the final one normalises each patch, then groups merge² of them;
// a DeepStack one (postshuffle) groups first and normalises the group.
TensorId merger(GraphBuilder& b, const Qwen3TowerParameters& p,
                const Qwen3VisionTowerConfig& config, TensorId hidden, int64_t merged,
                const std::string& prefix, const std::string& label, bool postshuffle) {
  auto scope = b.scope(label);
  const nlohmann::json grouped_shape{{"shape", {merged, config.hidden_size * config.merge_unit()}}};
  TensorId grouped = postshuffle
                         ? layernorm(b, p, b.op("reshape", {hidden}, grouped_shape, "group"),
                                     prefix + ".norm", "norm")
                         : b.op("reshape", {layernorm(b, p, hidden, prefix + ".norm", "norm")},
                                grouped_shape, "group");
  TensorId up = linear(b, p, grouped, prefix + ".linear_fc1", "fc1");
  TensorId activated = b.op("gelu", {up}, nlohmann::json::object(), "gelu");
  return linear(b, p, activated, prefix + ".linear_fc2", "fc2");
}

// Σ_k embedding(taps_k, pos_embed) · weights_k: the learned table resampled to each grid.
TensorId interpolated_positions(GraphBuilder& b, const Qwen3TowerParameters& p, TensorId taps,
                                TensorId weights) {
  auto scope = b.scope("vision.pos_embed");
  TensorId gathered = b.op("embedding", {taps, p.get("visual.pos_embed.weight")},
                           nlohmann::json::object(), "gather");
  // Each gathered row [tap, patch, ·] times its tap's weight [tap, patch]: one weight a patch is
  // all the host uploads (broadcast to [4, P, H] it was ~140 MB a micro-batch at Qwen3-VL-8B's shape).
  TensorId weighted = b.op("scale_rows", {gathered, weights}, nlohmann::json::object(), "weigh");
  graph::OpOutputs per_tap =
      b.op("split", {weighted}, {{"axis", 0}, {"sizes", {1, 1, 1, 1}}}, "taps");
  TensorId sum = b.op("add", {per_tap[0], per_tap[1]}, nlohmann::json::object(), "sum01");
  sum = b.op("add", {sum, per_tap[2]}, nlohmann::json::object(), "sum012");
  return b.op("add", {sum, per_tap[3]}, nlohmann::json::object(), "sum");  // [1, P, H]
}

}  // namespace
}  // namespace qwen3_tower

using graph::GraphBuilder;
using graph::TensorId;
using qwen3_tower::Qwen3TowerParameters;

Qwen3VisionTowerOutputs add_qwen3_vision_tower(GraphBuilder& b,
                                               const Qwen3VisionTowerConfig& config,
                                               int64_t patches, DType dtype, bool trainable) {
  if (patches <= 0 || patches % config.merge_unit() != 0) {
    fail_user("vision tower: {} patches is not a positive multiple of spatial_merge_size² = {}",
              patches, config.merge_unit());
  }
  const int64_t merged = patches / config.merge_unit();
  // [1, P, ·]: the attention op reads [batch, tokens, ·] (the bytes are pixel_values' [P,
  // C·T·p·p]).
  TensorId pixel_values = b.input(kVisionPixelValues, dtype, {1, patches, config.patch_columns()});
  TensorId position_ids = b.input(kVisionPositionIds, DType::I32, {3, 1, patches});
  TensorId frame_documents = b.input(kVisionFrameDocuments, DType::I32, {1, patches});
  TensorId taps =
      b.input(kVisionInterpolationTaps, DType::I32, {vision::kInterpolationTaps, patches});
  TensorId weights =
      b.input(kVisionInterpolationWeights, dtype, {vision::kInterpolationTaps, patches});
  Qwen3TowerParameters p;
  for (const VisionTowerParameter& parameter : qwen3_vision_tower_parameters(config)) {
    p.ids[parameter.name] = b.parameter(parameter.name, dtype, parameter.shape, trainable);
  }

  TensorId embedded =
      qwen3_tower::linear(b, p, pixel_values, "visual.patch_embed.proj", "vision.patch_embed");
  TensorId hidden =
      b.op("add", {embedded, qwen3_tower::interpolated_positions(b, p, taps, weights)},
           nlohmann::json::object(), "vision.positioned");
  graph::OpOutputs tables = vision_parts::vision_rope_tables(b, position_ids, config.head_dim(),
                                                             config.rope_theta, dtype);
  Qwen3VisionTowerOutputs outputs;
  const std::vector<int64_t>& deepstack = config.deepstack_visual_indexes;
  for (int64_t block = 0; block < config.depth; ++block) {
    hidden = qwen3_tower::qwen3_vision_block(b, p, config, block, hidden, tables[0], tables[1],
                                             frame_documents);
    // As transformers: the features come in block order, each from merger list.index(block)
    // (the list need not be sorted); the text model adds feature i after its layer i.
    const auto found = std::find(deepstack.begin(), deepstack.end(), block);
    if (found == deepstack.end()) continue;
    const auto j = static_cast<size_t>(found - deepstack.begin());
    outputs.deepstack.push_back(qwen3_tower::merger(b, p, config, hidden, merged,
                                                    fmt::format("visual.deepstack_merger_list.{}", j),
                                                    fmt::format("vision.deepstack.{}", j), true));
  }
  outputs.features = qwen3_tower::merger(b, p, config, hidden, merged, "visual.merger", "vision.merger", false);
  return outputs;
}

Qwen3VisionTowerGraph build_qwen3_vision_tower_graph(const Qwen3VisionTowerConfig& config,
                                                     const graph::OpRegistry& registry, int64_t patches, DType dtype,
                                                     bool trainable) {
  GraphBuilder b(registry);
  Qwen3VisionTowerGraph result;
  result.outputs = add_qwen3_vision_tower(b, config, patches, dtype, trainable);
  b.mark_output(result.outputs.features);
  for (TensorId feature : result.outputs.deepstack) b.mark_output(feature);
  result.graph = b.finish();
  return result;
}

Qwen3VisionTowerInputs qwen3_vision_tower_inputs(const Qwen3VisionTowerConfig& config,
                                                 std::span<const std::array<int64_t, 3>> grid_thw) {
  const auto merge = static_cast<int>(config.spatial_merge_size);
  const vision::PatchLayout layout = vision::patch_layout(grid_thw, merge);
  vision::PositionInterpolation interpolation = vision::position_interpolation(grid_thw, config.grid_side(), merge);
  Qwen3VisionTowerInputs inputs;
  inputs.position_ids = layout.position_ids;
  const size_t patches = layout.position_ids.size() / 3;
  inputs.frame_document_ids.resize(patches);
  for (size_t segment = 0; segment + 1 < layout.cu_seqlens.size(); ++segment) {
    for (int32_t i = layout.cu_seqlens[segment]; i < layout.cu_seqlens[segment + 1]; ++i) {
      inputs.frame_document_ids[static_cast<size_t>(i)] = static_cast<int32_t>(segment);
    }
  }
  inputs.interpolation_taps = std::move(interpolation.taps);
  inputs.interpolation_weights = std::move(interpolation.weights);
  return inputs;
}

std::vector<runtime::InputBinding> qwen3_vision_tower_bindings(const compiler::ExecutionPlan& plan,
                                                               const Qwen3VisionTowerInputs& inputs,
                                                               std::span<const std::byte> pixel_values,
                                                               std::span<const std::byte> interpolation_weights) {
  auto ints = [](const std::vector<int32_t>& values) { return std::as_bytes(std::span<const int32_t>(values)); };
  return {{plan.tensor(kVisionPixelValues), pixel_values},
          {plan.tensor(kVisionPositionIds), ints(inputs.position_ids)},
          {plan.tensor(kVisionFrameDocuments), ints(inputs.frame_document_ids)},
          {plan.tensor(kVisionInterpolationTaps), ints(inputs.interpolation_taps)},
          {plan.tensor(kVisionInterpolationWeights), interpolation_weights}};
}

}  // namespace surogate::models
