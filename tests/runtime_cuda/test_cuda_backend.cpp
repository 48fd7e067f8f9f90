// CudaBackend against CpuBackend on the same plans: the toy transformer (core + toy ops, three
// layers, odd sizes) and a graph of every core op. Losses and parameter gradients must agree
// within a relative tolerance (max |cuda - cpu| / max |cpu|); the CUDA kernels are fp32 like the
// CPU ones and follow their arithmetic order, so the differences are fp32 rounding (tanhf, fused
// multiply-adds, the order of the loss sum):
//   core-op graph: 1e-6      toy transformer loss and gradients: 1e-5
// Without a GPU the device tests skip with the reason; the load-time refusal of ops without a
// CUDA binder needs no device and always runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compiler/engine_test_util.h"
#include "compiler/toy_ops.h"
#include "cuda/device_info.h"
#include "runtime/cuda_backend.h"
#include "runtime_cuda/toy_cuda_ops.h"

namespace surogate::testing {
namespace {

using namespace surogate::graph;
using compiler::CompileOptions;
using compiler::ExecutionPlan;
using compiler::RecomputePolicy;
using runtime::CpuBackend;
using runtime::CudaBackend;
using runtime::InputBinding;

#define SKIP_WITHOUT_GPU()                                          \
  do {                                                              \
    std::string reason;                                             \
    if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason; \
  } while (0)

constexpr int64_t kRows = 37, kWidth = 24, kHidden = 40;

ExecutionPlan compile_toy(const RecomputePolicy& policy) {
  ToyModel model = build_toy_transformer(3, kRows, kWidth, kHidden, DType::F32);
  CompileOptions options;
  options.recompute = policy;
  return compiler::compile_training(std::move(model.graph), model.loss, toy_registry(), options);
}

std::vector<float> read_cuda(const CudaBackend& backend, const ExecutionPlan& plan, TensorId id) {
  std::vector<float> values(static_cast<size_t>(plan.graph.tensor(id).type.numel()));
  backend.read(id, std::as_writable_bytes(std::span<float>(values)));
  return values;
}

// max |actual - expected| / max |expected| (a NaN anywhere fails: it makes the result NaN).
double relative_error(const std::vector<float>& actual, const std::vector<float>& expected) {
  EXPECT_EQ(actual.size(), expected.size());
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    double diff = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    if (std::isnan(diff)) return std::nan("");
    worst = std::max(worst, diff);
    scale = std::max(scale, std::fabs(static_cast<double>(expected[i])));
  }
  return scale == 0.0 ? worst : worst / scale;
}

// Copies every parameter and input of the CPU backend into the CUDA backend.
void copy_leaves(CpuBackend& cpu, CudaBackend& gpu, const ExecutionPlan& plan) {
  for (auto ids : {plan.graph.parameters, plan.graph.inputs}) {
    for (TensorId id : ids) gpu.write(id, std::as_bytes(cpu.view<float>(id)));
  }
}

// Loss and every parameter gradient agree within `tolerance`.
void expect_same_results(CpuBackend& cpu, const CudaBackend& gpu, const ExecutionPlan& plan, double tolerance) {
  EXPECT_LE(relative_error(read_cuda(gpu, plan, plan.loss), read_vector<float>(cpu, plan.loss)), tolerance) << "loss";
  for (const auto& [parameter, gradient] : plan.parameter_gradients) {
    EXPECT_LE(relative_error(read_cuda(gpu, plan, gradient), read_vector<float>(cpu, gradient)), tolerance)
        << plan.graph.tensor(gradient).name;
  }
}

TEST(CudaBackend, RefusesOpsWithoutBinderAtLoad) {
  ExecutionPlan plan = compile_toy(RecomputePolicy::none());
  CudaBackend backend;  // the built-in table: core ops only
  try {
    backend.load(plan, toy_registry());
    FAIL() << "load() accepted a plan with toy ops";
  } catch (const UserError& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("toy_matmul"), std::string::npos) << message;
    EXPECT_NE(message.find("toy_norm"), std::string::npos) << message;
    EXPECT_NE(message.find("no kernel"), std::string::npos) << message;
  }
}

