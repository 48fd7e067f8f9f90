// JSON IR: a graph as a versioned JSON document, so models can be defined outside C++ and any
// compiled graph can be inspected. The format (version 1) is documented in docs/architecture.md:
//   {"version": 1,
//    "tensors": [{"name", "dtype", "shape", "role", "trainable"?}],
//    "nodes":   [{"name", "op", "inputs": [names], "outputs": [names], "attrs": {},
//                 "recompute_group"?, "phase"?}],
//    "inputs": [names], "parameters": [names], "outputs": [names]}
// Import checks the document's structure (errors name the node index or tensor name) and then
// runs verify_graph, so an imported graph is as trustworthy as a built one.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::graph {

constexpr int kJsonIrVersion = 1;

nlohmann::json graph_to_json(const Graph& graph);
Graph graph_from_json(const nlohmann::json& document, const OpRegistry& registry);

void save_json_ir(const Graph& graph, const std::filesystem::path& path);
Graph load_json_ir(const std::filesystem::path& path, const OpRegistry& registry);

}  // namespace surogate::graph
