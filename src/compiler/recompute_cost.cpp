// The FLOPs a plan re-runs; see recompute_cost.h.
#include "compiler/recompute_cost.h"

#include <algorithm>

#include "compiler/recompute.h"

namespace surogate::compiler {

double recompute_flops(const graph::Graph& graph, int64_t attention_span) {
  double flops = 0.0;
  for (const graph::Node& node : graph.nodes) {
    if (node.phase != graph::NodePhase::Recompute || node.inputs.empty() || node.outputs.empty()) continue;
    if (!is_expensive_to_recompute(node.op)) continue;
    const graph::TensorType& out = graph.tensors[node.outputs[0]].type;
    const graph::TensorType& x = graph.tensors[node.inputs[0]].type;
    const double elements = static_cast<double>(out.numel());
    if (is_attention(node.op)) {
      // q [B, T, Hq, D] or [B, T, Hq·D]: T is the row's length.
      int64_t span = attention_span > 0 ? attention_span : (x.shape.size() >= 2 ? x.shape[1] : 1);
      const int64_t window = node.attrs.value("window", int64_t{0});
      if (window > 0) span = std::min(span, 2 * window);
      flops += 2.0 * elements * static_cast<double>(span);
    } else if (!x.shape.empty()) {
      flops += 2.0 * elements * static_cast<double>(x.shape.back());
    }
  }
  return flops;
}

}  // namespace surogate::compiler
