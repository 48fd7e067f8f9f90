// The forward graph with an unmerged adapter, and the weights written into a loaded plan; see
// session_loading.h.
#include "models/session_loading.h"

#include <set>

#include "core/bfloat16.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/defined_weights.h"
#include "models/model_spec.h"
#include "models/weight_io.h"
#include "runtime/cpu_backend.h"

namespace surogate::models {

LoraOptions peft_lora_options(const PeftAdapter& adapter, const std::filesystem::path& dir) {
  LoraOptions options;
  std::set<std::string> modules;
  for (const AdapterMatrices& matrices : adapter.matrices) {
    if (options.rank != matrices.rank && !modules.empty()) {
      fail_user("{}: the adapter mixes ranks {} and {}; surogate.load takes adapters of one rank", dir.string(),
                options.rank, matrices.rank);
    }
    options.rank = matrices.rank;
    const std::string& hf = matrices.base.hf_name;  // "model.layers.0.self_attn.q_proj.weight"
    const size_t end = hf.rfind('.');
    const size_t begin = hf.rfind('.', end - 1);
    modules.insert(hf.substr(begin + 1, end - begin - 1));
  }
  if (modules.empty()) fail_user("{}: the adapter has no lora_A / lora_B tensors", dir.string());
  options.alpha = adapter.scaling * static_cast<double>(options.rank);  // lora_scaling() gives the saved scaling
  options.target_modules.assign(modules.begin(), modules.end());
  return options;
}

SessionGraph build_session_graph(const io::ModelConfig& config, const graph::OpRegistry& registry,
                                 const DecoderGraphOptions& options, const ModelDefinition& definition,
                                 const std::filesystem::path& adapter_dir) {
  SessionGraph session;
  session.graph = build_model_graph(config, registry, options, definition).graph;
  if (!adapter_dir.empty()) {
    session.adapter = load_peft_adapter(adapter_dir, config);
    LoraOptions lora = peft_lora_options(*session.adapter, adapter_dir);
    lora.fuse_inference_products = true;  // 16-bit graphs only (lora.h): as the live adapter of a rollout
    session.adapters = lora_adapters(config, lora);
    session.graph = apply_lora(session.graph, registry, session.adapters, lora, false);
  }
  return session;
}

void load_session_weights(const std::filesystem::path& model_dir, const io::ModelConfig& config,
                          const SessionGraph& session, const compiler::ExecutionPlan& plan, runtime::Backend& backend) {
  auto* cpu = dynamic_cast<runtime::CpuBackend*>(&backend);
  load_hf_weights(model_dir, parameter_specs(config), [&](const ParameterSpec& spec, const io::SafetensorsTensor& tensor) {
    const graph::TensorId id = plan.tensor(spec.name);
    if (cpu != nullptr) {
      cpu->write_converted(id, tensor.dtype, tensor.bytes);
    } else {
      write_float32(backend, plan, id, io::read_tensor_as_float32(tensor));
    }
  });
  load_session_adapter(session, plan, backend);
}

void load_session_adapter(const SessionGraph& session, const compiler::ExecutionPlan& plan, runtime::Backend& backend) {
  if (!session.adapter) return;
  for (const AdapterMatrices& matrices : session.adapter->matrices) {
    for (const LoraAdapter& lora : session.adapters) {
      if (lora.base.name != matrices.base.name) continue;
      write_float32(backend, plan, plan.tensor(lora.a.name), matrices.a);
      write_float32(backend, plan, plan.tensor(lora.b.name), matrices.b);
    }
  }
}

std::vector<float> read_float32(const runtime::Backend& backend, const compiler::ExecutionPlan& plan,
                                graph::TensorId id) {
  const graph::TensorType& type = plan.graph.tensor(id).type;
  std::vector<float> values(static_cast<size_t>(type.numel()));
  if (type.dtype == DType::F32) {
    backend.read(id, std::as_writable_bytes(std::span<float>(values)));
    return values;
  }
  SUROGATE_CHECK(type.dtype == DType::BF16, "tensor '{}' is {}, not F32 or BF16", plan.graph.tensor(id).name,
                 format_type(type));
  std::vector<uint16_t> bits(values.size());
  backend.read(id, std::as_writable_bytes(std::span<uint16_t>(bits)));
  for (size_t i = 0; i < bits.size(); ++i) values[i] = bf16_to_float(bits[i]);
  return values;
}

void write_float32(runtime::Backend& backend, const compiler::ExecutionPlan& plan, graph::TensorId id,
                   std::span<const float> values) {
  const graph::TensorType& type = plan.graph.tensor(id).type;
  if (type.dtype == DType::F32) {
    backend.write(id, std::as_bytes(values));
    return;
  }
  SUROGATE_CHECK(type.dtype == DType::BF16, "tensor '{}' is {}, not F32 or BF16", plan.graph.tensor(id).name,
                 format_type(type));
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = float_to_bf16(values[i]);
  backend.write(id, std::as_bytes(std::span<const uint16_t>(bits)));
}

}  // namespace surogate::models
