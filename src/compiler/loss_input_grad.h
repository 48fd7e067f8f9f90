// LM-head loss rewrite, run by compile_training before autodiff: the loss's gradients come from
// the forward pass over the logits, so the backward never recomputes them.
//
// The backward of lm_head_loss needs d_loss · ∂loss/∂hidden and, with a trainable head,
// d_loss · ∂loss/∂weight; both are available in the forward pass, where the logits of each chunk
// are already computed. So when the training loss is produced by lm_head_loss, that node becomes
//   * lm_head_loss_with_input_grad when its weight is a frozen parameter (LoRA, or a frozen model
//     with trainable layers below it) or a constant: its extra output is ∂loss/∂hidden;
//   * lm_head_loss_with_grads when its weight is a trainable parameter (full fine-tuning, tied or
//     untied): its extra outputs are ∂loss/∂hidden and ∂loss/∂weight;
// and autodiff turns its gradients into scale_by(∂loss/∂x, d_loss), or ∂loss/∂x itself when d_loss
// is the seed 1 (the trainer's loss). The backward then never
// recomputes the [rows, V] logits (one logits GEMM fewer per micro-batch; with a trainable head
// no fp32 [V, C] accumulator in the backward either). With d_loss = 1 (the seeded loss) the
// gradients are bit-identical to lm_head_loss_backward's. A head weight that is computed (an
// fp16-emulated or dequantized copy) keeps lm_head_loss. A loss that is add(lm_head_loss, other
// term) (an MoE model's router loss) is looked through: the LM loss's gradient is still d_loss.
#pragma once

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::compiler {

// Returns whether the loss node was rewritten. A registry without the op leaves the graph as is.
bool compute_loss_input_grad_in_forward(graph::Graph& forward, graph::TensorId loss, const graph::OpRegistry& registry);

}  // namespace surogate::compiler
