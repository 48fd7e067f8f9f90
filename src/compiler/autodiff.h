// Reverse-mode autodiff ahead of time: from a forward graph and its scalar loss, appends the
// backward nodes that compute the gradient of every trainable parameter.
//
//  * Rules come from the op registry (one GradientRule per op) and run in reverse node order.
//  * Only what is needed is differentiated: tensors that depend on a trainable parameter and
//    reach the loss. Frozen parameters (LoRA base weights) and integer inputs get nothing.
//  * Where a tensor fans out (residual stream, tied embedding used by embedding and lm-head),
//    the contributions of its consumers are summed with `add` nodes, unless a rule takes the
//    partial sum and folds it into its own kernel (GradientContext::take_pending_input_grad:
//    linear's input gradient in low-precision graphs is one matmul with beta = 1).
//  * Each trainable parameter P gets a persistent gradient tensor "P.grad" (role gradient),
//    written by one `accumulate` node (P.grad += dP): gradients accumulate across micro-batches
//    and the optimizer zeroes them after its step. In low-precision graphs a dP that is one
//    weight product (LoRA's adapters) is computed into P.grad directly instead
//    (linear_backward_weight_accumulate: P.grad += dP in the matmul, beta = 1).
// The loss gradient is seeded with `fill(1)`; scale the loss in the graph for a mean over
// micro-batches.
#pragma once

#include <map>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::compiler {

struct TrainingGraph {
  graph::Graph graph;                 // the forward nodes, then the backward nodes
  graph::TensorId loss = graph::kNoTensor;
  size_t forward_node_count = 0;
  // trainable parameter -> its persistent gradient tensor
  std::map<graph::TensorId, graph::TensorId> parameter_gradients;
};

// `loss` must be a floating tensor with one element produced by the forward graph. A trainable
// parameter the loss does not depend on gets no gradient (and no entry in parameter_gradients).
TrainingGraph build_training_graph(graph::Graph forward, graph::TensorId loss, const graph::OpRegistry& registry);

}  // namespace surogate::compiler
