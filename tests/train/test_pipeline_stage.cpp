// The pipeline stage's 1F1B algorithm (train/device/parallel/pipeline_stage.h), written once for
// every backend, over a recording StageDevice on three gloo ranks: stage 0 sends "h" to stages 1
// and 2, stage 1 sends "g" to stage 2. The fake plans compute with small integers (exact in fp32),
// so each check is exact: every micro-batch's received tensors reach its forward and its training
// plan, the gradients of a tensor read by two later stages are summed, a received tensor's gradient
// is zeroed before the training plan runs, and only the last stage reports a loss — over two steps
// of different micro-batch counts (the slots reused, a second program made).
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "distributed/gloo_communicator.h"
#include "distributed/process_world.h"
#include "distributed/rank_threads.h"
#include "train/device/parallel/pipeline_stage.h"

namespace surogate::train {
namespace {

using Pair = std::vector<float>;  // every boundary tensor here is F32[2]

const graph::TensorType kPair{DType::F32, {2}};

// Stage 0: h = (m + 1, -(m + 1)). Stage 1: g = 2 h; its gradient of h is g's gradient + 1.
// Stage 2 (last): gradients 10 (m + 1) for h and 100 (m + 1) for g, loss m + 1. Every stage's
// device also reports a loss, which only the last stage's PipelineStage may pass on.
class RecordingDevice final : public StageDevice {
public:
  RecordingDevice(int stage, size_t received, size_t sent)
      : stage_(stage), sent_(sent, Pair(2)), sent_gradients_(sent, Pair(2)), parameters_(received, Pair(2)),
        parameter_gradients_(received, Pair(2, 7.0f)) {}

  void* allocate(size_t bytes) override { return slots_.emplace_back(bytes / sizeof(float)).data(); }
  void run_forward(const StageMicroBatch&, std::span<void* const> received) override {
    const auto m = static_cast<float>(forwards_++);
    std::vector<Pair>& seen = forward_inputs.emplace_back();
    for (void* tensor : received) seen.emplace_back(static_cast<float*>(tensor), static_cast<float*>(tensor) + 2);
    if (stage_ == 0) sent_[0] = {m + 1, -(m + 1)};
    if (stage_ == 1) sent_[0] = {2 * seen[0][0], 2 * seen[0][1]};
  }
  const void* sent(size_t k) override { return sent_[k].data(); }
  void* sent_gradient(size_t k) override { return sent_gradients_[k].data(); }
  void* received_parameter(size_t k) override { return parameters_[k].data(); }
  void* received_gradient(size_t k) override { return parameter_gradients_[k].data(); }
  void run_training(const StageMicroBatch&) override {
    const auto m = static_cast<float>(trainings_++);
    training_parameters.push_back(parameters_);
    training_gradients.push_back(sent_gradients_);
    for (const Pair& gradient : parameter_gradients_) zeroed = zeroed && gradient == Pair{0.0f, 0.0f};
    if (stage_ == 1) parameter_gradients_[0] = {sent_gradients_[0][0] + 1, sent_gradients_[0][1] + 1};
    if (stage_ == 2) parameter_gradients_ = {Pair(2, 10 * (m + 1)), Pair(2, 100 * (m + 1))};
    loss_ += stage_ == 2 ? m + 1 : 1000.0;
  }
  void copy(void* destination, const void* source, size_t bytes) override { std::memcpy(destination, source, bytes); }
  void add(void* destination, const void* source, const graph::TensorType& type) override {
    float* sum = static_cast<float*>(destination);
    for (int64_t i = 0; i < type.numel(); ++i) sum[i] += static_cast<const float*>(source)[i];
  }
  void zero(void* destination, size_t bytes) override { std::memset(destination, 0, bytes); }
  // The plans run on while a send is in flight: its data is copied, as on a CPU.
  const void* outgoing(const void* data, size_t bytes) override {
    return outgoing_.emplace_back(static_cast<const float*>(data), static_cast<const float*>(data) + bytes / 4).data();
  }
  void sends_done() override { outgoing_.clear(); }
  double loss() override { return std::exchange(loss_, 0.0); }
  void refresh_weights() override {}

