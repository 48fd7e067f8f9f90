// The quantized base weights of a graph, every format; see quantized_weight.h.
#include "models/quantized_weight.h"

#include "models/qlora.h"

namespace surogate::models {

std::vector<QuantizedWeight> quantized_weights(const graph::Graph& graph) {
  return nf4_weights(graph);
}

}  // namespace surogate::models
