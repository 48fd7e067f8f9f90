// The LM head at the scoring temperature; see grpo_graph.h.
#include "train/objective/grpo_graph.h"

#include <string>

#include "core/error.h"

namespace surogate::train {

graph::Graph apply_grpo_temperature(graph::Graph forward, graph::TensorId loss, double temperature) {
  if (temperature == 1.0) return forward;
  const graph::NodeId head = forward.tensor(loss).producer;
  const bool last = head != graph::kNoNode && static_cast<size_t>(head) + 1 == forward.nodes.size();
  if (!last || forward.node(head).op != "lm_head_loss") {
    fail_user("surogate grpo: the model's loss is not the LM head's cross-entropy alone, so it cannot be scored at "
              "grpo.temperature {}; set temperature: 1.0", temperature);
  }
  // The head node moves to the end and the scale node takes its place: every node still reads
  // only tensors written before it.
  graph::Node scored_head = forward.nodes[static_cast<size_t>(head)];
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
  forward.nodes[static_cast<size_t>(head)] = std::move(scale);
  scored_head.inputs[0] = scaled_id;
  const auto moved = static_cast<graph::NodeId>(forward.nodes.size());
  for (const graph::TensorId output : scored_head.outputs) forward.tensor(output).producer = moved;
  forward.nodes.push_back(std::move(scored_head));
  return forward;
}

}  // namespace surogate::train
