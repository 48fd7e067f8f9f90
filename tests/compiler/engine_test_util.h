// Helpers shared by engine tests: random parameters, running a plan on the CPU backend and
// reading tensors back as vectors.
#pragma once

#include <random>
#include <vector>

#include "compiler/execution_plan.h"
#include "runtime/cpu_backend.h"

namespace surogate::testing {

template <typename T>
std::vector<T> random_values(size_t count, uint32_t seed, double scale = 1.0) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> distribution(-scale, scale);
  std::vector<T> values(count);
  for (auto& value : values) value = static_cast<T>(distribution(generator));
  return values;
}

// Writes seeded random values into every parameter and input of the plan.
template <typename T>
void randomize_all(runtime::CpuBackend& backend, const compiler::ExecutionPlan& plan, uint32_t seed) {
  const auto& graph = plan.graph;
  for (auto ids : {graph.parameters, graph.inputs}) {
    for (graph::TensorId id : ids) {
      auto values = random_values<T>(static_cast<size_t>(graph.tensor(id).type.numel()), seed++, 0.5);
      std::copy(values.begin(), values.end(), backend.view<T>(id).begin());
    }
  }
}

// Runs a toy plan (compiler/toy_ops.h: inputs "x" and "target") on any backend and returns its loss.
inline float run_toy_loss(runtime::Backend& backend, const compiler::ExecutionPlan& plan, graph::TensorId loss,
                          std::span<const float> x, std::span<const float> target) {
  const runtime::InputBinding inputs[] = {{plan.tensor("x"), std::as_bytes(x)}, {plan.tensor("target"), std::as_bytes(target)}};
  backend.execute(inputs);
  float value = 0.0f;
  backend.read(loss, std::as_writable_bytes(std::span<float>(&value, 1)));
  return value;
}

template <typename T>
std::vector<T> read_vector(runtime::CpuBackend& backend, graph::TensorId id) {
  auto view = backend.view<T>(id);
  return {view.begin(), view.end()};
}

}  // namespace surogate::testing
