// Runs the Qwen2.5-VL model graph (models/vision_model.h) forward and backward on the CPU backend
// in fp32 for rows given as transformers gives them (input_ids and labels I32 [B, T], labels -100
// outside the loss; pixel_values; grid_thw I32 [images, 3], the images in row order): what
// test_vision_model.cpp checks on the committed fixture and vision_model_tool hands to
// tests/python/test_vision_model.py. The loss is transformers' mean over the shifted labels
// (loss_scale = 1 / scored tokens); positions come from vision/mrope_positions.h row by row. Also on
// a given backend in a given precision (run_precision.h: the CUDA comparison).
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/vision_model.h"
#include "ops/cross_entropy.h"
#include "vision/mrope_positions.h"
#include "vision_tower_run.h"

namespace surogate::models::testing {

// An I32 tensor of `inputs` (a UserError naming it otherwise).
inline std::vector<int32_t> input_ints(const io::SafetensorsFile& inputs, const std::string& name) {
  const io::SafetensorsTensor& tensor = inputs.tensor(name);
  if (tensor.dtype != DType::I32) fail_user("inputs: {} must be I32", name);
  std::vector<int32_t> values(static_cast<size_t>(tensor.element_count()));
  std::memcpy(values.data(), tensor.bytes.data(), tensor.bytes.size());
  return values;
}

struct VisionModelRun {
  float loss = 0;
  std::map<std::string, std::vector<float>> gradients;  // text: the checkpoint's names; tower: model.visual.*
  std::vector<int32_t> position_ids;                     // [3, B, T], vision/mrope_positions.h per row
};

// Every parameter gradient of `plan`, under the checkpoint names of `engine_names`
// (checkpoint name → engine name).
inline std::map<std::string, std::vector<float>> named_gradients(const runtime::Backend& backend,
                                                                 const compiler::ExecutionPlan& plan,
                                                                 const std::map<std::string, std::string>& engine_names,
                                                                 DType dtype) {
  std::map<std::string, std::vector<float>> gradients;
  for (const auto& [hf_name, engine_name] : engine_names) {
    const graph::TensorId id = plan.tensor(engine_name);
    gradients[hf_name] = read_floats(backend, plan.parameter_gradients.at(id),
                                     static_cast<size_t>(graph::shape_numel(plan.graph.tensor(id).type.shape)), dtype);
  }
  return gradients;
}

// The training plan of the model (tower trained too) for rows of `sequence` tokens.
inline compiler::ExecutionPlan vision_model_plan(const VisionModelConfig& config, const graph::OpRegistry& registry,
                                                 int64_t batch, int64_t sequence, int64_t patches, DType dtype) {
  DecoderGraphOptions options;
  options.batch = batch;
  options.sequence = sequence;
  options.dtype = dtype;
  VisionModelGraph model = build_vision_model_graph(config, registry, options, patches, /*train_vision=*/true);
  return compiler::compile_training(std::move(model.graph), model.loss, registry);
}

// The rows of `inputs` as the graph reads them: positions from vision/mrope_positions.h row by
// row ([3, B, T]), targets shifted, loss_scale = 1 / scored tokens.
struct VisionRows {
  std::vector<int32_t> input_ids, labels;
  std::vector<std::array<int64_t, 3>> grids;
  std::vector<float> pixel_values;
  int64_t batch = 0, sequence = 0;
  std::vector<int32_t> position_ids, targets, documents;
  float loss_scale = 0;
};

inline VisionRows read_vision_rows(const io::SafetensorsFile& inputs, int32_t image_token_id, int merge) {
  VisionRows rows;
  rows.input_ids = input_ints(inputs, "input_ids");
  rows.labels = input_ints(inputs, "labels");
  const std::vector<int32_t> flat_grids = input_ints(inputs, "grid_thw");
  for (size_t i = 0; i + 2 < flat_grids.size(); i += 3) {
    rows.grids.push_back({flat_grids[i], flat_grids[i + 1], flat_grids[i + 2]});
  }
  rows.pixel_values = io::read_tensor_as_float32(inputs.tensor("pixel_values"));
  rows.batch = inputs.tensor("input_ids").shape[0];
  rows.sequence = inputs.tensor("input_ids").shape[1];
  const int64_t batch = rows.batch, sequence = rows.sequence;
  const auto& grids = rows.grids;
  const auto& input_ids = rows.input_ids;

  // Each row's positions from its own images (the grids in order, as many as its pads take),
  // laid out [3, B, T].
  rows.position_ids.resize(static_cast<size_t>(3 * batch * sequence));
  size_t next_image = 0;
  for (int64_t row = 0; row < batch; ++row) {
    const std::span<const int32_t> ids(input_ids.data() + row * sequence, static_cast<size_t>(sequence));
    int64_t pads = std::count(ids.begin(), ids.end(), image_token_id);
    const size_t first = next_image;
    for (; pads > 0 && next_image < grids.size(); ++next_image) {
      pads -= grids[next_image][0] * grids[next_image][1] * grids[next_image][2] / (merge * merge);
    }
    const std::span<const std::array<int64_t, 3>> row_grids(grids.data() + first, next_image - first);
    const vision::MropePositions positions = vision::mrope_positions(ids, image_token_id, row_grids, merge, {}, "inputs");
    for (int64_t axis = 0; axis < 3; ++axis) {
      std::copy_n(positions.ids.begin() + axis * sequence, sequence,
                  rows.position_ids.begin() + (axis * batch + row) * sequence);
    }
  }
  if (next_image != grids.size()) fail_user("inputs: {} grids for {} images in the rows", grids.size(), next_image);
  rows.targets.assign(rows.labels.size(), ops::kIgnoreIndex);
  int64_t scored = 0;
  for (size_t t = 0; t + 1 < rows.labels.size(); ++t) {
    if ((t + 1) % static_cast<size_t>(sequence) == 0) continue;  // a row's last token predicts nothing
    rows.targets[t] = rows.labels[t + 1];
    scored += rows.targets[t] != ops::kIgnoreIndex;
  }
  rows.loss_scale = 1.0f / static_cast<float>(scored);
  rows.documents.assign(input_ids.size(), 0);
  return rows;
}

// The text rows' bindings of `plan` (input ids, positions, documents, targets, loss scale).
inline void bind_vision_rows(const compiler::ExecutionPlan& plan, const VisionRows& rows,
                             std::vector<runtime::InputBinding>& bindings) {
  auto ints = [](const std::vector<int32_t>& values) { return std::as_bytes(std::span<const int32_t>(values)); };
  bindings.push_back({plan.tensor("input_ids"), ints(rows.input_ids)});
  bindings.push_back({plan.tensor("position_ids"), ints(rows.position_ids)});
  bindings.push_back({plan.tensor("document_ids"), ints(rows.documents)});
  bindings.push_back({plan.tensor("targets"), ints(rows.targets)});
  bindings.push_back({plan.tensor("loss_scale"), std::as_bytes(std::span<const float>(&rows.loss_scale, 1))});
}

// Forward and backward of the rows in `inputs` with the weights of model_dir.
inline VisionModelRun run_vision_model(const std::filesystem::path& model_dir, const VisionModelConfig& config,
                                       const io::SafetensorsFile& inputs, runtime::Backend& backend,
                                       const RunPrecision& precision) {
  const VisionRows rows = read_vision_rows(inputs, config.image_token_id, static_cast<int>(config.vision.spatial_merge_size));
  const auto& grids = rows.grids;
  const int64_t batch = rows.batch, sequence = rows.sequence;
  const int64_t patches = static_cast<int64_t>(rows.pixel_values.size()) / config.vision.patch_columns();
  const std::vector<int32_t> splice = vision_splice_index(rows.input_ids, batch, sequence, config.image_token_id,
                                                          patches / config.vision.merge_unit(), "inputs");
  const vision::VisionTowerIndices indices =
      vision::vision_tower_indices(grids, static_cast<int>(config.vision.spatial_merge_size),
                                   static_cast<int>(config.vision.window_size), static_cast<int>(config.vision.patch_size));

  const graph::OpRegistry registry = ops::make_model_registry();
  const compiler::ExecutionPlan plan = vision_model_plan(config, registry, batch, sequence, patches, precision.dtype);
  backend.load(plan, registry);
  std::map<std::string, std::string> engine_names;  // checkpoint name → engine name
  auto write_weight = [&](const std::string& name, const io::SafetensorsTensor& t) {
    backend.write(plan.tensor(name), HostValues(io::read_tensor_as_float32(t), precision).bytes());
  };
  load_vision_model_text_weights(model_dir, config, [&](const ParameterSpec& spec, const io::SafetensorsTensor& t) {
    write_weight(spec.name, t);
    engine_names[spec.hf_name] = spec.name;
  });
  load_vision_tower_weights(model_dir, config.vision, [&](const VisionTowerParameter& parameter, const io::SafetensorsTensor& t) {
    write_weight(parameter.name, t);
    engine_names["model." + parameter.name] = parameter.name;
  });
  backend.zero_gradients();
  auto ints = [](const std::vector<int32_t>& values) { return std::as_bytes(std::span<const int32_t>(values)); };
  const HostValues pixels(rows.pixel_values, precision);
  std::vector<runtime::InputBinding> bindings = vision_tower_bindings(plan, indices, pixels.bytes());
  bind_vision_rows(plan, rows, bindings);
  bindings.push_back({plan.tensor(kVisionSpliceIndex), ints(splice)});
  backend.execute(bindings);

  VisionModelRun run;
  run.position_ids = rows.position_ids;
  backend.read(plan.tensor("loss"), std::as_writable_bytes(std::span<float>(&run.loss, 1)));
  run.gradients = named_gradients(backend, plan, engine_names, precision.dtype);
  return run;
}

// fp32 on the CPU backend, the fixture's weights as stored.
inline VisionModelRun run_vision_model(const std::filesystem::path& model_dir, const VisionModelConfig& config,
                                       const io::SafetensorsFile& inputs) {
  runtime::CpuBackend backend;
  return run_vision_model(model_dir, config, inputs, backend, RunPrecision{});
}

}  // namespace surogate::models::testing
