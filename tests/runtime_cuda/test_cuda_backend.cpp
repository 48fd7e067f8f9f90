// CudaBackend against CpuBackend on the same plans: the toy transformer (core + toy ops, three
// layers, odd sizes) and a graph of every core op. Losses and parameter gradients must agree
// within a relative tolerance (max |cuda - cpu| / max |cpu|); the CUDA kernels are fp32 like the
// CPU ones and follow their arithmetic order, so the differences are fp32 rounding (tanhf, fused
// multiply-adds, the order of the loss sum):
//   core-op graph: 1e-6      toy transformer loss and gradients: 1e-5
// Without a GPU the device tests skip with the reason; the load-time refusal of ops without a
// CUDA binder needs no device and always runs.
// CUDA graphs (set_cuda_graphs): the eager warm-up, the capturing execute and the replays after it
// must give the eager run's loss and gradients bit for bit (same kernels, same arguments, same
// order), with a new batch uploaded before every call; a capture CUDA refuses falls back to eager
// execution with one warning line.
// offload_residual's host copies (runtime/cuda_host_copies.h) on side streams: the same results bit
// for bit as the plan without them, eagerly, captured in a graph and with the time breakdown.
// execute_forward: the forward steps alone, the loss of execute() bit for bit, no gradient written.
// bf16 mul / sum / broadcast (a pipeline stage's loss, sum(t · g)): the gradient of t is g bit for
// bit (seed 1, broadcast, 1 · g are exact), and the loss is the double sum of the bf16 products
// rounded to bf16 (within one bf16 rounding, 2^-8 relative, of the sum computed here).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "compiler/engine_test_util.h"
#include "compiler/toy_ops.h"
#include "core/bfloat16.h"
#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "runtime/byte_move_case.h"
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
using runtime::CudaBindContext;
using runtime::CudaKernel;
using runtime::CudaKernelArgs;
using runtime::CudaOpTable;
using runtime::InputBinding;

#define SKIP_WITHOUT_GPU()                                          \
  do {                                                              \
    std::string reason;                                             \
    if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason; \
  } while (0)

constexpr int64_t kRows = 37, kWidth = 24, kHidden = 40;

ExecutionPlan compile_toy(const RecomputePolicy& policy, bool offload_residual = false) {
  ToyModel model = build_toy_transformer(3, kRows, kWidth, kHidden, DType::F32);
  CompileOptions options;
  options.recompute = policy;
  options.offload_residual = offload_residual;
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

TEST(CudaBackend, CopyWithinMovesTheRangesAsTheCpuDoes) {
  SKIP_WITHOUT_GPU();
  const ByteMoveCase moves;
  CudaBackend backend;
  moves.expect_moves_made(backend);
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

// The loss and every parameter gradient, as read back after one execute.
std::vector<std::vector<float>> results(const CudaBackend& gpu, const ExecutionPlan& plan) {
  std::vector<std::vector<float>> values{read_cuda(gpu, plan, plan.loss)};
  for (const auto& [parameter, gradient] : plan.parameter_gradients) values.push_back(read_cuda(gpu, plan, gradient));
  return values;
}

bool bitwise_equal(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) return false;
  }
  return true;
}

// execute_forward runs the forward steps alone: the loss bit for bit as execute() gives it, no
// gradient written (a sentinel survives), then a whole execute as on a fresh backend; a plan whose
// forward starts copies that complete in the backward (offload_residual) is refused.
TEST(CudaBackend, ExecuteForwardGivesExecutesLossBitForBitAndWritesNoGradient) {
  SKIP_WITHOUT_GPU();
  ExecutionPlan plan = compile_toy(RecomputePolicy::all());
  CpuBackend cpu;
  cpu.load(plan, toy_registry());
  randomize_all<float>(cpu, plan, 9);
  CudaBackend whole(toy_cuda_table()), forward(toy_cuda_table());
  for (CudaBackend* gpu : {&whole, &forward}) {
    gpu->load(plan, toy_registry());
    copy_leaves(cpu, *gpu, plan);
  }
  for (const auto& [parameter, gradient] : plan.parameter_gradients) {
    const std::vector<float> sentinel(static_cast<size_t>(plan.graph.tensor(gradient).type.numel()), 7.0f);
    forward.write(gradient, std::as_bytes(std::span<const float>(sentinel)));
  }
  whole.execute({});
  forward.execute_forward({});
  EXPECT_TRUE(bitwise_equal({read_cuda(forward, plan, plan.loss)}, {read_cuda(whole, plan, plan.loss)}));
  for (const auto& [parameter, gradient] : plan.parameter_gradients) {
    const std::vector<float> values = read_cuda(forward, plan, gradient);
    EXPECT_TRUE(std::all_of(values.begin(), values.end(), [](float v) { return v == 7.0f; }))
        << plan.graph.tensor(gradient).name;
  }
  forward.zero_gradients();
  forward.execute({});
  EXPECT_TRUE(bitwise_equal(results(forward, plan), results(whole, plan)));

  ExecutionPlan offloaded = compile_toy(RecomputePolicy::none(), true);
  ASSERT_GT(offloaded.offloaded_tensors, 0u);
  CudaBackend gpu(toy_cuda_table());
  gpu.load(offloaded, toy_registry());
  EXPECT_THROW(gpu.execute_forward({}), InternalError);
}

