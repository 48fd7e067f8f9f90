// The per-token GRPO loss graph; see grpo_token_graph.h.
#include "train/objective/grpo_token_graph.h"

#include <string>

#include "core/error.h"
#include "graph/builder.h"

namespace surogate::train {

ObjectiveGraph apply_grpo_token_loss(graph::Graph forward, graph::TensorId loss, const graph::OpRegistry& registry,
                                     int64_t batch, int64_t sequence, int64_t width) {
  const graph::NodeId producer = forward.tensor(loss).producer;
  if (producer == graph::kNoNode || forward.node(producer).op != "lm_head_loss") {
    fail_user("surogate grpo with grpo.beta or grpo.num_iterations: the model's loss is not the LM head's "
              "cross-entropy alone (it ends in '{}'), so it cannot be replaced by per-token log-probabilities",
              producer == graph::kNoNode ? std::string("an input") : forward.node(producer).op);
  }
  const int64_t tokens = batch * width;
  const graph::TensorId token_ids =
      forward.add_tensor({kGrpoTokenIds, {DType::I32, graph::Shape{batch, sequence}}, graph::TensorRole::Input});
  forward.inputs.push_back(token_ids);
  const DType statistic = forward.tensor(loss).type.dtype;
  // lm_head_loss(hidden, head, targets, scale[, weights]) -> (loss, logsumexp) becomes
  // sequence_logps(hidden, head, targets, token_ids) -> (logps, logit_sums, logsumexp), as the
  // preference objective's rewrite (preference_graph.cpp) with one "sequence" per completion token.
  forward.rename_tensor(loss, kGrpoTokenLogps);
  forward.tensor(loss).type = {statistic, graph::Shape{tokens}};
  graph::TensorInfo logit_sums{"grpo_token_logit_sums", {statistic, graph::Shape{tokens}}, graph::TensorRole::Activation};
  logit_sums.producer = producer;
  const graph::TensorId logit_sums_id = forward.add_tensor(std::move(logit_sums));
  graph::Node& node = forward.nodes[static_cast<size_t>(producer)];
  const int64_t chunks = node.attrs.value("chunks", int64_t{1});
  node.op = "sequence_logps";
  node.name = kGrpoTokenLogps;
  node.inputs = {node.inputs[0], node.inputs[1], node.inputs[2], token_ids};
  node.outputs = {loss, logit_sums_id, node.outputs[1]};
  node.attrs = {{"chunks", chunks}, {"sequences", tokens}};

  graph::GraphBuilder builder(registry, std::move(forward));
  const graph::TensorId coefficients = builder.input(kGrpoTokenCoefficients, statistic, {tokens});
  const graph::TensorId weighed = builder.op("mul", {loss, coefficients}, nlohmann::json::object(), "grpo_weighed_logps");
  ObjectiveGraph result;
  result.loss = builder.op("sum", {weighed}, nlohmann::json::object(), "loss");
  builder.mark_output(loss);
  builder.mark_output(result.loss);
  result.graph = builder.finish();
  return result;
}

}  // namespace surogate::train
