// Runs the vision tower graph (models/vision_tower.h) forward and backward on the CPU backend in
// fp32 for the loss sum(features · projection): what test_vision_tower.cpp checks on the
// committed fixture and vision_tower_tool hands to tests/python/test_vision_tower.py.
#pragma once

#include <array>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "graph/builder.h"
#include "models/vision_tower.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "vision/window_layout.h"

namespace surogate::models::testing {

struct VisionTowerRun {
  std::vector<float> features;                            // [merged, out_hidden_size]
  std::map<std::string, std::vector<float>> gradients;   // every parameter's, by checkpoint name
};

inline VisionTowerRun run_vision_tower(const std::filesystem::path& model_dir, const VisionTowerConfig& config,
                                       std::span<const std::array<int64_t, 3>> grids,
                                       std::span<const float> pixel_values, std::span<const float> projection) {
  const int64_t patches = static_cast<int64_t>(pixel_values.size()) / config.patch_columns();
  const vision::VisionTowerIndices indices =
      vision::vision_tower_indices(grids, static_cast<int>(config.spatial_merge_size),
                                   static_cast<int>(config.window_size), static_cast<int>(config.patch_size));
  const graph::OpRegistry registry = ops::make_model_registry();
  VisionTowerGraph tower = build_vision_tower_graph(config, registry, patches, DType::F32);
  graph::GraphBuilder b(registry, std::move(tower.graph));
  const graph::TensorId projection_id = b.input("projection", DType::F32, b.type(tower.features).shape);
  const graph::TensorId loss = b.op("sum", {b.op("mul", {tower.features, projection_id})}, nlohmann::json::object(), "loss");
  b.mark_output(loss);
  compiler::ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry);
  runtime::CpuBackend backend;
  backend.load(plan, registry);
  load_vision_tower_weights(model_dir, config, [&](const VisionTowerParameter& parameter, const io::SafetensorsTensor& t) {
    backend.write_converted(plan.tensor(parameter.name), t.dtype, t.bytes);
  });
  backend.zero_gradients();
  std::vector<runtime::InputBinding> bindings = vision_tower_bindings(plan, indices, pixel_values);
  bindings.push_back({plan.tensor("projection"), std::as_bytes(projection)});
  backend.execute(bindings);
  VisionTowerRun run;
  run.features.resize(projection.size());
  backend.read(plan.tensor("vision.features"), std::as_writable_bytes(std::span<float>(run.features)));
  for (const VisionTowerParameter& parameter : vision_tower_parameters(config)) {
    std::vector<float>& gradient = run.gradients[parameter.name];
    gradient.resize(static_cast<size_t>(graph::shape_numel(parameter.shape)));
    backend.read(plan.parameter_gradients.at(plan.tensor(parameter.name)),
                 std::as_writable_bytes(std::span<float>(gradient)));
  }
  return run;
}

}  // namespace surogate::models::testing
