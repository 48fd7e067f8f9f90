// The router loss added to training graphs read from JSON IR; see ir_router_loss.h.
#include "models/ir_router_loss.h"

#include "core/error.h"
#include "graph/builder.h"

namespace surogate::models {
namespace {

// "layers.3.route" -> "layers.3"; a name without a dot has the top-level scope "".
std::string scope_of(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? std::string() : name.substr(0, dot);
}

}  // namespace

IrRouterLoss::IrRouterLoss(const graph::Graph& ir, graph::NodeId loss_node, const io::MoeConfig& moe, int64_t tokens,
                           int64_t micro_batches, const std::string& source)
    : ir_(ir), loss_node_(static_cast<size_t>(loss_node)), loss_name_(ir.node(loss_node).name), moe_(moe),
      tokens_(tokens), micro_batches_(micro_batches) {
  for (size_t router = 0; router < ir.nodes.size(); ++router) {
    if (ir.nodes[router].op != "router_topk") continue;
    if (router > loss_node_) {
      fail_user("{}: router_topk node '{}' comes after the loss node '{}'; the router loss is added beside the loss, "
                "so every router must come before it", source, ir.nodes[router].name, loss_name_);
    }
    const std::string scope = scope_of(ir.nodes[router].name);
    size_t last = router;
    for (size_t index = router + 1; index < loss_node_ && !scope.empty(); ++index) {
      if (ir.nodes[index].name.starts_with(scope + ".")) last = index;
    }
    statistics_after_.emplace(last, router);
  }
  if (statistics_after_.empty()) {
    fail_user("{}: config.json sets output_router_logits, so training adds the router loss, but the graph has no "
              "router_topk node to take it from; route the sparse layers with router_topk, or set "
              "output_router_logits: false", source);
  }
}

std::string IrRouterLoss::renamed(const std::string& name) const {
  if (name == loss_name_) return "lm_loss";
  if (name.starts_with(loss_name_ + ".")) return "lm_loss" + name.substr(loss_name_.size());
  return name;
}

void IrRouterLoss::after_node(graph::Graph& result, const graph::OpRegistry& registry, size_t index,
                              const std::vector<graph::TensorId>& mapped) {
  const auto [first, end] = statistics_after_.equal_range(index);
  if (first == end && index != loss_node_) return;
  graph::GraphBuilder builder(registry, std::move(result));
  for (auto placed = first; placed != end; ++placed) {
    const graph::Node& router = ir_.nodes[placed->second];
    auto scope = builder.scope(scope_of(router.name));
    auto group = builder.recompute_group(router.recompute_group);
    add_router_statistics(builder, mapped.at(static_cast<size_t>(router.outputs.at(2))),
                          mapped.at(static_cast<size_t>(router.outputs.at(1))), sums_);
  }
  if (index == loss_node_) {
    const graph::TensorId lm_loss = mapped.at(static_cast<size_t>(ir_.node(static_cast<graph::NodeId>(index)).outputs[0]));
    terms_ = add_router_loss(builder, moe_, sums_, lm_loss, tokens_, micro_batches_);
  }
  result = builder.finish();
}

}  // namespace surogate::models
