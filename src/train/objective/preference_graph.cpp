// The LM-head loss → preference loss rewrite; see preference_graph.h.
#include "train/objective/preference_graph.h"

#include <algorithm>

#include "core/error.h"
#include "graph/builder.h"
#include "ops/defs/preference_attrs.h"
#include "train/objective/sequence_logps_rewrite.h"

namespace surogate::train {

ObjectiveGraph apply_preference_loss(graph::Graph forward, graph::TensorId loss, const graph::OpRegistry& registry,
                                      const ops::PreferenceLossOptions& options, int64_t batch, int64_t sequence) {
  const graph::NodeId producer = forward.tensor(loss).producer;
  if (producer == graph::kNoNode || forward.node(producer).op != "lm_head_loss") {
    fail_user("surogate dpo: the model's loss is not the LM head's cross-entropy alone (it ends in '{}'), so it cannot "
              "be replaced by the preference loss; mixture-of-experts models with output_router_logits are not "
              "preference-tuned in this version",
              producer == graph::kNoNode ? std::string("an input") : forward.node(producer).op);
  }
  const int64_t sequences = 2 * batch;
  // The sequence ids beside the targets, then lm_head_loss(hidden, head, targets, scale[, weights]) ->
  // (loss, logsumexp) becomes sequence_logps(hidden, head, targets, sequence_ids) -> (logps, logit_sums, logsumexp).
  const graph::TensorId sequence_ids =
      forward.add_tensor({kSequenceIds, {DType::I32, graph::Shape{batch, sequence}}, graph::TensorRole::Input});
  forward.inputs.push_back(sequence_ids);
  const DType statistic = forward.tensor(loss).type.dtype;
  const graph::TensorId logit_sums_id =
      rewrite_to_sequence_logps(forward, loss, sequence_ids, sequences, kPolicyLogps, kPolicyLogitSums);

  graph::GraphBuilder builder(registry, std::move(forward));
  const graph::TensorId reference = builder.input(kReferenceLogps, statistic, {sequences});
  const graph::TensorId lengths = builder.input(kSequenceLengths, statistic, {sequences});
  const graph::TensorId labels = builder.input(kPreferenceLabels, statistic, {batch});
  const graph::TensorId scales = builder.input(kPreferenceScales, statistic, {2});
  ObjectiveGraph result;
  result.loss = builder.op("preference_loss", {loss, reference, lengths, labels, scales},
                           ops::defs::preference_loss_attrs(options), "loss");
  builder.mark_output(logit_sums_id);
  builder.mark_output(result.loss);
  result.graph = builder.finish();
  return result;
}

}  // namespace surogate::train