TEST(CudaBackend, CudaGraphReplaysAreBitIdenticalToEagerRunsWithNewInputs) {
  SKIP_WITHOUT_GPU();
  ExecutionPlan plan = compile_toy(RecomputePolicy::none());
  CpuBackend cpu;
  cpu.load(plan, toy_registry());
  randomize_all<float>(cpu, plan, 5);
  constexpr int kCalls = 5;
  std::vector<std::vector<float>> batches;
  for (int call = 0; call < kCalls; ++call) batches.push_back(random_values<float>(kRows * kWidth, 300 + call, 0.5));
  // Per call: gradients cleared first, except before the last call (they accumulate over a replay).
  auto run = [&](CudaBackend& gpu, bool graphs, std::vector<std::vector<std::vector<float>>>& per_call,
                 std::vector<bool>& launched) {
    gpu.set_cuda_graphs(graphs);
    for (int call = 0; call < kCalls; ++call) {
      if (call + 1 < kCalls) gpu.zero_gradients();
      InputBinding input{plan.tensor("x"), std::as_bytes(std::span<const float>(batches[call]))};
      gpu.execute(std::span<const InputBinding>(&input, 1));
      launched.push_back(gpu.graph_launched());
      per_call.push_back(results(gpu, plan));
    }
  };
  std::vector<std::vector<std::vector<float>>> eager, graphed;
  std::vector<bool> eager_launched, graph_launched;
  {
    CudaBackend gpu(toy_cuda_table());
    gpu.load(plan, toy_registry());
    copy_leaves(cpu, gpu, plan);
    run(gpu, false, eager, eager_launched);
  }
  CudaBackend gpu(toy_cuda_table());
  gpu.load(plan, toy_registry());
  copy_leaves(cpu, gpu, plan);
  run(gpu, true, graphed, graph_launched);
  EXPECT_EQ(eager_launched, std::vector<bool>(kCalls, false));
  // Call 1 is the eager warm-up, call 2 captures and launches, calls 3.. replay.
  EXPECT_EQ(graph_launched, (std::vector<bool>{false, true, true, true, true}));
  for (int call = 0; call < kCalls; ++call) {
    EXPECT_TRUE(bitwise_equal(graphed[call], eager[call])) << "call " << call + 1;
    // Each batch changes the loss: a replay that read a stale batch could not match the eager run.
    if (call > 0) EXPECT_NE(eager[call][0][0], eager[call - 1][0][0]) << "call " << call + 1;
  }
  // And the eager sequence itself is the CPU's (the same accumulation pattern).
  for (int call = 0; call < kCalls; ++call) {
    if (call + 1 < kCalls) cpu.zero_gradients();
    InputBinding input{plan.tensor("x"), std::as_bytes(std::span<const float>(batches[call]))};
    cpu.execute(std::span<const InputBinding>(&input, 1));
  }
  expect_same_results(cpu, gpu, plan, 1e-5);

  // A re-load drops the graph: warm-up and capture again, against the new regions.
  gpu.load(plan, toy_registry());
  copy_leaves(cpu, gpu, plan);
  std::vector<std::vector<std::vector<float>>> reloaded;
  std::vector<bool> reloaded_launched;
  run(gpu, true, reloaded, reloaded_launched);
  EXPECT_EQ(reloaded_launched, (std::vector<bool>{false, true, true, true, true}));
  for (int call = 0; call < kCalls; ++call) EXPECT_TRUE(bitwise_equal(reloaded[call], eager[call])) << "call " << call + 1;
}

