// The router load-balancing loss of MoE training graphs whose forward graph comes from a JSON IR
// file (model_definition). The file holds the graph without it, as `surogate ir` and the Python
// DSL write it (one file serves training and evaluation), and this rule adds exactly what
// models/decoder_graph.cpp adds for the same options, at the same places:
//   * after the last node of each router_topk node's scope (for "layers.3.route", the last node
//     named "layers.3.*"): router_statistics(probs, indices) and the running sums over the layers
//     (models/moe_block.h), in that scope and the router node's recompute group;
//   * the loss node (lm_head_loss) renamed "lm_loss" (its other outputs "lm_loss.<output>"), then
//     router_aux_loss, router_aux_loss_weighted and "loss" = their weighted sum: the graph's first
//     output, with "router_aux_loss" the second.
// Used by models/model_definition.cpp while it copies the file's graph node by node.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "io/model_config.h"
#include "models/moe_block.h"

namespace surogate::models {

class IrRouterLoss {
public:
  // `ir`: the file's graph; `loss_node`: the node writing its loss (an lm_head_loss, checked by the
  // caller); `tokens`: B·T; `micro_batches`: of one optimizer step. `source` names the file in errors.
  IrRouterLoss(const graph::Graph& ir, graph::NodeId loss_node, const io::MoeConfig& moe, int64_t tokens,
               int64_t micro_batches, const std::string& source);

  // The name the loss node, or one of its outputs, takes in the training graph.
  std::string renamed(const std::string& name) const;

  // Called once file node `index` has been copied into `result`; `mapped` takes each file tensor to
  // its copy. Appends the statistics (and after the loss node, the loss terms) placed there.
  void after_node(graph::Graph& result, const graph::OpRegistry& registry, size_t index,
                  const std::vector<graph::TensorId>& mapped);

  // The training graph's loss and unweighted router loss (after the loss node was copied).
  const RouterLossTerms& terms() const { return terms_; }

private:
  const graph::Graph& ir_;
  size_t loss_node_;
  std::string loss_name_;
  const io::MoeConfig& moe_;
  int64_t tokens_, micro_batches_;
  std::multimap<size_t, size_t> statistics_after_;  // file node index -> its router_topk nodes
  RouterLoss sums_;
  RouterLossTerms terms_;
};

}  // namespace surogate::models
