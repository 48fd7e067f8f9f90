// CPU evaluation of a model graph (see model_eval.h).
#include "models/model_eval.h"

#include <algorithm>

#include <fmt/format.h>

#include "compiler/execution_plan.h"
#include "core/error.h"
#include "models/adapter_io.h"
#include "models/model_spec.h"
#include "models/weight_io.h"
#include "runtime/cpu_backend.h"

namespace surogate::models {

void check_model_graph(const graph::Graph& graph, const io::ModelConfig& config, const BatchShape& shape,
                       const std::string& source, const std::string& shape_options) {
  const graph::TensorType batch_type{DType::I32, {shape.batch, shape.sequence}};
  for (const char* name : {kInputIds, kPositionIds, kDocumentIds, kTargets}) {
    std::optional<graph::TensorId> id = graph.find_tensor(name);
    if (!id || graph.tensor(*id).role != graph::TensorRole::Input) {
      fail_user("{}: the graph has no input '{}'; model graphs take input_ids, position_ids, "
                "document_ids and targets.", source, name);
    }
    if (graph.tensor(*id).type != batch_type) {
      fail_user("{}: input '{}' is {} but this run feeds {} ({}).", source, name,
                graph::format_type(graph.tensor(*id).type), graph::format_type(batch_type), shape_options);
    }
  }
  const std::vector<ParameterSpec> specs = parameter_specs(config);
  for (graph::TensorId id : graph.parameters) {
    const std::string& name = graph.tensor(id).name;
    if (std::none_of(specs.begin(), specs.end(), [&](const ParameterSpec& spec) { return spec.name == name; })) {
      fail_user("{}: the graph has parameter '{}', which config.json does not imply; model graphs use the "
                "parameters of the architecture's weight table (docs/models.md), which is what is loaded and saved.",
                source, name);
    }
  }
  for (const ParameterSpec& spec : specs) {
    std::optional<graph::TensorId> id = graph.find_tensor(spec.name);
    if (!id || graph.tensor(*id).role != graph::TensorRole::Parameter) {
      fail_user("{}: the graph has no parameter '{}' (HF tensor {}), which config.json implies.", source,
                spec.name, spec.hf_name);
    }
    if (graph.tensor(*id).type.shape != spec.shape) {
      fail_user("{}: parameter '{}' has shape {} but config.json implies {}.", source, spec.name,
                graph::format_shape(graph.tensor(*id).type.shape), graph::format_shape(spec.shape));
    }
  }
  std::optional<graph::TensorId> scale = graph.find_tensor(kLossScale);
  if (!scale || graph.tensor(*scale).role != graph::TensorRole::Input ||
      graph.tensor(*scale).type != graph::TensorType{DType::F32, {}}) {
    fail_user("{}: the graph needs an input 'loss_scale' of type F32[] (the loss multiplier).", source);
  }
  if (graph.outputs.empty() || graph.tensor(graph.outputs[0]).type != graph::TensorType{DType::F32, {}}) {
    fail_user("{}: the graph's first output must be the scalar F32 loss.", source);
  }
}

EvalResult evaluate_on_cpu(const graph::OpRegistry& registry, graph::Graph forward, const io::ModelConfig& config,
                           const std::filesystem::path& model_dir, const std::vector<TokenBatch>& batches,
                           const std::filesystem::path& adapter_dir) {
  const graph::TensorId loss = forward.outputs.at(0);
  compiler::ExecutionPlan plan = compiler::compile_forward(std::move(forward), registry);
  runtime::CpuBackend backend;
  backend.load(plan, registry);
  std::vector<ParameterSpec> specs = parameter_specs(config);
  if (adapter_dir.empty()) {
    load_hf_weights(model_dir, specs, [&](const ParameterSpec& spec, const io::SafetensorsTensor& tensor) {
      backend.write_converted(plan.tensor(spec.name), tensor.dtype, tensor.bytes);
    });
  } else {
    // The adapter is validated against the model before any weight is read.
    const PeftAdapter adapter = load_peft_adapter(adapter_dir, config);
    std::vector<std::vector<float>> weights = load_hf_weights_as_float32(model_dir, specs);
    merge_peft_adapter(adapter, specs, weights);
    for (size_t i = 0; i < specs.size(); ++i) {
      backend.write_converted(plan.tensor(specs[i].name), DType::F32, std::as_bytes(std::span<const float>(weights[i])));
    }
  }
  const graph::TensorId inputs[] = {plan.tensor(kInputIds), plan.tensor(kPositionIds), plan.tensor(kDocumentIds),
                                    plan.tensor(kTargets)};
  const float unit_scale = 1.0f;  // the loss output is then the plain sum
  backend.write(plan.tensor(kLossScale), std::as_bytes(std::span<const float>(&unit_scale, 1)));
  EvalResult result;
  for (const TokenBatch& batch : batches) {
    const std::vector<int32_t>* data[] = {&batch.input_ids, &batch.position_ids, &batch.document_ids,
                                          &batch.targets};
    std::vector<runtime::InputBinding> bindings;
    for (size_t i = 0; i < 4; ++i) {
      bindings.push_back({inputs[i], std::as_bytes(std::span<const int32_t>(*data[i]))});
    }
    backend.execute(bindings);
    float loss_sum = 0.0f;
    backend.read(loss, std::as_writable_bytes(std::span<float>(&loss_sum, 1)));
    result.loss_sum += loss_sum;
    result.tokens += batch.scored_tokens();
  }
  return result;
}

}  // namespace surogate::models