  std::vector<std::vector<Pair>> forward_inputs, training_parameters, training_gradients;  // per micro-batch
  bool zeroed = true;  // every received tensor's gradient, when the training plan ran

private:
  int stage_;
  int forwards_ = 0, trainings_ = 0;
  std::vector<Pair> sent_, sent_gradients_, parameters_, parameter_gradients_;
  std::deque<Pair> slots_, outgoing_;
  double loss_ = 0.0;
};

std::vector<PipelineStagePlan> three_stages() {
  std::vector<PipelineStagePlan> plans(3);
  const distributed::BoundaryTensor h{"h", 0, {1, 2}}, g{"g", 1, {2}};
  for (int s = 0; s < 3; ++s) plans[static_cast<size_t>(s)].graph.stage = s;
  plans[0].graph.sent = {h};
  plans[1].graph.received = {h};
  plans[1].graph.sent = {g};
  plans[2].graph.received = {h, g};
  return plans;
}

StageBoundary boundary_of(const PipelineStagePlan& plan) {
  StageBoundary boundary;
  boundary.received_types.assign(plan.graph.received.size(), kPair);
  boundary.sent_types.assign(plan.graph.sent.size(), kPair);
  return boundary;
}

TEST(PipelineStage, SendsEachMicroBatchWhereItIsReadAndSumsTheGradientsOfATensorReadTwice) {
  const std::vector<PipelineStagePlan> plans = three_stages();
  std::vector<const distributed::StageGraph*> graphs;
  for (const PipelineStagePlan& plan : plans) graphs.push_back(&plan.graph);
  const compiler::ExecutionPlan source;
  distributed::RankThreads threads(3);
  std::unique_ptr<distributed::ProcessWorld> alone = distributed::ProcessWorld::single();
  std::vector<std::unique_ptr<distributed::Communicator>> world = distributed::connect_gloo(threads, *alone, 0, 3);
  std::vector<RecordingDevice*> devices(3);
  std::vector<std::unique_ptr<PipelineStage>> stages(3);
  std::vector<double> losses(3, 0.0);
  const std::vector<int> steps = {4, 3};  // micro-batches per step: two programs, the slots reused
  threads.run([&](int s) {
    const PipelineStagePlan& plan = plans[static_cast<size_t>(s)];
    auto device = std::make_unique<RecordingDevice>(s, plan.graph.received.size(), plan.graph.sent.size());
    devices[static_cast<size_t>(s)] = device.get();
    auto& stage = stages[static_cast<size_t>(s)];
    stage = std::make_unique<PipelineStage>(source, plan, graphs, boundary_of(plan), std::move(device));
    for (int micro_batches : steps) {
      const std::vector<StageMicroBatch> batches(static_cast<size_t>(micro_batches));
      stage->run(batches, *world[static_cast<size_t>(s)], [](int other) { return other; });
      losses[static_cast<size_t>(s)] += stage->loss();
    }
  });
  const int total = 7;  // micro-batches over both steps, numbered on
  auto h = [](int m) { return Pair{static_cast<float>(m + 1), -static_cast<float>(m + 1)}; };
  auto twice = [](Pair pair) { return Pair{2 * pair[0], 2 * pair[1]}; };
  auto both = [](float value) { return Pair{value, value}; };
  for (const RecordingDevice* device : devices) {
    ASSERT_EQ(device->training_parameters.size(), static_cast<size_t>(total));
    EXPECT_TRUE(device->zeroed);
  }
  EXPECT_EQ(devices[0]->forward_inputs.size(), static_cast<size_t>(total));
  EXPECT_TRUE(devices[2]->forward_inputs.empty());  // the last stage runs only its training plan
  for (int m = 0; m < total; ++m) {
    const auto i = static_cast<size_t>(m);
    const auto scale = static_cast<float>(m + 1);
    EXPECT_EQ(devices[1]->forward_inputs[i], std::vector<Pair>{h(m)}) << m;
    EXPECT_EQ(devices[1]->training_parameters[i], std::vector<Pair>{h(m)}) << m;
    EXPECT_EQ(devices[2]->training_parameters[i], (std::vector<Pair>{h(m), twice(h(m))})) << m;
    EXPECT_EQ(devices[1]->training_gradients[i], std::vector<Pair>{both(100 * scale)}) << m;
    // h's gradient: stage 1's (100 (m + 1) + 1) plus stage 2's (10 (m + 1)).
    EXPECT_EQ(devices[0]->training_gradients[i], std::vector<Pair>{both(110 * scale + 1)}) << m;
  }
  EXPECT_EQ(losses, (std::vector<double>{0.0, 0.0, 10.0 + 18.0}));  // (1 + … + 4) + (5 + 6 + 7)
}

}  // namespace
}  // namespace surogate::train
