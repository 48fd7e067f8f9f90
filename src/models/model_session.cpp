// A loaded model on a backend; see model_session.h.
#include "models/model_session.h"
#include "models/defined_weights.h"
#include "models/session_loading.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "compiler/execution_plan.h"
#include "core/bfloat16.h"
#include "core/error.h"
#include "graph/builder.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "models/adapter_io.h"
#include "models/lora.h"
#include "models/model_eval.h"
#include "models/model_spec.h"
#include "models/weight_io.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#if SUROGATE_WITH_CUDA
#include "runtime/cuda_backend.h"
#endif

namespace surogate::models {
namespace {

constexpr const char* kLogits = "logits";

// Values of `count` elements stored as `source` → fp32.
std::vector<float> to_float32(DType source, std::span<const std::byte> values, int64_t count, const std::string& name) {
  const size_t element = dtype_size_bytes(source);
  if (!dtype_is_floating(source) || values.size() != static_cast<size_t>(count) * element) {
    fail_user("weight '{}': got {} bytes of {}, but the tensor holds {} floating elements", name, values.size(),
              dtype_safetensors_name(source), count);
  }
  io::SafetensorsTensor tensor{name, source, {count}, values};
  return io::read_tensor_as_float32(tensor);
}

}  // namespace

struct ModelSession::State {
  io::ModelConfig config;
  SessionOptions options;
  graph::OpRegistry registry = ops::make_model_registry();
  compiler::ExecutionPlan plan;
  std::unique_ptr<runtime::Backend> backend;
  std::vector<SessionTensor> tensors;
  graph::TensorId loss = graph::kNoTensor, logits = graph::kNoTensor;

  graph::TensorId id(const SessionTensor& tensor) const { return plan.tensor(tensor.engine_name); }

  void* address(graph::TensorId id) {
#if SUROGATE_WITH_CUDA
    if (options.cuda) return static_cast<runtime::CudaBackend&>(*backend).device_address(id);
#endif
    return static_cast<runtime::CpuBackend&>(*backend).view<float>(id).data();
  }

