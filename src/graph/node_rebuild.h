// For graph passes that rebuild a graph node by node (sequence parallelism's, prompt sharing's):
// a node appended with its output types inferred again from its inputs' current types.
#pragma once

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::graph {

// Sets the types of `node`'s outputs in `graph` from the op's shape rule over its inputs' types
// there, then appends it.
void append_inferred(Graph& graph, const OpRegistry& registry, const Node& node);

}  // namespace surogate::graph