TEST(CudaBackend, TimeBreakdownRunsEagerlyBesideACapturedGraph) {
  SKIP_WITHOUT_GPU();
  ExecutionPlan plan = compile_toy(RecomputePolicy::none());
  CpuBackend cpu;
  cpu.load(plan, toy_registry());
  randomize_all<float>(cpu, plan, 5);
  CudaBackend gpu(toy_cuda_table());
  gpu.load(plan, toy_registry());
  copy_leaves(cpu, gpu, plan);
  gpu.set_cuda_graphs(true);
  gpu.execute({});
  gpu.execute({});
  ASSERT_TRUE(gpu.graph_launched());
  gpu.zero_gradients();
  gpu.execute({});
  const std::vector<std::vector<float>> replayed = results(gpu, plan);
  // Per-op events need the steps launched one by one: the breakdown runs eagerly.
  gpu.set_time_breakdown(true);
  gpu.zero_gradients();
  gpu.execute({});
  EXPECT_FALSE(gpu.graph_launched());
  const auto breakdown = gpu.time_breakdown();
  ASSERT_FALSE(breakdown.empty());
  EXPECT_TRUE(std::any_of(breakdown.begin(), breakdown.end(),
                          [](const auto& entry) { return entry.first == "forward:toy_matmul"; }));
  for (const auto& [op, ms] : breakdown) EXPECT_GE(ms, 0.0) << op;
  EXPECT_TRUE(bitwise_equal(results(gpu, plan), replayed));
  // Off again: back to the graph, which is still valid.
  gpu.set_time_breakdown(false);
  gpu.zero_gradients();
  gpu.execute({});
  EXPECT_TRUE(gpu.graph_launched());
  EXPECT_TRUE(bitwise_equal(results(gpu, plan), replayed));
}

// The built-in table, with `sum` bound to a closure that synchronises its stream first: harmless
// when run eagerly, refused by CUDA inside a stream capture (a kernel launcher that breaks capture).
CudaOpTable table_with_capture_breaking_sum() {
  CudaOpTable table;
  for (const std::string& name : runtime::builtin_cuda_ops().names()) {
    const runtime::CudaBinder inner = *runtime::builtin_cuda_ops().find(name);
    if (name != "sum") {
      table.add(name, inner);
      continue;
    }
    table.add(name, [inner](const CudaBindContext& context) -> CudaKernel {
      CudaKernel kernel = inner(context);
      return [kernel](const CudaKernelArgs& args) {
        CUDA_CHECK(cudaStreamSynchronize(args.stream));
        kernel(args);
      };
    });
  }
  return table;
}

TEST(CudaBackend, Bf16StageLossGivesTheReceivedGradientExactly) {
  SKIP_WITHOUT_GPU();
  OpRegistry registry;
  register_core_ops(registry);
  GraphBuilder b(registry);
  constexpr int64_t kCount = 3000;  // more than one block's threads, not a multiple of 8
  TensorId t = b.parameter("t", DType::BF16, {kCount});
  TensorId g = b.input("g", DType::BF16, {kCount});
  TensorId loss = b.op("sum", {b.op("mul", {t, g}, {}, "product")}, {}, "loss");
  b.mark_output(loss);
  ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry);
  std::vector<uint16_t> values(kCount), gradient(kCount);
  const std::vector<float> a = random_values<float>(kCount, 71, 1.0), c = random_values<float>(kCount, 72, 1.0);
  double expected = 0.0;
  for (int64_t i = 0; i < kCount; ++i) {
    values[i] = float_to_bf16(a[i]);
    gradient[i] = float_to_bf16(c[i]);
    expected += static_cast<double>(bf16_to_float(float_to_bf16(bf16_to_float(values[i]) * bf16_to_float(gradient[i]))));
  }
  CudaBackend gpu;
  gpu.load(plan, registry);
  gpu.write(t, std::as_bytes(std::span<const uint16_t>(values)));
  InputBinding input{g, std::as_bytes(std::span<const uint16_t>(gradient))};
  gpu.zero_gradients();
  gpu.execute(std::span<const InputBinding>(&input, 1));
  std::vector<uint16_t> received(kCount);
  gpu.read(plan.parameter_gradients.at(t), std::as_writable_bytes(std::span<uint16_t>(received)));
  EXPECT_EQ(received, gradient);
  uint16_t total = 0;
  gpu.read(loss, std::as_writable_bytes(std::span<uint16_t>(&total, 1)));
  EXPECT_NEAR(bf16_to_float(total), expected, std::abs(expected) * std::ldexp(1.0, -8));
}