  void write_float32(graph::TensorId id, std::span<const float> values) {
    models::write_float32(*backend, plan, id, values);
  }
  std::vector<float> read_float32(graph::TensorId id) const { return models::read_float32(*backend, plan, id); }
};

ModelSession::ModelSession(const std::filesystem::path& model_dir, const SessionOptions& options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = options;
  if (options.batch < 1 || options.sequence < 1) {
    fail_user("batch_size and seq_len must be positive (got {} and {})", options.batch, options.sequence);
  }
#if !SUROGATE_WITH_CUDA
  if (options.cuda) fail_user("device 'cuda': this surogate was built without the CUDA backend; use device='cpu'");
#endif
  s.config = load_model_config(model_dir, options.definition);
  DecoderGraphOptions graph_options{options.batch, options.sequence, 1, false};
  if (options.cuda) graph_options.dtype = DType::BF16;
  SessionGraph session = build_session_graph(s.config, s.registry, graph_options, options.definition, options.adapter);
  graph::Graph graph = std::move(session.graph);
  {
    // The logits beside the loss: the loss node's hidden state times its head.
    const graph::Node& loss_node = graph.node(graph.tensor(graph.outputs.at(0)).producer);
    if (loss_node.op != "lm_head_loss") {
      fail_user("{}: the graph's loss comes from '{}', not lm_head_loss; logits need the LM head's inputs",
                options.definition.source, loss_node.op);
    }
    const std::vector<graph::TensorId> inputs{loss_node.inputs.at(0), loss_node.inputs.at(1)};
    graph::GraphBuilder builder(s.registry, std::move(graph));
    builder.mark_output(builder.op("linear", inputs, nlohmann::json::object(), kLogits));
    graph = builder.finish();
  }
  s.loss = graph.outputs.at(0);
  s.plan = compiler::compile_forward(std::move(graph), s.registry);
  s.logits = s.plan.tensor(kLogits);
  s.loss = s.plan.graph.outputs.at(0);
#if SUROGATE_WITH_CUDA
  if (options.cuda) s.backend = std::make_unique<runtime::CudaBackend>();
#endif
  if (!s.backend) s.backend = std::make_unique<runtime::CpuBackend>();
  s.backend->load(s.plan, s.registry);

  load_session_weights(model_dir, s.config, session, s.plan, *s.backend);
  for (const ParameterSpec& spec : parameter_specs(s.config)) {
    const graph::TensorId id = s.plan.tensor(spec.name);
    s.tensors.push_back({spec.hf_name, spec.name, s.plan.graph.tensor(id).type.dtype, spec.shape, s.address(id), false});
  }
  for (const LoraAdapter& lora : session.adapters) {
    for (const ParameterSpec* spec : {&lora.a, &lora.b}) {
      const graph::TensorId id = s.plan.tensor(spec->name);
      s.tensors.push_back({spec->hf_name, spec->name, s.plan.graph.tensor(id).type.dtype, spec->shape, s.address(id), true});
    }
  }
  const float unit_scale = 1.0f;  // the loss output is then the plain sum
  s.backend->write(s.plan.tensor(kLossScale), std::as_bytes(std::span<const float>(&unit_scale, 1)));
}

ModelSession::~ModelSession() = default;

const std::vector<SessionTensor>& ModelSession::tensors() const { return state_->tensors; }

const SessionTensor& ModelSession::tensor(const std::string& name) const {
  for (const SessionTensor& tensor : state_->tensors) {
    if (tensor.name == name || tensor.engine_name == name) return tensor;
  }
  std::string example = state_->tensors.empty() ? std::string() : state_->tensors.front().name;
  for (const SessionTensor& tensor : state_->tensors) {
    if (tensor.name.find(name) != std::string::npos || name.find(tensor.engine_name) != std::string::npos) {
      example = tensor.name;
      break;
    }
  }
  fail_user("the model has no weight '{}'; weights are named as in the checkpoint (for example '{}'); "
            "list them with weights().keys()", name, example);
}

void ModelSession::write(const std::string& name, DType source, std::span<const std::byte> values) {
  const SessionTensor& target = tensor(name);
  const int64_t count = graph::shape_numel(target.shape);
  const graph::TensorId id = state_->id(target);
  if (!state_->options.cuda && source != DType::F32 && dtype_is_floating(source) &&
      values.size() == static_cast<size_t>(count) * dtype_size_bytes(source)) {
    static_cast<runtime::CpuBackend&>(*state_->backend).write_converted(id, source, values);
    return;
  }
  state_->write_float32(id, to_float32(source, values, count, target.name));
}

std::vector<float> ModelSession::read_float32(const std::string& name) const {
  return state_->read_float32(state_->id(tensor(name)));
}

SessionOutput ModelSession::run(const std::vector<TokenSequence>& rows, bool with_logits) {
  State& s = *state_;
  const int64_t batch = s.options.batch, sequence = s.options.sequence;
  if (static_cast<int64_t>(rows.size()) > batch) {
    fail_user("the batch has {} rows, but this model was loaded for batch_size {}; load it with a larger "
              "batch_size or pass fewer rows", rows.size(), batch);
  }
  const size_t cells = static_cast<size_t>(batch * sequence);
  std::vector<int32_t> input_ids(cells, 0), position_ids(cells, 0), document_ids(cells, 0), targets(cells, -100);
  SessionOutput output;
  for (size_t row = 0; row < rows.size(); ++row) {
    const TokenSequence& tokens = rows[row];
    const int64_t length = static_cast<int64_t>(tokens.input_ids.size());
    if (length > sequence) {
      fail_user("row {} has {} tokens, but this model was loaded for seq_len {}; load it with a larger seq_len",
                row, length, sequence);
    }
    if (tokens.labels.size() != tokens.input_ids.size()) {
      fail_user("row {}: labels has {} entries but input_ids has {}; give one label per token", row,
                tokens.labels.size(), tokens.input_ids.size());
    }
    for (int64_t t = 0; t < sequence; ++t) {
      const size_t cell = row * static_cast<size_t>(sequence) + static_cast<size_t>(t);
      if (t >= length) {
        document_ids[cell] = 1;  // padding: a document of its own, never scored
        continue;
      }
      const int32_t id = tokens.input_ids[static_cast<size_t>(t)];
      if (id < 0 || id >= s.config.vocab_size) {
        fail_user("row {}, token {}: id {} is outside the model's vocabulary [0, {})", row, t, id, s.config.vocab_size);
      }
      input_ids[cell] = id;
      position_ids[cell] = static_cast<int32_t>(t);
      if (t + 1 < length) targets[cell] = tokens.labels[static_cast<size_t>(t + 1)];
      if (targets[cell] != -100 && (targets[cell] < 0 || targets[cell] >= s.config.vocab_size)) {
        fail_user("row {}, label {}: {} is outside the model's vocabulary [0, {}) (-100 = not scored)", row, t + 1,
                  targets[cell], s.config.vocab_size);
      }
      if (targets[cell] != -100) ++output.tokens;
    }
  }
  const std::vector<runtime::InputBinding> bindings{
      {s.plan.tensor(kInputIds), std::as_bytes(std::span<const int32_t>(input_ids))},
      {s.plan.tensor(kPositionIds), std::as_bytes(std::span<const int32_t>(position_ids))},
      {s.plan.tensor(kDocumentIds), std::as_bytes(std::span<const int32_t>(document_ids))},
      {s.plan.tensor(kTargets), std::as_bytes(std::span<const int32_t>(targets))}};
  s.backend->execute(bindings);
  float loss_sum = 0.0f;
  s.backend->read(s.loss, std::as_writable_bytes(std::span<float>(&loss_sum, 1)));
  output.loss_sum = loss_sum;
  if (with_logits) output.logits = s.read_float32(s.logits);
  return output;
}

bool ModelSession::on_gpu() const { return state_->options.cuda; }
int64_t ModelSession::batch() const { return state_->options.batch; }
int64_t ModelSession::sequence() const { return state_->options.sequence; }
int64_t ModelSession::vocab_size() const { return state_->config.vocab_size; }

}  // namespace surogate::models
