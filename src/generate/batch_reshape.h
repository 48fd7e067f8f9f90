// A model_definition IR holds the graph of one [B0, T0] batch (models/model_definition.h), and
// models::build_model_graph builds only that shape; generation needs its own ([slots, 1] to
// decode, [rows, chunk] to prefill). reshape_batch re-infers such a forward graph at [B, T]: every
// input whose shape starts with [B0, T0] (the token inputs, token weights) takes [B, T] instead,
// and every node's outputs are what its shape rule gives for the new inputs, in order. Parameters,
// attrs and names are kept. A node whose attrs encode the old shape cannot follow: UserError naming
// the definition, both shapes and the node.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "models/model_definition.h"

namespace surogate::generate {

graph::Graph reshape_batch(const graph::Graph& forward, const graph::OpRegistry& registry, int64_t batch,
                           int64_t sequence, const std::string& source);

// The [B0, T0] of a definition's IR file (its input_ids), or nullopt for the built-in builder and
// for a file that does not load (models::build_model_graph then says why).
std::optional<std::pair<int64_t, int64_t>> definition_batch_shape(const models::ModelDefinition& definition,
                                                                  const graph::OpRegistry& registry);

}  // namespace surogate::generate
