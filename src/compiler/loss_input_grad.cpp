// compute_loss_input_grad_in_forward: see compiler/loss_input_grad.h.
#include "compiler/loss_input_grad.h"

namespace surogate::compiler {

using namespace surogate::graph;

bool compute_loss_input_grad_in_forward(Graph& forward, TensorId loss, const OpRegistry& registry) {
  if (registry.find("lm_head_loss_with_input_grad") == nullptr) return false;
  NodeId producer = forward.tensor(loss).producer;
  if (producer == kNoNode) return false;
  // A loss that adds another term to the language-model loss (an MoE model's router loss): the LM
  // loss's gradient is still d_loss.
  if (const Node& sum = forward.nodes[static_cast<size_t>(producer)]; sum.op == "add") {
    for (TensorId term : sum.inputs) {
      const NodeId term_producer = forward.tensor(term).producer;
      if (term_producer != kNoNode && forward.nodes[static_cast<size_t>(term_producer)].op == "lm_head_loss") {
        producer = term_producer;
        loss = term;
        break;
      }
    }
  }
  Node& node = forward.nodes[static_cast<size_t>(producer)];
  if (node.op != "lm_head_loss" || node.outputs.empty() || node.outputs[0] != loss) return false;
  const TensorInfo& weight = forward.tensor(node.inputs[1]);
  const bool frozen = (weight.role == TensorRole::Parameter && !weight.trainable) || weight.role == TensorRole::Constant;
  if (!frozen) return false;
  TensorInfo d_hidden;
  d_hidden.name = forward.tensor(loss).name + ".d_hidden";
  d_hidden.type = forward.tensor(node.inputs[0]).type;
  d_hidden.role = TensorRole::Activation;
  d_hidden.producer = producer;
  const TensorId id = forward.add_tensor(std::move(d_hidden));  // invalidates `weight`, not `node`
  node.op = "lm_head_loss_with_input_grad";
  node.outputs.push_back(id);
  return true;
}

}  // namespace surogate::compiler
