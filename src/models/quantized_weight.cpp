// The quantized base weights of a graph, every format; see quantized_weight.h.
#include "models/quantized_weight.h"

#include "models/fp8_recipe.h"
#include "models/qlora.h"

namespace surogate::models {

std::vector<QuantizedWeight> quantized_weights(const graph::Graph& graph) {
  std::vector<QuantizedWeight> result = nf4_weights(graph);
  for (QuantizedWeight& weight : fp8_weights(graph)) result.push_back(std::move(weight));
  for (QuantizedWeight& weight : fp8_block_weights(graph)) result.push_back(std::move(weight));
  for (QuantizedWeight& weight : nvfp4_weights(graph)) result.push_back(std::move(weight));
  return result;
}

}  // namespace surogate::models
