// CudaBackend::share_parameters_with: a forward plan reading another backend's parameters in
// place (how the trainer's GPU evaluator reads the training weights). On the toy transformer:
// the sharing backend's loss equals, bit for bit, that of a backend holding its own copy of the
// same parameters (same kernels, same inputs); it allocates none of the shared parameters'
// memory; and it sees a parameter written into the owner afterwards without any copy.
// CudaBackend::share_activation_memory_with (how that evaluator also runs in the training's arena
// and scratch): the borrowing backend's loss is the one of a backend with memory of its own, bit
// for bit, it allocates no arena, the owner's next execute gives the same loss as before the
// borrower ran in its memory, and a plan whose arena does not fit in the owner's gets its own.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "compiler/engine_test_util.h"
#include "compiler/toy_ops.h"
#include "cuda/device_info.h"
#include "runtime/cuda_backend.h"
#include "runtime_cuda/toy_cuda_ops.h"

namespace surogate::testing {
namespace {

using compiler::ExecutionPlan;
using runtime::CpuBackend;
using runtime::CudaBackend;

constexpr int64_t kRows = 37, kWidth = 24, kHidden = 40;

float loss_of(CudaBackend& backend, const ExecutionPlan& plan, graph::TensorId loss_id, const std::vector<float>& x) {
  static const std::vector<float> target = random_values<float>(kRows * kWidth, 8, 1.0);
  return run_toy_loss(backend, plan, loss_id, x, target);
}

// The toy transformer's training plan and its forward plan (the evaluator's), with their losses.
struct Plans {
  ExecutionPlan training, forward;
  graph::TensorId training_loss = graph::kNoTensor, forward_loss = graph::kNoTensor;
};

Plans toy_plans() {
  Plans plans;
  ToyModel training_model = build_toy_transformer(3, kRows, kWidth, kHidden, DType::F32);
  const std::string training_loss = training_model.graph.tensor(training_model.loss).name;
  plans.training = compiler::compile_training(std::move(training_model.graph), training_model.loss, toy_registry(), {});
  ToyModel forward_model = build_toy_transformer(3, kRows, kWidth, kHidden, DType::F32);
  const std::string forward_loss = forward_model.graph.tensor(forward_model.loss).name;
  plans.forward = compiler::compile_forward(std::move(forward_model.graph), toy_registry());
  plans.training_loss = plans.training.tensor(training_loss);
  plans.forward_loss = plans.forward.tensor(forward_loss);
  return plans;
}

// `cpu` and `owner` loaded with the training plan, the owner's parameters `cpu`'s random ones.
void load_owner(CpuBackend& cpu, CudaBackend& owner, const ExecutionPlan& training) {
  cpu.load(training, toy_registry());
  randomize_all<float>(cpu, training, 21);
  owner.load(training, toy_registry());
  for (graph::TensorId id : training.graph.parameters) owner.write(id, std::as_bytes(cpu.view<float>(id)));
}

TEST(CudaParameterSharing, AForwardPlanReadsTheOwnersParametersInPlace) {
  std::string reason;
  if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  const Plans plans = toy_plans();
  const ExecutionPlan& training = plans.training;
  const ExecutionPlan& forward = plans.forward;
  ASSERT_FALSE(forward.graph.parameters.empty());
  const graph::TensorId loss = plans.forward_loss;

  CpuBackend cpu;  // the source of random parameters
  CudaBackend owner(toy_cuda_table());
  load_owner(cpu, owner, training);

  CudaBackend shared(toy_cuda_table());
  shared.share_parameters_with(owner);
  shared.load(forward, toy_registry());
  CudaBackend copied(toy_cuda_table());
  copied.load(forward, toy_registry());
  for (graph::TensorId id : forward.graph.parameters) {
    copied.write(id, std::as_bytes(cpu.view<float>(training.tensor(forward.graph.tensor(id).name))));
  }

  EXPECT_EQ(shared.memory_report().required_bytes + forward.memory.parameter_bytes,
            copied.memory_report().required_bytes)
      << "the sharing backend allocated shared parameters";
  const std::vector<float> x = random_values<float>(kRows * kWidth, 7, 0.5);
  const float shared_loss = loss_of(shared, forward, loss, x);
  EXPECT_NE(shared_loss, 0.0f);
  EXPECT_EQ(shared_loss, loss_of(copied, forward, loss, x));

  // A parameter changed in the owner (as an optimizer step does) is what the next execute reads.
  const graph::TensorId first = forward.graph.parameters.front();
  const std::string name = forward.graph.tensor(first).name;
  std::vector<float> changed = random_values<float>(cpu.view<float>(training.tensor(name)).size(), 99, 0.5);
  owner.write(training.tensor(name), std::as_bytes(std::span<const float>(changed)));
  copied.write(first, std::as_bytes(std::span<const float>(changed)));
  const float changed_loss = loss_of(shared, forward, loss, x);
  EXPECT_NE(changed_loss, shared_loss);
  EXPECT_EQ(changed_loss, loss_of(copied, forward, loss, x));
}

TEST(CudaActivationSharing, AForwardPlanRunsInTheOwnersArenaAndScratch) {
  std::string reason;
  if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  const Plans plans = toy_plans();
  const ExecutionPlan& training = plans.training;
  const ExecutionPlan& forward = plans.forward;
  ASSERT_LE(forward.memory.arena_bytes, training.memory.arena_bytes);
  ASSERT_GT(forward.memory.arena_bytes, 0u);

  CpuBackend cpu;
  CudaBackend owner(toy_cuda_table());
  load_owner(cpu, owner, training);
  CudaBackend borrowing(toy_cuda_table());
  borrowing.share_parameters_with(owner);
  borrowing.share_activation_memory_with(owner);
  borrowing.load(forward, toy_registry());
  CudaBackend own(toy_cuda_table());
  own.share_parameters_with(owner);
  own.load(forward, toy_registry());

  EXPECT_TRUE(borrowing.borrows_arena());
  EXPECT_EQ(borrowing.arena_data(), owner.arena_data());
  EXPECT_FALSE(own.borrows_arena());
  EXPECT_EQ(borrowing.memory_report().required_bytes + compiler::align_up(forward.memory.arena_bytes, 256),
            own.memory_report().required_bytes)
      << "the borrowing backend allocated an arena";
  const std::vector<float> x = random_values<float>(kRows * kWidth, 7, 0.5);
  const float before = loss_of(owner, training, plans.training_loss, x);
  const float borrowed = loss_of(borrowing, forward, plans.forward_loss, x);
  EXPECT_NE(borrowed, 0.0f);
  EXPECT_EQ(borrowed, loss_of(own, forward, plans.forward_loss, x));
  EXPECT_EQ(loss_of(owner, training, plans.training_loss, x), before)
      << "the owner's step changed after another plan ran in its memory";

  // A plan larger than the owner's arena gets its own.
  ToyModel small_model = build_toy_transformer(1, 4, kWidth, kHidden, DType::F32);
  ExecutionPlan small = compiler::compile_forward(std::move(small_model.graph), toy_registry());
  ASSERT_LT(small.memory.arena_bytes, forward.memory.arena_bytes);
  CudaBackend small_owner(toy_cuda_table());
  small_owner.load(small, toy_registry());
  CudaBackend larger(toy_cuda_table());
  larger.share_activation_memory_with(small_owner);
  larger.load(forward, toy_registry());
  EXPECT_FALSE(larger.borrows_arena());
  EXPECT_NE(larger.arena_data(), small_owner.arena_data());
}

}  // namespace
}  // namespace surogate::testing
