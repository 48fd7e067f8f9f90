// Runs the Qwen3-VL model graph (models/qwen3_vl_model.h) forward and backward for rows given as
// transformers gives them (vision_model_run.h's VisionRows: input_ids, labels, pixel_values,
// grid_thw): on the CPU backend in fp32 (test_qwen3_vl_model.cpp on the committed fixture) or on a
// given backend in a given precision (run_precision.h: the CUDA comparison).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "models/qwen3_vl_model.h"
#include "qwen3_vision_tower_run.h"
#include "vision_model_run.h"

namespace surogate::models::testing {

// The training plan of the model (tower trained too) for rows of `sequence` tokens.
inline compiler::ExecutionPlan qwen3_vl_model_plan(const Qwen3VLModelConfig& config, const graph::OpRegistry& registry,
                                                   int64_t batch, int64_t sequence, int64_t patches, DType dtype) {
  DecoderGraphOptions options;
  options.batch = batch;
  options.sequence = sequence;
  options.dtype = dtype;
  Qwen3VLModelGraph model = build_qwen3_vl_model_graph(config, registry, options, patches, /*train_vision=*/true);
  return compiler::compile_training(std::move(model.graph), model.loss, registry);
}

inline VisionModelRun run_qwen3_vl_model(const std::filesystem::path& model_dir, const Qwen3VLModelConfig& config,
                                         const io::SafetensorsFile& inputs, runtime::Backend& backend,
                                         const RunPrecision& precision) {
  const VisionRows rows = read_vision_rows(inputs, config.image_token_id, static_cast<int>(config.vision.spatial_merge_size));
  const int64_t patches = static_cast<int64_t>(rows.pixel_values.size()) / config.vision.patch_columns();
  const std::vector<int32_t> splice = vision_splice_index(rows.input_ids, rows.batch, rows.sequence,
                                                          config.image_token_id, patches / config.vision.merge_unit(),
                                                          "inputs");
  const std::vector<int32_t> deepstack = vision_deepstack_index(splice, rows.batch * rows.sequence);
  const Qwen3VisionTowerInputs tower_inputs = qwen3_vision_tower_inputs(config.vision, rows.grids);

  const graph::OpRegistry registry = ops::make_model_registry();
  const compiler::ExecutionPlan plan =
      qwen3_vl_model_plan(config, registry, rows.batch, rows.sequence, patches, precision.dtype);
  backend.load(plan, registry);
  std::map<std::string, std::string> engine_names;  // checkpoint name → engine name
  auto write_weight = [&](const std::string& name, const io::SafetensorsTensor& t) {
    backend.write(plan.tensor(name), HostValues(io::read_tensor_as_float32(t), precision).bytes());
  };
  load_vision_model_text_weights(model_dir, config.text, [&](const ParameterSpec& spec, const io::SafetensorsTensor& t) {
    write_weight(spec.name, t);
    engine_names[spec.hf_name] = spec.name;
  });
  load_qwen3_vision_tower_weights(model_dir, config.vision,
                                  [&](const VisionTowerParameter& parameter, const io::SafetensorsTensor& t) {
                                    write_weight(parameter.name, t);
                                    engine_names["model." + parameter.name] = parameter.name;
                                  });
  backend.zero_gradients();
  auto ints = [](const std::vector<int32_t>& values) { return std::as_bytes(std::span<const int32_t>(values)); };
  const HostValues pixels(rows.pixel_values, precision), weights(tower_inputs.interpolation_weights, precision);
  std::vector<runtime::InputBinding> bindings =
      qwen3_vision_tower_bindings(plan, tower_inputs, pixels.bytes(), weights.bytes());
  bind_vision_rows(plan, rows, bindings);
  bindings.push_back({plan.tensor(kVisionSpliceIndex), ints(splice)});
  bindings.push_back({plan.tensor(kVisionDeepstackIndex), ints(deepstack)});
  backend.execute(bindings);

  VisionModelRun run;
  run.position_ids = rows.position_ids;
  backend.read(plan.tensor("loss"), std::as_writable_bytes(std::span<float>(&run.loss, 1)));
  run.gradients = named_gradients(backend, plan, engine_names, precision.dtype);
  return run;
}

// fp32 on the CPU backend, the fixture's weights as stored.
inline VisionModelRun run_qwen3_vl_model(const std::filesystem::path& model_dir, const Qwen3VLModelConfig& config,
                                         const io::SafetensorsFile& inputs) {
  runtime::CpuBackend backend;
  return run_qwen3_vl_model(model_dir, config, inputs, backend, RunPrecision{});
}

}  // namespace surogate::models::testing
