// Runs the Qwen3-VL vision tower graph (models/qwen3_vision_tower.h) forward and backward for the
// loss sum(features · projection) + Σ_i sum(deepstack_i · projection_i): on the CPU backend in
// fp32 (test_qwen3_vision_tower.cpp on the committed fixture) or on a given backend in a given
// precision (run_precision.h: the CUDA comparison).
#pragma once

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/execution_plan.h"
#include "graph/builder.h"
#include "io/safetensors.h"
#include "models/qwen3_vision_tower.h"
#include "ops/defs/register_ops.h"
#include "run_precision.h"
#include "runtime/cpu_backend.h"

namespace surogate::models::testing {

struct Qwen3VisionTowerRun {
  std::vector<float> features;                           // [merged, out_hidden_size]
  std::vector<std::vector<float>> deepstack;             // each [merged, out_hidden_size], block order
  std::map<std::string, std::vector<float>> gradients;   // every parameter's, by checkpoint name
};

inline std::string qwen3_projection_name(size_t deepstack) { return fmt::format("projection.{}", deepstack); }

// The training plan of the tower and the projected loss ("projection", "projection.<i>": inputs).
inline compiler::ExecutionPlan qwen3_vision_tower_plan(const Qwen3VisionTowerConfig& config,
                                                       const graph::OpRegistry& registry, int64_t patches,
                                                       DType dtype) {
  Qwen3VisionTowerGraph tower = build_qwen3_vision_tower_graph(config, registry, patches, dtype);
  graph::GraphBuilder b(registry, std::move(tower.graph));
  const graph::Shape shape = b.type(tower.outputs.features).shape;
  graph::TensorId loss = b.op("sum", {b.op("mul", {tower.outputs.features, b.input("projection", dtype, shape)})});
  for (size_t i = 0; i < tower.outputs.deepstack.size(); ++i) {
    const graph::TensorId projected =
        b.op("mul", {tower.outputs.deepstack[i], b.input(qwen3_projection_name(i), dtype, shape)});
    loss = b.op("add", {loss, b.op("sum", {projected})});
  }
  b.mark_output(loss);
  return compiler::compile_training(b.finish(), loss, registry);
}

// projections[0] is the features', projections[1 + i] deepstack feature i's.
inline Qwen3VisionTowerRun run_qwen3_vision_tower(const std::filesystem::path& model_dir,
                                                  const Qwen3VisionTowerConfig& config,
                                                  std::span<const std::array<int64_t, 3>> grids,
                                                  std::span<const float> pixel_values,
                                                  const std::vector<std::vector<float>>& projections,
                                                  runtime::Backend& backend, const RunPrecision& precision) {
  const int64_t patches = static_cast<int64_t>(pixel_values.size()) / config.patch_columns();
  const graph::OpRegistry registry = ops::make_model_registry();
  const compiler::ExecutionPlan plan = qwen3_vision_tower_plan(config, registry, patches, precision.dtype);
  backend.load(plan, registry);
  load_qwen3_vision_tower_weights(model_dir, config, [&](const VisionTowerParameter& parameter,
                                                         const io::SafetensorsTensor& t) {
    backend.write(plan.tensor(parameter.name), HostValues(io::read_tensor_as_float32(t), precision).bytes());
  });
  backend.zero_gradients();
  const Qwen3VisionTowerInputs inputs = qwen3_vision_tower_inputs(config, grids);
  const HostValues pixels(pixel_values, precision), weights(inputs.interpolation_weights, precision);
  std::vector<runtime::InputBinding> bindings =
      qwen3_vision_tower_bindings(plan, inputs, pixels.bytes(), weights.bytes());
  std::vector<HostValues> projected;
  projected.reserve(projections.size());
  for (size_t i = 0; i < projections.size(); ++i) {
    projected.emplace_back(projections[i], precision);
    bindings.push_back({plan.tensor(i == 0 ? std::string("projection") : qwen3_projection_name(i - 1)),
                        projected.back().bytes()});
  }
  backend.execute(bindings);
  Qwen3VisionTowerRun run;
  const size_t count = projections[0].size();
  run.features = read_floats(backend, plan.tensor("vision.merger.fc2"), count, precision.dtype);
  for (size_t i = 0; i < config.deepstack_visual_indexes.size(); ++i) {
    // Feature i comes from the merger of the i-th deepstack block in block order.
    std::vector<int64_t> sorted = config.deepstack_visual_indexes;
    std::sort(sorted.begin(), sorted.end());
    const auto j = std::find(config.deepstack_visual_indexes.begin(), config.deepstack_visual_indexes.end(),
                             sorted[i]) - config.deepstack_visual_indexes.begin();
    run.deepstack.push_back(read_floats(backend, plan.tensor(fmt::format("vision.deepstack.{}.fc2", j)), count,
                                        precision.dtype));
  }
  for (const VisionTowerParameter& parameter : qwen3_vision_tower_parameters(config)) {
    run.gradients[parameter.name] = read_floats(backend, plan.parameter_gradients.at(plan.tensor(parameter.name)),
                                                static_cast<size_t>(graph::shape_numel(parameter.shape)), precision.dtype);
  }
  return run;
}

// fp32 on the CPU backend, the fixture's weights as stored.
inline Qwen3VisionTowerRun run_qwen3_vision_tower(const std::filesystem::path& model_dir,
                                                  const Qwen3VisionTowerConfig& config,
                                                  std::span<const std::array<int64_t, 3>> grids,
                                                  std::span<const float> pixel_values,
                                                  const std::vector<std::vector<float>>& projections) {
  runtime::CpuBackend backend;
  return run_qwen3_vision_tower(model_dir, config, grids, pixel_values, projections, backend, RunPrecision{});
}

}  // namespace surogate::models::testing
