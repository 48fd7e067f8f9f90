// What every in-memory model (models::ModelSession, generate/'s NextTokenModels) does to get a
// checkpoint onto a backend: the forward graph of one [B, T] batch (built in, or a
// model_definition IR) with a PEFT adapter's LoRA matrices applied unmerged as parameters of their
// own, and, once a plan of it is loaded, the HF weights and the adapter's matrices written into
// the backend (fp32 on the CPU backend, bf16 on CUDA: the plan's dtypes).
#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "io/model_config.h"
#include "models/adapter_io.h"
#include "models/decoder_graph.h"
#include "models/lora.h"
#include "models/model_definition.h"
#include "runtime/backend.h"

namespace surogate::models {

struct SessionGraph {
  graph::Graph graph;                // the forward graph, loss included
  std::optional<PeftAdapter> adapter;  // the adapter read from disk, when one is given
  std::vector<LoraAdapter> adapters;   // its LoRA parameters in the graph
};

// A PEFT adapter's LoRA options: rank and scaling as saved, the projections it adapts (UserError
// naming `dir` for mixed ranks or no matrices).
LoraOptions peft_lora_options(const PeftAdapter& adapter, const std::filesystem::path& dir);

// The forward graph; `adapter_dir` empty: no adapter. UserErrors name the adapter's files.
SessionGraph build_session_graph(const io::ModelConfig& config, const graph::OpRegistry& registry,
                                 const DecoderGraphOptions& options, const ModelDefinition& definition,
                                 const std::filesystem::path& adapter_dir);

// Writes the checkpoint's weights (parameter_specs(config)) and the adapter's matrices into
// `backend`, which has `plan` (compiled from session.graph, or a graph with its parameters)
// loaded. Projections the adapter does not adapt keep A = B = 0 (backends zero their regions).
void load_session_weights(const std::filesystem::path& model_dir, const io::ModelConfig& config,
                          const SessionGraph& session, const compiler::ExecutionPlan& plan, runtime::Backend& backend);
// The adapter's matrices only: for a backend that reads the checkpoint's weights from another's.
void load_session_adapter(const SessionGraph& session, const compiler::ExecutionPlan& plan, runtime::Backend& backend);

// A floating tensor of the loaded plan as fp32 (F32 read as is, BF16 widened), and fp32 values
// written into an F32 or BF16 tensor.
std::vector<float> read_float32(const runtime::Backend& backend, const compiler::ExecutionPlan& plan,
                                graph::TensorId id);
void write_float32(runtime::Backend& backend, const compiler::ExecutionPlan& plan, graph::TensorId id,
                   std::span<const float> values);

}  // namespace surogate::models
