// Forward-only evaluation of a Llama-family graph on the CPU backend: compile the forward
// graph, load the HF weights into its parameters (any float dtype, converted to fp32; a LoRA
// adapter merged in when given), run every batch and sum the loss. Also checks that an externally supplied graph (JSON IR) has
// the inputs and parameters this runner feeds, with one UserError per mismatch.
// The graph contract (models/decoder_graph.h builds it): inputs input_ids, position_ids,
// document_ids, targets (I32 [B, T]) and loss_scale (F32 []); parameters named as in
// models/model_spec.h; first output the loss, loss_scale · Σ token cross-entropy.
#pragma once

#include <filesystem>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "io/model_config.h"
#include "models/token_batches.h"

namespace surogate::models {

struct BatchShape {
  int64_t batch = 1;
  int64_t sequence = 1;
};

inline constexpr const char* kInputIds = "input_ids";
inline constexpr const char* kPositionIds = "position_ids";
inline constexpr const char* kDocumentIds = "document_ids";
inline constexpr const char* kTargets = "targets";
inline constexpr const char* kLossScale = "loss_scale";

struct EvalResult {
  double loss_sum = 0.0;  // summed next-token cross-entropy (nats)
  int64_t tokens = 0;     // scored tokens
};

// Throws UserError (naming `source`) when `graph` lacks one of the inputs above (with its type;
// `shape_options` are named as what sets [B, T]), lacks a parameter of parameter_specs(config) or
// has it with another shape, has a parameter config.json does not imply (nothing would load it),
// or has no single scalar output first.
void check_model_graph(const graph::Graph& graph, const io::ModelConfig& config, const BatchShape& shape,
                       const std::string& source, const std::string& shape_options = "--batch-size / --seq-len");

// `adapter_dir`, when not empty, is a PEFT LoRA adapter (models/adapter_io.h) merged into the
// fp32 weights before the first batch: W + scaling · B · A, which is what PEFT computes in eval
// mode (no dropout), up to fp32 rounding.
EvalResult evaluate_on_cpu(const graph::OpRegistry& registry, graph::Graph forward, const io::ModelConfig& config,
                           const std::filesystem::path& model_dir, const std::vector<TokenBatch>& batches,
                           const std::filesystem::path& adapter_dir = {});

}  // namespace surogate::models
