// The per-token GRPO loss graph; see grpo_token_graph.h.
#include "train/objective/grpo_token_graph.h"

#include <string>

#include "core/error.h"
#include "graph/builder.h"
#include "train/objective/sequence_logps_rewrite.h"

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
  // One "sequence" per completion token (the preference objective's rewrite, preference_graph.cpp).
  rewrite_to_sequence_logps(forward, loss, token_ids, tokens, kGrpoTokenLogps, "grpo_token_logit_sums");

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
