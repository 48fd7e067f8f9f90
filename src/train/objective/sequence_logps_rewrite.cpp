// lm_head_loss → sequence_logps; see sequence_logps_rewrite.h.
#include "train/objective/sequence_logps_rewrite.h"

#include "core/error.h"

namespace surogate::train {

graph::TensorId rewrite_to_sequence_logps(graph::Graph& forward, graph::TensorId loss, graph::TensorId sequence_ids,
                                          int64_t sequences, const std::string& logps_name,
                                          const std::string& logit_sums_name) {
  const graph::NodeId producer = forward.tensor(loss).producer;
  SUROGATE_CHECK(producer != graph::kNoNode && forward.node(producer).op == "lm_head_loss",
                 "the loss to rewrite is lm_head_loss's");
  const DType statistic = forward.tensor(loss).type.dtype;
  forward.rename_tensor(loss, logps_name);
  forward.tensor(loss).type = {statistic, graph::Shape{sequences}};
  graph::TensorInfo logit_sums{logit_sums_name, {statistic, graph::Shape{sequences}}, graph::TensorRole::Activation};
  logit_sums.producer = producer;
  const graph::TensorId logit_sums_id = forward.add_tensor(std::move(logit_sums));
  graph::Node& node = forward.nodes[static_cast<size_t>(producer)];
  const int64_t chunks = node.attrs.value("chunks", int64_t{1});
  node.op = "sequence_logps";
  node.name = logps_name;
  node.inputs = {node.inputs[0], node.inputs[1], node.inputs[2], sequence_ids};
  node.outputs = {loss, logit_sums_id, node.outputs[1]};
  node.attrs = {{"chunks", chunks}, {"sequences", sequences}};
  return logit_sums_id;
}

}  // namespace surogate::train
