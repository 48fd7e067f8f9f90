// Shared by the ops_defs tests: the model-op registry, seeded random doubles, the probe loss, a
// training run with finite-difference gradient checks (check_gradients: central differences along a
// random direction, step 1e-5, relative error < 1e-6, and the same gradient on a second identical
// step) and a forward-only run for comparing op outputs (ForwardRun).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "graph/builder.h"
#include "graph/op_registry.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"

namespace surogate::ops_defs_testing {

using graph::GraphBuilder;
using graph::Shape;
using graph::TensorId;
using nlohmann::json;

constexpr double kStep = 1e-5;
constexpr double kTolerance = 1e-6;

inline const graph::OpRegistry& registry() {
  static const graph::OpRegistry instance = [] {
    graph::OpRegistry r;
    graph::register_core_ops(r);
    ops::register_model_ops(r);
    return r;
  }();
  return instance;
}

inline std::vector<double> random_doubles(size_t count, uint32_t seed, double scale) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> distribution(-scale, scale);
  std::vector<double> values(count);
  for (double& value : values) value = distribution(generator);
  return values;
}

// sum(out · probe) with a frozen random probe of out's type.
inline TensorId probe_loss(GraphBuilder& b, TensorId out, const std::string& name = "probe") {
  TensorId probe = b.parameter(name, DType::F64, b.type(out).shape, /*trainable=*/false);
  return b.op("sum", {b.op("mul", {out, probe})});
}

using IntInputs = std::map<std::string, std::vector<int32_t>>;

struct Run {
  compiler::ExecutionPlan plan;
  runtime::CpuBackend backend;
  double loss() {
    double value = 0.0;
    backend.read(plan.loss, std::as_writable_bytes(std::span<double>(&value, 1)));
    return value;
  }
  double step() {
    backend.zero_gradients();
    backend.execute({});
    return loss();
  }
};

// A forward-only plan on the CPU backend, for comparing op outputs: parameters filled with seeded
// random doubles, outputs read back as doubles.
struct ForwardRun {
  compiler::ExecutionPlan plan;
  runtime::CpuBackend backend;

  ForwardRun(GraphBuilder& builder, uint32_t seed) : plan(compiler::compile_forward(builder.finish(), registry())) {
    backend.load(plan, registry());
    for (TensorId id : plan.graph.parameters) {
      auto values = random_doubles(static_cast<size_t>(plan.graph.tensor(id).type.numel()), seed++, 1.0);
      backend.write(id, std::as_bytes(std::span<const double>(values)));
    }
  }
  std::vector<double> read(TensorId id) {
    std::vector<double> values(static_cast<size_t>(plan.graph.tensor(id).type.numel()));
    backend.read(id, std::as_writable_bytes(std::span<double>(values)));
    return values;
  }
};

// Builds, compiles and runs the graph; checks every parameter gradient by finite differences.
// Returns the number of gradients checked.
inline size_t check_gradients(const std::function<TensorId(GraphBuilder&)>& build, const IntInputs& ints,
                       std::map<std::string, double> fixed = {}) {
  GraphBuilder builder(registry());
  TensorId loss = build(builder);
  builder.mark_output(loss);
  Run run{compiler::compile_training(builder.finish(), loss, registry()), {}};
  run.backend.load(run.plan, registry());
  const graph::Graph& g = run.plan.graph;
  uint32_t seed = 11;
  for (TensorId id : g.parameters) {
    auto values = random_doubles(static_cast<size_t>(g.tensor(id).type.numel()), seed++, 0.5);
    if (auto it = fixed.find(g.tensor(id).name); it != fixed.end()) values.assign(values.size(), it->second);
    run.backend.write(id, std::as_bytes(std::span<const double>(values)));
  }
  for (TensorId id : g.inputs) {
    const auto& info = g.tensor(id);
    auto it = ints.find(info.name);
    EXPECT_NE(it, ints.end()) << "no values for input " << info.name;
    if (it == ints.end()) return 0;
    run.backend.write(id, std::as_bytes(std::span<const int32_t>(it->second)));
  }
  const double loss0 = run.step();
  EXPECT_TRUE(std::isfinite(loss0));
  size_t checked = 0;
  for (auto [parameter, gradient_id] : run.plan.parameter_gradients) {
    const std::string& name = g.tensor(parameter).name;
    const size_t count = static_cast<size_t>(g.tensor(parameter).type.numel());
    std::vector<double> gradient(count), original(count);
    run.backend.read(gradient_id, std::as_writable_bytes(std::span<double>(gradient)));
    run.backend.read(parameter, std::as_writable_bytes(std::span<double>(original)));
    auto direction = random_doubles(count, seed++, 1.0);
    double analytic = 0.0;
    for (size_t i = 0; i < count; ++i) analytic += gradient[i] * direction[i];
    auto evaluate = [&](double sign) {
      std::vector<double> moved(original);
      for (size_t i = 0; i < count; ++i) moved[i] += sign * kStep * direction[i];
      run.backend.write(parameter, std::as_bytes(std::span<const double>(moved)));
      return run.step();
    };
    const double numeric = (evaluate(+1.0) - evaluate(-1.0)) / (2.0 * kStep);
    run.backend.write(parameter, std::as_bytes(std::span<const double>(original)));
    const double error = std::abs(analytic - numeric) / std::max({std::abs(analytic), std::abs(numeric), 1e-8});
    EXPECT_GT(std::abs(numeric), 1e-6) << "parameter " << name << ": the check is vacuous (zero derivative)";
    EXPECT_LT(error, kTolerance) << "parameter " << name << ": analytic " << analytic << " numeric " << numeric;
    // Running again gives the same gradient (outputs fully overwritten, parameter grads re-zeroed).
    run.step();
    std::vector<double> again(count);
    run.backend.read(gradient_id, std::as_writable_bytes(std::span<double>(again)));
    EXPECT_EQ(again, gradient) << "parameter " << name << ": gradient changed between identical steps";
    ++checked;
  }
  return checked;
}

}  // namespace surogate::ops_defs_testing
