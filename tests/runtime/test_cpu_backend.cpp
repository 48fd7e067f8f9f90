// CpuBackend: executes plans without allocating, gives bit-identical gradients whatever the
// recompute policy, runs the forward alone (execute_forward), converts bf16 weights on load, and
// rejects wrong-sized writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "compiler/engine_test_util.h"
#include "runtime/byte_move_case.h"
#include "compiler/toy_ops.h"
#include "core/bfloat16.h"
#include "core/error.h"

// Counts heap allocations while `g_counting` is set: the step loop must make none.
namespace {
std::atomic<bool> g_counting{false};
std::atomic<size_t> g_allocations{0};
}  // namespace

void* operator new(size_t size) {
  if (g_counting) ++g_allocations;
  if (void* pointer = std::malloc(size == 0 ? 1 : size)) return pointer;
  throw std::bad_alloc();
}
void operator delete(void* pointer) noexcept { std::free(pointer); }
void operator delete(void* pointer, size_t) noexcept { std::free(pointer); }

namespace surogate::testing {
namespace {

using namespace surogate::graph;
using compiler::CompileOptions;
using compiler::ExecutionPlan;
using compiler::RecomputePolicy;
using runtime::CpuBackend;
using runtime::InputBinding;

ExecutionPlan compile_toy(const RecomputePolicy& policy) {
  ToyModel model = build_toy_transformer(3, 8, 16, 32, DType::F32);
  CompileOptions options;
  options.recompute = policy;
  return compiler::compile_training(std::move(model.graph), model.loss, toy_registry(), options);
}

TEST(CpuBackend, CopyWithinMovesTheRangesAndRefusesOverlappingDestinations) {
  const ByteMoveCase moves;
  CpuBackend backend;
  moves.expect_moves_made(backend);
  // Refused before anything is copied: a destination over another move's source, one past the
  // tensor's end, a move over itself.
  const TensorId table = moves.plan.tensor("table");
  const std::vector<std::byte> bytes = byte_move_table();
  std::vector<std::byte> got(bytes.size());
  backend.write(table, bytes);
  for (const std::vector<runtime::ByteMove>& bad : {
           std::vector<runtime::ByteMove>{{table, 0, 8192, 4096}, {table, 8192, 20000, 16}},
           std::vector<runtime::ByteMove>{{table, 0, bytes.size() - 8, 16}},
           std::vector<runtime::ByteMove>{{table, 0, 100, 200}}}) {
    EXPECT_THROW(backend.copy_within(bad), InternalError);
  }
  backend.read(table, got);
  EXPECT_EQ(got, bytes);
}

TEST(CpuBackend, ExecuteDoesNotAllocate) {
  ExecutionPlan plan = compile_toy(RecomputePolicy::all());
  CpuBackend backend;
  backend.load(plan, toy_registry());
  randomize_all<float>(backend, plan, 5);
  std::vector<float> x = random_values<float>(8 * 16, 99);
  InputBinding input{plan.tensor("x"), std::as_bytes(std::span<const float>(x))};
  const std::byte* arena = backend.arena_data();
  g_allocations = 0;
  g_counting = true;
  backend.execute(std::span<const InputBinding>(&input, 1));
  backend.execute(std::span<const InputBinding>(&input, 1));
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 0u);
  EXPECT_EQ(backend.arena_data(), arena);
  EXPECT_EQ(backend.arena_bytes(), plan.memory.arena_bytes);
  EXPECT_TRUE(std::isfinite(backend.view<float>(plan.loss)[0]));
}

TEST(CpuBackend, GradientsAreBitIdenticalUnderEveryRecomputePolicy) {
  auto gradients_for = [](const RecomputePolicy& policy, size_t& arena_bytes) {
    ExecutionPlan plan = compile_toy(policy);
    CpuBackend backend;
    backend.load(plan, toy_registry());
    randomize_all<float>(backend, plan, 21);
    backend.execute({});
    arena_bytes = plan.memory.arena_bytes;
    std::vector<std::vector<float>> result;
    result.push_back(read_vector<float>(backend, plan.loss));
    for (const auto& [parameter, gradient] : plan.parameter_gradients) result.push_back(read_vector<float>(backend, gradient));
    return result;
  };
  size_t baseline_bytes = 0;
  auto baseline = gradients_for(RecomputePolicy::none(), baseline_bytes);
  for (const RecomputePolicy& policy : {RecomputePolicy{.rmsnorm = true}, RecomputePolicy{.swiglu = true},
                                        RecomputePolicy{.ffn = true}, RecomputePolicy{.att = true},
                                        RecomputePolicy::all()}) {
    size_t bytes = 0;
    auto recomputed = gradients_for(policy, bytes);
    ASSERT_EQ(recomputed.size(), baseline.size());
    for (size_t i = 0; i < baseline.size(); ++i) {
      ASSERT_EQ(recomputed[i].size(), baseline[i].size());
      EXPECT_EQ(std::memcmp(recomputed[i].data(), baseline[i].data(), baseline[i].size() * sizeof(float)), 0)
          << "tensor " << i << " differs";
    }
    EXPECT_LE(bytes, baseline_bytes);
  }
}

TEST(CpuBackend, ExecuteForwardGivesExecutesLossBitForBitAndWritesNoGradient) {
  ExecutionPlan plan = compile_toy(RecomputePolicy::all());
  ASSERT_LT(plan.forward_steps, plan.steps.size());
  CpuBackend whole, forward;
  for (CpuBackend* backend : {&whole, &forward}) {
    backend->load(plan, toy_registry());
    randomize_all<float>(*backend, plan, 33);
  }
  for (const auto& [parameter, gradient] : plan.parameter_gradients) {
    std::span<float> values = forward.view<float>(gradient);
    std::fill(values.begin(), values.end(), 7.0f);  // a sentinel the backward would overwrite
  }
  whole.execute({});
  forward.execute_forward({});
  const float whole_loss = whole.view<float>(plan.loss)[0], forward_loss = forward.view<float>(plan.loss)[0];
  EXPECT_EQ(std::memcmp(&whole_loss, &forward_loss, sizeof(float)), 0) << whole_loss << " vs " << forward_loss;
  for (const auto& [parameter, gradient] : plan.parameter_gradients) {
    for (float value : forward.view<float>(gradient)) ASSERT_EQ(value, 7.0f) << plan.graph.tensor(gradient).name;
    const std::span<float> computed = whole.view<float>(gradient);
    EXPECT_TRUE(std::any_of(computed.begin(), computed.end(), [](float value) { return value != 0.0f; }));
  }
}

TEST(CpuBackend, ConvertsBf16WeightsOnWrite) {
  ExecutionPlan plan = compile_toy(RecomputePolicy::none());
  CpuBackend backend;
  backend.load(plan, toy_registry());
  TensorId weight = plan.tensor("layers.0.attn.q.weight");
  std::vector<uint16_t> bf16(16 * 16);
  for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = float_to_bf16(static_cast<float>(i) * 0.25f - 3.0f);
  backend.write_converted(weight, DType::BF16, std::as_bytes(std::span<const uint16_t>(bf16)));
  auto values = backend.view<float>(weight);
  for (size_t i = 0; i < bf16.size(); ++i) EXPECT_EQ(values[i], static_cast<float>(i) * 0.25f - 3.0f);
  EXPECT_THROW(backend.write_converted(weight, DType::BF16, std::as_bytes(std::span<const uint16_t>(bf16).first(7))),
               UserError);
}

TEST(CpuBackend, RejectsWrongSizedWritesAndMissingKernels) {
  ExecutionPlan plan = compile_toy(RecomputePolicy::none());
  CpuBackend backend;
  backend.load(plan, toy_registry());
  std::vector<float> too_short(3);
  EXPECT_THROW(backend.write(plan.tensor("x"), std::as_bytes(std::span<const float>(too_short))), UserError);
  EXPECT_THROW(backend.view<double>(plan.tensor("x")), UserError);

  OpRegistry registry;
  register_core_ops(registry);
  registry.add(OpDef{.name = "no_kernel", .inputs = {"x"}, .outputs = {"out"},
                     .infer = [](const InferContext& ctx) { return std::vector<TensorType>{ctx.input(0)}; },
                     .gradient = {}, .cpu = {}});
  GraphBuilder b(registry);
  TensorId out = b.op("no_kernel", {b.input("x", DType::F32, {2})});
  b.mark_output(out);
  ExecutionPlan forward = compiler::compile_forward(b.finish(), registry);
  CpuBackend other;
  EXPECT_THROW(other.load(forward, registry), UserError);
}

}  // namespace
}  // namespace surogate::testing
