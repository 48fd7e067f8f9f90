// compute_loss_input_grad_in_forward: see compiler/loss_input_grad.h.
#include "compiler/loss_input_grad.h"

#include <string>

namespace surogate::compiler {

using namespace surogate::graph;

namespace {

// Appends an activation output `suffix` of `type` to the loss node `producer`.
void add_gradient_output(Graph& forward, NodeId producer, TensorId loss, const std::string& suffix, const TensorType& type) {
  TensorInfo info;
  info.name = forward.tensor(loss).name + suffix;
  info.type = type;
  info.role = TensorRole::Activation;
  info.producer = producer;
  const TensorId id = forward.add_tensor(std::move(info));  // invalidates TensorInfo references, not nodes
  forward.nodes[static_cast<size_t>(producer)].outputs.push_back(id);
}

}  // namespace

bool compute_loss_input_grad_in_forward(Graph& forward, TensorId loss, const OpRegistry& registry) {
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
  const Node& node = forward.nodes[static_cast<size_t>(producer)];
  if (node.op != "lm_head_loss" || node.outputs.empty() || node.outputs[0] != loss) return false;
  const TensorInfo& weight = forward.tensor(node.inputs[1]);
  const bool frozen = (weight.role == TensorRole::Parameter && !weight.trainable) || weight.role == TensorRole::Constant;
  // Only a parameter itself: a computed head (fp16 emulation's rounded copy) keeps lm_head_loss.
  const bool trainable = weight.role == TensorRole::Parameter && weight.trainable;
  const char* op = frozen ? "lm_head_loss_with_input_grad" : trainable ? "lm_head_loss_with_grads" : nullptr;
  if (op == nullptr || registry.find(op) == nullptr) return false;
  const TensorType hidden_type = forward.tensor(node.inputs[0]).type, weight_type = weight.type;
  add_gradient_output(forward, producer, loss, ".d_hidden", hidden_type);
  if (trainable) add_gradient_output(forward, producer, loss, ".d_weight", weight_type);
  forward.nodes[static_cast<size_t>(producer)].op = op;
  return true;
}

}  // namespace surogate::compiler
