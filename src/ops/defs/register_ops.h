// Registration of every model op (embedding, rmsnorm, fused residual rmsnorm, linear, swiglu,
// rope, attention, lm-head cross-entropy, and their dedicated backward ops) with the engine's
// op registry: shape/dtype rule, gradient rule and CPU binder over the reference math of
// src/ops. The op names, inputs and attrs are documented in docs/ops.md ("Graph ops"); they
// are what models/decoder_graph.h emits.
#pragma once

#include "graph/op_registry.h"

namespace surogate::ops {

// Registers the model ops (call once per registry, after graph::register_core_ops).
void register_model_ops(graph::OpRegistry& registry);

// A registry holding the core ops and the model ops: what model graphs are built against.
graph::OpRegistry make_model_registry();

}  // namespace surogate::ops
