// Where a model's forward graph comes from: the built-in builder of its architecture
// (models/decoder_graph.h), or a JSON IR file named by the `model_definition` option (written by
// `surogate ir` or by the Python DSL, python/surogate/dsl). An IR file holds the F32 graph of one
// micro-batch [B, T]; every graph a run needs is derived from it by fixed rules, so one file
// serves training, evaluation and memory prediction on every backend:
//   * dtype: each floating parameter or constant takes the run's dtype (BF16 on the CUDA
//     backend), and so does every op attribute "dtype" that names a floating type; all other
//     types follow from the ops' shape rules (which keep statistics such as rstd in F32);
//   * lmhead_chunks: the loss node's (lm_head_loss) attribute "chunks";
//   * token weights (loss_scale strategies that weigh tokens): an input "loss_weights" F32 [B, T]
//     after the file's inputs, read by the loss node as its fifth input;
//   * evaluation graphs: lm_head_accuracy(hidden, head, targets) named "correct" beside the loss;
//   * MoE training graphs (router_aux_loss_micro_batches > 0, config.json's output_router_logits):
//     the router load-balancing loss from the file's router_topk nodes (models/ir_router_loss.h);
//     a file that declares "router_aux_loss" itself is refused.
// use_fused_rope is refused: it chooses the builder's RoPE ops, and a definition names its own.
// For the built-in architectures the rules give exactly the builder's graph for the same options
// (tests/models/test_model_definition.cpp), which is what makes them the rules.
// The file must take the inputs and parameters the engine feeds (models::check_model_graph): the
// parameters are those of the file's own weight table when it has one ("checkpoint_names", which
// the Python DSL writes: models/defined_weights.h; then any architecture loads), else those
// config.json implies through the built-in table (models/model_spec.h).
#pragma once

#include <filesystem>
#include <string>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "io/model_config.h"
#include "models/decoder_graph.h"

namespace surogate::models {

struct ModelDefinition {
  std::filesystem::path ir_file;  // empty: the architecture's built-in builder; a .py file (or
                                  // file.py:NAME): the Python DSL, compiled per shape (python_definition.h)
  std::string source;             // names the option in messages ("config.yaml:3: model_definition")
  // Named in the message when the file's [B, T] differs from the run's.
  std::string shape_options = "per_device_train_batch_size / sequence_len";
  std::filesystem::path model_dir = {};  // the model folder a Python definition is compiled for
};

// The forward graph for `options`: build_decoder_graph, or the IR file specialised as above.
// UserErrors name the file (and the option) and say what to change.
DecoderGraph build_model_graph(const io::ModelConfig& config, const graph::OpRegistry& registry,
                               const DecoderGraphOptions& options, const ModelDefinition& definition = {});

// The rules above applied to an already loaded (verified) IR graph; `source` names it in messages.
DecoderGraph specialize_ir_graph(const graph::Graph& ir, const io::ModelConfig& config,
                                 const graph::OpRegistry& registry, const DecoderGraphOptions& options,
                                 const ModelDefinition& definition);

}  // namespace surogate::models
