// verify_graph: re-checks a whole graph (built in C++, imported from JSON IR, or produced by a
// compiler pass) and throws a UserError naming the first problem found:
//   * tensor names are non-empty and unique, roles agree with the inputs/parameters lists;
//   * every op is registered, every node's inputs exist and are produced earlier in node order
//     (or are inputs / parameters / constants);
//   * re-running each op's shape rule gives exactly the recorded output dtypes and shapes;
//   * every activation / gradient has exactly one producer, and no tensor is left dangling
//     (declared but neither produced, consumed, nor listed);
//   * at least one output is marked.
#pragma once

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::graph {

void verify_graph(const Graph& graph, const OpRegistry& registry);

}  // namespace surogate::graph
