// Small ops for engine tests, registered with full shape rules, gradient rules and F32/F64 CPU
// kernels, so autodiff, recompute and planning can be tested before (and independently of) the
// real ops in src/ops/:
//   toy_matmul(a[M,K], b[K,N]){transpose_a?, transpose_b?} -> [M,N]
//   toy_tanh(x) -> tanh(x);          gradient via toy_tanh_backward(y, dy) (reads the output)
//   toy_norm(x[M,N]){eps} -> (x * rstd, rstd[M]);  gradient via toy_norm_backward(x, rstd, dy)
//     (an auxiliary saved output, like rmsnorm's rstd)
// plus a builder for a tiny transformer-shaped graph that uses every recompute group.
#pragma once

#include "graph/builder.h"
#include "graph/op_registry.h"

namespace surogate::testing {

void register_toy_ops(graph::OpRegistry& registry);

// Registry with the core ops and the toy ops.
const graph::OpRegistry& toy_registry();

struct ToyModel {
  graph::Graph graph;
  graph::TensorId loss = graph::kNoTensor;
};

// `layers` blocks of: norm -> q proj -> tanh -> out proj -> residual add; norm -> gate/up
// projections -> tanh(gate)*up -> down proj -> residual add. Input "x" [rows, width]; loss is
// sum(x_final * target). Every projection weight is a trainable parameter unless `frozen`.
ToyModel build_toy_transformer(int layers, int64_t rows, int64_t width, int64_t hidden, DType dtype,
                               bool frozen_projections = false);

}  // namespace surogate::testing