TEST(CudaBackend, RefusedCaptureWarnsOnceAndStaysEager) {
  SKIP_WITHOUT_GPU();
  OpRegistry registry;
  register_core_ops(registry);
  GraphBuilder b(registry);
  TensorId x = b.input("x", DType::F32, {kRows, 5});
  TensorId w = b.parameter("w", DType::F32, {kRows, 5});
  TensorId loss = b.op("sum", {b.op("mul", {x, w}, {}, "xw")}, {}, "loss");
  b.mark_output(loss);
  ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry);
  const CudaOpTable table = table_with_capture_breaking_sum();
  CpuBackend cpu;
  cpu.load(plan, registry);
  randomize_all<float>(cpu, plan, 11);
  CudaBackend gpu(table);
  gpu.load(plan, registry);
  copy_leaves(cpu, gpu, plan);
  gpu.set_cuda_graphs(true);
  ::testing::internal::CaptureStderr();
  for (int call = 0; call < 4; ++call) {
    std::vector<float> batch = random_values<float>(kRows * 5, 40 + call, 1.0);
    InputBinding input{x, std::as_bytes(std::span<const float>(batch))};
    gpu.zero_gradients();
    cpu.zero_gradients();
    gpu.execute(std::span<const InputBinding>(&input, 1));
    cpu.execute(std::span<const InputBinding>(&input, 1));
    EXPECT_FALSE(gpu.graph_launched()) << "call " << call + 1;
    expect_same_results(cpu, gpu, plan, 1e-6);
  }
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("use_cuda_graphs"), std::string::npos) << warnings;
  EXPECT_EQ(std::count(warnings.begin(), warnings.end(), '\n'), 1) << warnings;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // the refused capture left no error behind
}

// The toy transformer with every group recomputed keeps its residual adds (untagged) for the
// backward; offload_residual sends those of layers 0 and 1 to pinned host memory (3: layer 0 reads
// the graph input x). Five calls, each with a new batch (gradients cleared before each but the
// last, which accumulates): eagerly, with CUDA graphs (a capture that included the copies:
// launched from the second call) and with the time breakdown, the loss and gradients equal the
// plan without copies bit for bit.
TEST(CudaBackend, HostCopiesOverlapTheStepsAndChangeNoResult) {
  SKIP_WITHOUT_GPU();
  const ExecutionPlan plain = compile_toy(RecomputePolicy::all());
  const ExecutionPlan offloaded = compile_toy(RecomputePolicy::all(), true);
  ASSERT_EQ(offloaded.offloaded_tensors, 3u);
  CpuBackend cpu;
  cpu.load(plain, toy_registry());
  randomize_all<float>(cpu, plain, 5);
  constexpr int kCalls = 5;
  auto run = [&](const ExecutionPlan& plan, bool graphs, bool breakdown, std::vector<bool>* launched) {
    CudaBackend gpu(toy_cuda_table());
    gpu.load(plan, toy_registry());
    EXPECT_EQ(gpu.memory_report().host_bytes, plan.memory.host_bytes);
    for (auto ids : {plan.graph.parameters, plan.graph.inputs}) {  // by name: the plans' ids match
      for (TensorId id : ids) gpu.write(id, std::as_bytes(cpu.view<float>(plain.tensor(plan.graph.tensor(id).name))));
    }
    gpu.set_cuda_graphs(graphs);
    gpu.set_time_breakdown(breakdown);
    std::vector<std::vector<std::vector<float>>> per_call;
    for (int call = 0; call < kCalls; ++call) {
      if (call + 1 < kCalls) gpu.zero_gradients();
      const std::vector<float> batch = random_values<float>(kRows * kWidth, 500 + call, 0.5);
      InputBinding input{plan.tensor("x"), std::as_bytes(std::span<const float>(batch))};
      gpu.execute(std::span<const InputBinding>(&input, 1));
      if (launched) launched->push_back(gpu.graph_launched());
      per_call.push_back(results(gpu, plan));
    }
    return per_call;
  };
  const auto reference = run(plain, false, false, nullptr);
  std::vector<bool> launched;
  const auto graphed = run(offloaded, true, false, &launched);
  EXPECT_EQ(launched, (std::vector<bool>{false, true, true, true, true}));
  const auto eager = run(offloaded, false, false, nullptr);
  const auto timed = run(offloaded, false, true, nullptr);
  for (int call = 0; call < kCalls; ++call) {
    EXPECT_TRUE(bitwise_equal(eager[call], reference[call])) << "eager, call " << call + 1;
    EXPECT_TRUE(bitwise_equal(graphed[call], reference[call])) << "graphed, call " << call + 1;
    EXPECT_TRUE(bitwise_equal(timed[call], reference[call])) << "time breakdown, call " << call + 1;
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
