// CpuBackend::share_parameters_with: a plan reading another CPU backend's parameters in place
// (generation's prefill plan reading the decode plan's weights and KV caches). On the toy
// transformer: the sharing backend's loss equals, bit for bit, that of a backend holding its own
// copy; its shared tensors are the owner's memory; a write into the owner is what it reads next;
// a parameter the owner does not have alike (another shape) gets memory of its own, zeroed.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "compiler/engine_test_util.h"
#include "compiler/toy_ops.h"
#include "runtime/cpu_backend.h"

namespace surogate::testing {
namespace {

using compiler::ExecutionPlan;
using runtime::CpuBackend;

constexpr int64_t kRows = 37, kWidth = 24, kHidden = 40;

float toy_loss(CpuBackend& backend, const ExecutionPlan& plan, graph::TensorId loss_id, int64_t rows) {
  const std::vector<float> x = random_values<float>(rows * kWidth, 7, 0.5);
  const std::vector<float> target = random_values<float>(rows * kWidth, 8, 1.0);
  return run_toy_loss(backend, plan, loss_id, x, target);
}

// A backend sharing `owner`'s parameters, loaded with `plan`.
std::unique_ptr<CpuBackend> sharing(const CpuBackend& owner, const ExecutionPlan& plan) {
  auto shared = std::make_unique<CpuBackend>();
  shared->share_parameters_with(owner);
  shared->load(plan, toy_registry());
  return shared;
}

ExecutionPlan forward_plan(int64_t rows, int64_t hidden, std::string* loss_name) {
  ToyModel model = build_toy_transformer(2, rows, kWidth, hidden, DType::F32);
  *loss_name = model.graph.tensor(model.loss).name;
  return compiler::compile_forward(std::move(model.graph), toy_registry());
}

TEST(CpuParameterSharing, APlanOfAnotherShapeReadsAndSeesTheOwnersParametersInPlace) {
  std::string loss_name;
  const ExecutionPlan owner_plan = forward_plan(kRows, kHidden, &loss_name);
  const ExecutionPlan other = forward_plan(5, kHidden, &loss_name);  // other rows, the same parameters
  ASSERT_FALSE(other.graph.parameters.empty());
  CpuBackend owner;
  owner.load(owner_plan, toy_registry());
  randomize_all<float>(owner, owner_plan, 21);
  const std::unique_ptr<CpuBackend> sharing_backend = sharing(owner, other);
  CpuBackend& shared = *sharing_backend;
  CpuBackend copied;
  copied.load(other, toy_registry());
  for (graph::TensorId id : other.graph.parameters) {
    const graph::TensorId theirs = owner_plan.tensor(other.graph.tensor(id).name);
    EXPECT_EQ(shared.view<float>(id).data(), owner.view<float>(theirs).data()) << other.graph.tensor(id).name;
    copied.write(id, std::as_bytes(owner.view<float>(theirs)));
  }
  const graph::TensorId loss = other.tensor(loss_name);
  const float shared_loss = toy_loss(shared, other, loss, 5);
  EXPECT_NE(shared_loss, 0.0f);
  EXPECT_EQ(shared_loss, toy_loss(copied, other, loss, 5));

  const graph::TensorId first = other.graph.parameters.front();
  std::vector<float> changed = random_values<float>(shared.view<float>(first).size(), 99, 0.5);
  owner.write(owner_plan.tensor(other.graph.tensor(first).name), std::as_bytes(std::span<const float>(changed)));
  copied.write(first, std::as_bytes(std::span<const float>(changed)));
  const float changed_loss = toy_loss(shared, other, loss, 5);
  EXPECT_NE(changed_loss, shared_loss);
  EXPECT_EQ(changed_loss, toy_loss(copied, other, loss, 5));
}

TEST(CpuParameterSharing, AParameterOfAnotherShapeGetsItsOwnZeroedMemory) {
  std::string loss_name;
  const ExecutionPlan owner_plan = forward_plan(kRows, kHidden, &loss_name);
  const ExecutionPlan wider = forward_plan(kRows, kHidden + 8, &loss_name);
  CpuBackend owner;
  owner.load(owner_plan, toy_registry());
  randomize_all<float>(owner, owner_plan, 21);
  const std::unique_ptr<CpuBackend> shared = sharing(owner, wider);
  size_t own = 0, alike = 0;
  for (graph::TensorId id : wider.graph.parameters) {
    const graph::TensorInfo& info = wider.graph.tensor(id);
    const graph::TensorId theirs = owner_plan.tensor(info.name);
    if (owner_plan.graph.tensor(theirs).type == info.type) {
      ++alike;
      EXPECT_EQ(shared->view<float>(id).data(), owner.view<float>(theirs).data()) << info.name;
      continue;
    }
    ++own;
    for (float value : shared->view<float>(id)) ASSERT_EQ(value, 0.0f) << info.name;
  }
  EXPECT_GT(own, 0u);
  EXPECT_GT(alike, 0u);
}

}  // namespace
}  // namespace surogate::testing
