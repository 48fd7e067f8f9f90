// What the binder tests (test_model_kernels.cpp, test_fused_rope_cuda.cpp) share: a forward-only
// plan of a few nodes on the CUDA backend (floating operands are frozen parameters written from
// host floats, BF16 bits or F32; position_ids an input), and default RoPE frequencies as the
// model builder writes them (fp32 values) for the op attribute and the double reference.
#pragma once

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "ops/rope.h"
#include "cuda/test_helpers.h"
#include "graph/builder.h"
#include "ops/defs/register_ops.h"
#include "runtime/cuda_backend.h"

namespace surogate::runtime {

struct CudaNodePlan {
  graph::OpRegistry registry = ops::make_model_registry();
  graph::GraphBuilder builder{registry};
  compiler::ExecutionPlan plan;
  CudaBackend backend;

  graph::TensorId operand(const std::string& name, DType dtype, graph::Shape shape) {
    return builder.parameter(name, dtype, std::move(shape), false);
  }
  void load(const std::vector<graph::TensorId>& outputs) {
    for (graph::TensorId id : outputs) builder.mark_output(id);
    plan = compiler::compile_forward(builder.finish(), registry);
    backend.load(plan, registry);
  }
  void write(const std::string& name, const std::vector<float>& values) {
    const graph::TensorId id = plan.tensor(name);
    if (plan.graph.tensor(id).type.dtype == DType::BF16) {
      const std::vector<cuda::testing::Bf16> bits = cuda::testing::to_bf16(values);
      backend.write(id, std::as_bytes(std::span<const cuda::testing::Bf16>(bits)));
    } else {
      backend.write(id, std::as_bytes(std::span<const float>(values)));
    }
  }
  void run(const std::vector<int32_t>& positions) {
    std::vector<InputBinding> inputs;
    if (auto id = plan.graph.find_tensor("position_ids")) {
      inputs.push_back({*id, std::as_bytes(std::span<const int32_t>(positions))});
    }
    backend.execute(inputs);
  }
  std::vector<float> read(graph::TensorId id) {
    const graph::TensorType& type = plan.graph.tensor(id).type;
    if (type.dtype == DType::BF16) {
      std::vector<cuda::testing::Bf16> bits(static_cast<size_t>(type.numel()));
      backend.read(id, std::as_writable_bytes(std::span<cuda::testing::Bf16>(bits)));
      return cuda::testing::from_bf16(bits);
    }
    std::vector<float> values(static_cast<size_t>(type.numel()));
    backend.read(id, std::as_writable_bytes(std::span<float>(values)));
    return values;
  }
};

// theta 10000's inverse frequencies for `rotary_dim`, rounded to fp32: the "inv_freq" attribute
// and the same values (with `scaling`) for ops::rope_* in double.
struct TestRopeFrequencies {
  std::vector<double> inv_freq;
  ops::RopeFrequencies<double> reference;
};
inline TestRopeFrequencies test_rope_frequencies(int rotary_dim, float scaling) {
  TestRopeFrequencies result;
  for (int i = 0; i < rotary_dim / 2; ++i) {
    const float value = static_cast<float>(1.0 / std::pow(10000.0, 2.0 * i / rotary_dim));
    result.inv_freq.push_back(value);
    result.reference.inverse_frequency.push_back(value);
  }
  result.reference.attention_scaling = static_cast<double>(scaling);
  return result;
}

}  // namespace surogate::runtime
