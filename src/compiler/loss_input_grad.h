// Frozen-head loss rewrite, run by compile_training before autodiff.
//
// With a frozen LM head (LoRA, or a frozen model with trainable layers below it), the loss's
// backward needs only d_hidden = d_loss · ∂loss/∂hidden, and ∂loss/∂hidden is available in the
// forward pass, where the logits of each chunk are already computed. So when the training loss is
// produced by lm_head_loss and its weight is a frozen parameter (or a constant), that node becomes
// lm_head_loss_with_input_grad, whose extra output is ∂loss/∂hidden, and autodiff turns its
// gradient into one scale_by(∂loss/∂hidden, d_loss). The backward then never recomputes the
// [rows, V] logits (one logits GEMM fewer per step). With d_loss = 1 (the seeded loss) the
// gradient is bit-identical to lm_head_loss_backward's. A trainable head keeps lm_head_loss. A
// loss that is add(lm_head_loss, other term) (an MoE model's router loss) is looked through.
#pragma once

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::compiler {

// Returns whether the loss node was rewritten. A registry without the op leaves the graph as is.
bool compute_loss_input_grad_in_forward(graph::Graph& forward, graph::TensorId loss, const graph::OpRegistry& registry);

}  // namespace surogate::compiler
