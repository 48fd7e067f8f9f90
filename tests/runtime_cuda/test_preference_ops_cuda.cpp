// The preference-tuning ops on the CUDA backend (runtime/cuda_loss_ops.cpp: sequence_logps over the
// chunked LM-head kernel, its backward with per-row weights −d_logps[sequence], preference_loss on
// one block) against the fp32 CPU backend on the same bf16-rounded values: a training step of
//   loss = preference_loss(sequence_logps(hidden, head, targets, sequence_ids), reference, ...)
// for every loss type (and KTO with a padding row), and GRPO's per-token form with one sequence per
// scored row (train/objective/grpo_token_graph.h: loss = sum(mul(logps, coefficients))), in one
// chunk and in three. Tolerances as
// test_lm_head_grads_cuda.cpp's: the loss and the log-probs 1e-2 relative (bf16 logits), each
// gradient 5e-2 of its largest entry.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "core/bfloat16.h"
#include "cuda/device_info.h"
#include "graph/builder.h"
#include "ops/defs/preference_attrs.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "runtime/cuda_backend.h"

namespace surogate {
namespace {

constexpr int64_t kRows = 24, kChannels = 64, kVocab = 160, kPairs = 2;
constexpr const char* kGrpoPerToken = "grpo per token";

int64_t sequences_of(const std::string& type) { return type == kGrpoPerToken ? kRows : 2 * kPairs; }
constexpr double kLossTolerance = 1e-2, kGradientTolerance = 5e-2;

const graph::OpRegistry& preference_registry() {
  static const graph::OpRegistry registry = [] {
    graph::OpRegistry r;
    graph::register_core_ops(r);
    ops::register_model_ops(r);
    return r;
  }();
  return registry;
}

graph::Graph preference_graph(DType dtype, const std::string& type, int64_t chunks, graph::TensorId& loss) {
  graph::GraphBuilder b(preference_registry());
  const graph::TensorId hidden = b.parameter("hidden", dtype, {kRows, kChannels});
  const graph::TensorId head = b.parameter("head", dtype, {kVocab, kChannels});
  const graph::TensorId targets = b.input("targets", DType::I32, {kRows});
  const graph::TensorId sequence_ids = b.input("sequence_ids", DType::I32, {kRows});
  auto logps = b.op("sequence_logps", {hidden, head, targets, sequence_ids},
                    {{"chunks", chunks}, {"sequences", sequences_of(type)}});
  b.mark_output(logps[0]);
  auto data = [&](const char* name, int64_t size) { return b.input(name, DType::F32, {size}); };
  if (type == kGrpoPerToken) {
    const graph::TensorId weighed = b.op("mul", {logps[0], data("coefficients", kRows)});
    loss = b.op("sum", {weighed}, nlohmann::json::object(), "loss");
    b.mark_output(loss);
    return b.finish();
  }
  ops::PreferenceLossOptions options;
  EXPECT_TRUE(ops::parse_preference_loss_type(type, options.type));
  loss = b.op("preference_loss",
              {logps[0], data("reference", 2 * kPairs), data("lengths", 2 * kPairs), data("labels", kPairs), data("scales", 2)},
              ops::defs::preference_loss_attrs(options), "loss");
  b.mark_output(loss);
  return b.finish();
}

struct StepValues {
  double loss = 0.0;
  std::vector<float> logps, d_hidden, d_head;
};

template <typename Backend>
StepValues run_step(Backend& backend, const compiler::ExecutionPlan& plan, bool bf16, const std::vector<float>& hidden,
                    const std::vector<float>& head, bool padding_row, bool per_token) {
  const graph::Graph& g = plan.graph;
  auto write_weights = [&](const char* name, const std::vector<float>& values) {
    if (!bf16) {
      backend.write(g.require_tensor(name), std::as_bytes(std::span<const float>(values)));
      return;
    }
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = float_to_bf16(values[i]);
    backend.write(g.require_tensor(name), std::as_bytes(std::span<const uint16_t>(bits)));
  };
  write_weights("hidden", hidden);
  write_weights("head", head);
  // Rows 0-4 chosen 0, 6-10 chosen 1, 12-17 rejected 0, 18-22 rejected 1; the others score nothing.
  std::vector<int32_t> targets(kRows), sequence_ids(kRows, -1);
  for (int64_t row = 0; row < kRows; ++row) {
    targets[row] = static_cast<int32_t>((row * 37 + 11) % kVocab);
    if (row % 6 != 5) sequence_ids[row] = static_cast<int32_t>(per_token ? row : row / 6);
  }
  targets[3] = -100;
  // padding_row: pair (KTO: row) 1 is a padding row (length 0), which KTO's reference point leaves out.
  const std::vector<float> reference{-30.0f, -31.0f, -29.5f, -30.5f}, labels{1, 0}, scales{0.5f, 0.1f};
  const std::vector<float> lengths = padding_row ? std::vector<float>{4, 0, 5, 0} : std::vector<float>{4, 5, 5, 5};
  std::vector<float> coefficients(kRows);  // GRPO's per-token form: ∂loss/∂logp_t of either sign
  for (int64_t row = 0; row < kRows; ++row) coefficients[row] = static_cast<float>((row * 7) % 11 - 5) * 0.1f;
  std::vector<runtime::InputBinding> inputs{
      {g.require_tensor("targets"), std::as_bytes(std::span<const int32_t>(targets))},
      {g.require_tensor("sequence_ids"), std::as_bytes(std::span<const int32_t>(sequence_ids))}};
  if (per_token) {
    inputs.push_back({g.require_tensor("coefficients"), std::as_bytes(std::span<const float>(coefficients))});
  } else {
    inputs.push_back({g.require_tensor("reference"), std::as_bytes(std::span<const float>(reference))});
    inputs.push_back({g.require_tensor("lengths"), std::as_bytes(std::span<const float>(lengths))});
    inputs.push_back({g.require_tensor("labels"), std::as_bytes(std::span<const float>(labels))});
    inputs.push_back({g.require_tensor("scales"), std::as_bytes(std::span<const float>(scales))});
  }
  backend.zero_gradients();
  backend.execute(inputs);
  StepValues values;
  float loss = 0.0f;
  backend.read(plan.loss, std::as_writable_bytes(std::span<float>(&loss, 1)));
  values.loss = loss;
  values.logps.resize(static_cast<size_t>(per_token ? kRows : 2 * kPairs));
  backend.read(g.require_tensor("sequence_logps"), std::as_writable_bytes(std::span<float>(values.logps)));
  auto read_gradient = [&](const char* name, std::vector<float>& out) {
    const graph::TensorId gradient = plan.parameter_gradients.at(g.require_tensor(name));
    out.resize(static_cast<size_t>(g.tensor(gradient).type.numel()));
    if (g.tensor(gradient).type.dtype == DType::F32) {
      backend.read(gradient, std::as_writable_bytes(std::span<float>(out)));
      return;
    }
    std::vector<uint16_t> bits(out.size());
    backend.read(gradient, std::as_writable_bytes(std::span<uint16_t>(bits)));
    for (size_t i = 0; i < bits.size(); ++i) out[i] = bf16_to_float(bits[i]);
  };
  read_gradient("hidden", values.d_hidden);
  read_gradient("head", values.d_head);
  return values;
}

void expect_gradient_near(const std::vector<float>& cuda, const std::vector<float>& cpu, const std::string& what) {
  float largest = 0.0f;
  for (float value : cpu) largest = std::max(largest, std::abs(value));
  ASSERT_GT(largest, 0.0f) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_NEAR(cuda[i], cpu[i], kGradientTolerance * largest) << what << " [" << i << "]";
  }
}

TEST(PreferenceOpsCuda, TrainingStepMatchesTheCpu) {
  std::string reason;
  if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> hidden(kRows * kChannels), head(kVocab * kChannels);
  for (float& value : hidden) value = bf16_to_float(float_to_bf16(normal(rng)));
  for (float& value : head) value = bf16_to_float(float_to_bf16(normal(rng) * 0.2f));
  for (const std::string type : {"dpo", "ipo", "simpo", "orpo", "kto", "kto with a padding row", kGrpoPerToken}) {
    for (int64_t chunks : {1, 3}) {
      const std::string what = type + ", chunks " + std::to_string(chunks);
      const bool padding_row = type == "kto with a padding row";
      const std::string loss_type = padding_row ? "kto" : type;
      // Each graph built before it is compiled: the loss id is set by the build (argument order
      // is unspecified, so one call cannot build and pass it).
      graph::TensorId cpu_loss = graph::kNoTensor, cuda_loss = graph::kNoTensor;
      graph::Graph cpu_graph = preference_graph(DType::F32, loss_type, chunks, cpu_loss);
      graph::Graph cuda_graph = preference_graph(DType::BF16, loss_type, chunks, cuda_loss);
      const compiler::ExecutionPlan cpu_plan =
          compiler::compile_training(std::move(cpu_graph), cpu_loss, preference_registry());
      const compiler::ExecutionPlan cuda_plan =
          compiler::compile_training(std::move(cuda_graph), cuda_loss, preference_registry());
      runtime::CpuBackend cpu;
      cpu.load(cpu_plan, preference_registry());
      runtime::CudaBackend gpu;
      gpu.load(cuda_plan, preference_registry());
      const bool per_token = type == kGrpoPerToken;
      const StepValues expected = run_step(cpu, cpu_plan, false, hidden, head, padding_row, per_token);
      const StepValues actual = run_step(gpu, cuda_plan, true, hidden, head, padding_row, per_token);
      EXPECT_NEAR(actual.loss, expected.loss, kLossTolerance * std::max(1.0, std::abs(expected.loss))) << what;
      for (size_t s = 0; s < expected.logps.size(); ++s) {
        EXPECT_NEAR(actual.logps[s], expected.logps[s], kLossTolerance * std::abs(expected.logps[s])) << what << " logps " << s;
      }
      expect_gradient_near(actual.d_hidden, expected.d_hidden, what + " d_hidden");
      expect_gradient_near(actual.d_head, expected.d_head, what + " d_head");
    }
  }
}

}  // namespace
}  // namespace surogate
