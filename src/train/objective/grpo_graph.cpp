// The LM head at the scoring temperature; see grpo_graph.h.
#include "train/objective/grpo_graph.h"

#include <string>

#include "core/error.h"

namespace surogate::train {

graph::Graph apply_grpo_temperature(graph::Graph forward, graph::TensorId, double temperature) {
  if (temperature == 1.0) return forward;
  // The LM head's cross-entropy: the loss itself, or a term of it (a mixture-of-experts model adds
  // its router's load-balancing loss after it, which the temperature leaves alone).
  graph::NodeId head = graph::kNoNode;
  for (size_t id = 0; id < forward.nodes.size(); ++id) {
    if (forward.nodes[id].op != "lm_head_loss") continue;
    if (head != graph::kNoNode) {
      fail_user("surogate grpo: the model has several LM-head losses, so it cannot be scored at grpo.temperature {}; "
                "set temperature: 1.0", temperature);
    }
    head = static_cast<graph::NodeId>(id);
  }
  if (head == graph::kNoNode) {
    fail_user("surogate grpo: the model's loss is not the LM head's cross-entropy, so it cannot be scored at "
              "grpo.temperature {}; set temperature: 1.0", temperature);
  }
  // The scale node goes in right before the head: the head and every node after it move one
  // place on, and the tensors they write name their new places.
  for (graph::TensorInfo& tensor : forward.tensors) {
    if (tensor.producer != graph::kNoNode && tensor.producer >= head) ++tensor.producer;
  }
  const graph::Node& scored_head = forward.nodes[static_cast<size_t>(head)];
  const graph::TensorId hidden = scored_head.inputs[0];
  graph::TensorInfo scaled{kGrpoScoredHidden, forward.tensor(hidden).type, graph::TensorRole::Activation};
  scaled.producer = head;
  const graph::TensorId scaled_id = forward.add_tensor(std::move(scaled));
  graph::Node scale;
  scale.name = kGrpoScoredHidden;
  scale.op = "scale";
  scale.inputs = {hidden};
  scale.outputs = {scaled_id};
  scale.attrs = {{"factor", 1.0 / temperature}};
  scale.recompute_group = scored_head.recompute_group;
  scale.phase = scored_head.phase;
  forward.nodes.insert(forward.nodes.begin() + head, std::move(scale));
  forward.nodes[static_cast<size_t>(head) + 1].inputs[0] = scaled_id;
  return forward;
}

}  // namespace surogate::train