TEST(CudaBackend, CoreOpGraphMatchesCpu) {
  SKIP_WITHOUT_GPU();
  OpRegistry registry;
  register_core_ops(registry);
  GraphBuilder b(registry);
  TensorId x = b.input("x", DType::F32, {kRows, 5});
  TensorId w = b.parameter("w", DType::F32, {kRows, 5});
  TensorId twos = b.op("fill", {}, {{"value", 2.0}, {"shape", {kRows, 5}}, {"dtype", "F32"}}, "twos");
  TensorId y = b.op("scale", {b.op("mul", {x, w}, {}, "xw")}, {{"factor", 0.5}}, "half");
  TensorId z = b.op("mul", {b.op("add", {y, w}, {}, "shifted"), twos}, {}, "doubled");
  TensorId loss = b.op("sum", {b.op("mul", {z, z}, {}, "squared")}, {}, "loss");
  b.mark_output(loss);
  ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry);

  CpuBackend cpu;
  cpu.load(plan, registry);
  CudaBackend gpu;
  gpu.load(plan, registry);
  randomize_all<float>(cpu, plan, 11);
  copy_leaves(cpu, gpu, plan);
  cpu.execute({});
  gpu.execute({});
  expect_same_results(cpu, gpu, plan, 1e-6);
  // Gradients accumulate across executions, and zero_gradients clears them.
  cpu.execute({});
  gpu.execute({});
  expect_same_results(cpu, gpu, plan, 1e-6);
  gpu.zero_gradients();
  std::vector<float> cleared = read_cuda(gpu, plan, plan.parameter_gradients.at(plan.tensor("w")));
  EXPECT_TRUE(std::all_of(cleared.begin(), cleared.end(), [](float v) { return v == 0.0f; }));
}

TEST(CudaBackend, ToyTransformerMatchesCpuAcrossBatches) {
  SKIP_WITHOUT_GPU();
  ExecutionPlan plan = compile_toy(RecomputePolicy::none());
  CpuBackend cpu;
  cpu.load(plan, toy_registry());
  CudaBackend gpu(toy_cuda_table());
  gpu.load(plan, toy_registry());
  randomize_all<float>(cpu, plan, 5);
  copy_leaves(cpu, gpu, plan);
  for (uint32_t batch = 0; batch < 3; ++batch) {
    // A new batch each time, uploaded by execute(); gradients accumulate over the three.
    std::vector<float> x = random_values<float>(kRows * kWidth, 100 + batch, 0.5);
    InputBinding input{plan.tensor("x"), std::as_bytes(std::span<const float>(x))};
    cpu.execute(std::span<const InputBinding>(&input, 1));
    gpu.execute(std::span<const InputBinding>(&input, 1));
    SCOPED_TRACE("batch " + std::to_string(batch));
    expect_same_results(cpu, gpu, plan, 1e-5);
  }
}

TEST(CudaBackend, GradientsAreBitIdenticalUnderRecompute) {
  SKIP_WITHOUT_GPU();
  std::vector<std::vector<float>> reference;
  for (const RecomputePolicy& policy : {RecomputePolicy::none(), RecomputePolicy::all()}) {
    ExecutionPlan plan = compile_toy(policy);
    CpuBackend cpu;  // only to produce the same seeded parameters
    cpu.load(plan, toy_registry());
    randomize_all<float>(cpu, plan, 5);
    CudaBackend gpu(toy_cuda_table());
    gpu.load(plan, toy_registry());
    copy_leaves(cpu, gpu, plan);
    gpu.execute({});
    size_t index = 0;
    for (const auto& [parameter, gradient] : plan.parameter_gradients) {
      std::vector<float> values = read_cuda(gpu, plan, gradient);
      if (reference.size() <= index) {
        reference.push_back(values);
      } else {
        ASSERT_EQ(values.size(), reference[index].size());
        EXPECT_EQ(std::memcmp(values.data(), reference[index].data(), values.size() * sizeof(float)), 0)
            << plan.graph.tensor(gradient).name;
      }
      ++index;
    }
  }
}

TEST(CudaBackend, ReportsMemoryAndRejectsWrongSizedWrites) {
  SKIP_WITHOUT_GPU();
  ExecutionPlan plan = compile_toy(RecomputePolicy::none());
  CudaBackend gpu(toy_cuda_table());
  gpu.load(plan, toy_registry());
  const auto& report = gpu.memory_report();
  const auto& memory = plan.memory;
  size_t expected = 0;
  for (size_t bytes : {memory.arena_bytes, memory.parameter_bytes, memory.gradient_bytes, memory.input_bytes}) {
    expected += compiler::align_up(bytes, memory.alignment);
  }
  EXPECT_EQ(report.required_bytes, expected);
  EXPECT_GE(report.free_bytes, report.required_bytes);
  EXPECT_GE(report.total_bytes, report.free_bytes);
  std::vector<float> wrong(3);
  EXPECT_THROW(gpu.write(plan.tensor("x"), std::as_bytes(std::span<const float>(wrong))), UserError);
  TensorId parameter = plan.graph.parameters.front();
  std::vector<float> values(static_cast<size_t>(plan.graph.tensor(parameter).type.numel()));
  InputBinding not_an_input{parameter, std::as_bytes(std::span<const float>(values))};
  EXPECT_THROW(gpu.execute(std::span<const InputBinding>(&not_an_input, 1)), UserError);
}

}  // namespace
}  // namespace surogate::testing
