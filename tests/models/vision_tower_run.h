// Runs the vision tower graph (models/vision_tower.h) forward and backward on the CPU backend in
// fp32 for the loss sum(features · projection): what test_vision_tower.cpp checks on the
// committed fixture and vision_tower_tool hands to tests/python/test_vision_tower.py; or on a
// given backend in a given precision (run_precision.h: the CUDA comparison).
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
#include "io/safetensors.h"
#include "ops/defs/register_ops.h"
#include "run_precision.h"
#include "runtime/cpu_backend.h"
#include "vision/window_layout.h"

namespace surogate::models::testing {

struct VisionTowerRun {
  std::vector<float> features;                            // [merged, out_hidden_size]
  std::map<std::string, std::vector<float>> gradients;   // every parameter's, by checkpoint name
};

// The training plan of the tower and the loss sum(features · projection) ("projection": an input).
inline compiler::ExecutionPlan vision_tower_plan(const VisionTowerConfig& config, const graph::OpRegistry& registry,
                                                 int64_t patches, DType dtype) {
  VisionTowerGraph tower = build_vision_tower_graph(config, registry, patches, dtype);
  graph::GraphBuilder b(registry, std::move(tower.graph));
  const graph::TensorId projection_id = b.input("projection", dtype, b.type(tower.features).shape);
  const graph::TensorId loss = b.op("sum", {b.op("mul", {tower.features, projection_id})}, nlohmann::json::object(), "loss");
  b.mark_output(loss);
  return compiler::compile_training(b.finish(), loss, registry);
}

inline VisionTowerRun run_vision_tower(const std::filesystem::path& model_dir, const VisionTowerConfig& config,
                                       std::span<const std::array<int64_t, 3>> grids,
                                       std::span<const float> pixel_values, std::span<const float> projection,
                                       runtime::Backend& backend, const RunPrecision& precision) {
  const int64_t patches = static_cast<int64_t>(pixel_values.size()) / config.patch_columns();
  const vision::VisionTowerIndices indices =
      vision::vision_tower_indices(grids, static_cast<int>(config.spatial_merge_size),
                                   static_cast<int>(config.window_size), static_cast<int>(config.patch_size));
  const graph::OpRegistry registry = ops::make_model_registry();
  const compiler::ExecutionPlan plan = vision_tower_plan(config, registry, patches, precision.dtype);
  backend.load(plan, registry);
  load_vision_tower_weights(model_dir, config, [&](const VisionTowerParameter& parameter, const io::SafetensorsTensor& t) {
    backend.write(plan.tensor(parameter.name), HostValues(io::read_tensor_as_float32(t), precision).bytes());
  });
  backend.zero_gradients();
  const HostValues pixels(pixel_values, precision), projected(projection, precision);
  std::vector<runtime::InputBinding> bindings = vision_tower_bindings(plan, indices, pixels.bytes());
  bindings.push_back({plan.tensor("projection"), projected.bytes()});
  backend.execute(bindings);
  VisionTowerRun run;
  run.features = read_floats(backend, plan.tensor("vision.features"), projection.size(), precision.dtype);
  for (const VisionTowerParameter& parameter : vision_tower_parameters(config)) {
    run.gradients[parameter.name] = read_floats(backend, plan.parameter_gradients.at(plan.tensor(parameter.name)),
                                                static_cast<size_t>(graph::shape_numel(parameter.shape)), precision.dtype);
  }
  return run;
}

// fp32 on the CPU backend, the fixture's weights as stored.
inline VisionTowerRun run_vision_tower(const std::filesystem::path& model_dir, const VisionTowerConfig& config,
                                       std::span<const std::array<int64_t, 3>> grids,
                                       std::span<const float> pixel_values, std::span<const float> projection) {
  runtime::CpuBackend backend;
  return run_vision_tower(model_dir, config, grids, pixel_values, projection, backend, RunPrecision{});
}

}  // namespace surogate::models::testing
