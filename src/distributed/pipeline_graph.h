// The pipeline graph pass: a model's forward graph split into the graphs of its pipeline stages
// (docs/architecture.md, "Pipeline parallel"). A node belongs to the stage of its layer (its name
// "layers.<n>…": the layer's own nodes, its LoRA adapters, its dequantized weights); nodes before
// the first layer belong to the first stage (the embedding), nodes after the last to the last stage
// (final norm, LM head, loss). A tensor one stage computes and a later one reads crosses the
// boundary in one of two ways:
//   - computed from the batch and the weights alone (RoPE's cos/sin tables): the nodes that make it
//     are copied into the stage that reads it, which computes it again;
//   - otherwise (the residual stream and the last block's output): it is sent, point to point,
//     from the stage that computes it to each stage that reads it, and its gradient comes back.
// A parameter read by several stages (tied embeddings: the embedding and the LM head) is declared
// in each; its gradients are summed between them by the device.
//
// Each stage gets two graphs over the same tensor names:
//   forward   the stage's forward, reading the tensors it receives as inputs and marking the ones
//             it sends as outputs (the last stage needs none: its training graph runs at once);
//   training  the same nodes with the received tensors as trainable parameters — so that autodiff
//             gives their gradients, to send back — and a loss: the model's on the last stage; on
//             the others Σ_t sum(t · g_t) over the sent tensors t, with g_t an input (the gradient
//             the later stages sent back, named "<t>.pipeline_grad"), whose gradient with respect
//             to everything the stage computes is exactly the chain rule's (∂loss/∂t = g_t).
// The device runs `forward` to pass a micro-batch on and `training` (its forward again, then its
// backward) once the gradients arrive: a stage keeps only its received inputs between the two.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "distributed/pipeline_stages.h"
#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::distributed {

// A tensor crossing stages: its name and the stages that compute and read it.
struct BoundaryTensor {
  std::string name;
  int from = 0;
  std::vector<int> to;  // ascending, each > from
};

struct StageGraph {
  int stage = 0;
  StageLayers layers;
  graph::Graph forward;   // empty on the last stage
  graph::Graph training;
  graph::TensorId loss = graph::kNoTensor;  // in `training`
  std::vector<BoundaryTensor> received;     // in order of first use
  std::vector<BoundaryTensor> sent;
};

// The suffix of a sent tensor's gradient input in the training graph.
inline constexpr const char* kPipelineGradSuffix = ".pipeline_grad";

// `registry` must hold the core ops (mul, sum, add) the stage losses use.
std::vector<StageGraph> split_pipeline_stages(const graph::Graph& forward, graph::TensorId loss,
                                              const graph::OpRegistry& registry, std::span<const StageLayers> stages);

}  // namespace surogate::distributed
