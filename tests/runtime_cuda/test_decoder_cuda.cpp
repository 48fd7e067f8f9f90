// Whole decoder models on the CUDA backend (bf16 recipe) against the CPU backend (fp32), on the
// committed HF fixtures of scripts/make_hf_fixtures.py (tiny Llama / Mistral / Qwen2 / Qwen3:
// GQA, biases, tied embeddings, sliding window, llama3 / yarn RoPE, Qwen3 q/k-norm, packed
// documents). Both backends get the same weights: the fixture's, rounded to bf16 once, so the
// comparison measures the CUDA kernels and bf16 activations, not weight rounding.
//
// Tolerances (BF16 graph on CUDA vs F32 graph on CPU):
//   loss:       |cuda − cpu| / |cpu| < 1e-2
//   gradients:  max |cuda − cpu| / max |cpu| < 5e-2, per parameter tensor
// Why: every activation is rounded to bf16 (unit roundoff 2^-9 ≈ 2e-3) after each op — about a
// dozen roundings per layer forward and as many backward, plus bf16 gradient outputs and the
// bf16 sum of gradient contributions (residual stream, tied embedding). Independent rounding
// errors grow like √n·2e-3 ≈ 1e-2 along the chain, and gradients of small tensors (norm weights,
// biases summed over all tokens) are differences of such terms: 5e-2 of the tensor's largest
// entry bounds that with margin, while a wrong kernel (wrong sign, missing term, wrong head or
// document) gives errors of order 1. The fp32 parity with transformers is models_parity_tests.
// Also: a second execute after zero_gradients reproduces the loss exactly, and the plan with
// every recompute group on gives the same loss (recomputed kernels are the same kernels).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "core/bfloat16.h"
#include "cuda/device_info.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "models/decoder_graph.h"
#include "models/model_spec.h"
#include "models/weight_io.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "runtime/cuda_backend.h"

namespace surogate {
namespace {

constexpr double kLossTolerance = 1e-2;
constexpr double kGradientTolerance = 5e-2;

// SUROGATE_FIXTURES_DIR in the environment overrides the build tree's path (the GPU machine runs
// the binaries from another checkout path, scripts/gpu_check.sh sets it).
std::filesystem::path fixture_dir(const std::string& name) {
  const char* override_dir = std::getenv("SUROGATE_FIXTURES_DIR");
  return std::filesystem::path(override_dir && *override_dir ? override_dir : SUROGATE_FIXTURES_DIR) / name;
}

std::vector<int32_t> read_ints(const io::SafetensorsFile& file, const std::string& name) {
  const io::SafetensorsTensor& tensor = file.tensor(name);
  std::vector<int32_t> out(static_cast<size_t>(tensor.element_count()));
  std::memcpy(out.data(), tensor.bytes.data(), tensor.bytes.size());
  return out;
}

struct Batch {
  std::vector<int32_t> input_ids, position_ids, document_ids, targets;
  int64_t batch = 0, sequence = 0;
  float loss_scale = 0.0f;
};

Batch open_batch(const std::string& name) {
  io::SafetensorsFile expected = io::SafetensorsFile::open(fixture_dir(name) / "expected.safetensors");
  Batch batch{read_ints(expected, "input_ids"), read_ints(expected, "position_ids"), read_ints(expected, "document_ids"),
              read_ints(expected, "targets")};
  batch.batch = expected.tensor("input_ids").shape[0];
  batch.sequence = expected.tensor("input_ids").shape[1];
  int64_t scored = std::count_if(batch.targets.begin(), batch.targets.end(), [](int32_t t) { return t != -100; });
  batch.loss_scale = 1.0f / static_cast<float>(scored);
  return batch;
}

std::vector<runtime::InputBinding> bindings(const compiler::ExecutionPlan& plan, const Batch& batch) {
  return {{plan.tensor("input_ids"), std::as_bytes(std::span<const int32_t>(batch.input_ids))},
          {plan.tensor("position_ids"), std::as_bytes(std::span<const int32_t>(batch.position_ids))},
          {plan.tensor("document_ids"), std::as_bytes(std::span<const int32_t>(batch.document_ids))},
          {plan.tensor("targets"), std::as_bytes(std::span<const int32_t>(batch.targets))}};
}

// The fixture's weights rounded to bf16: bits for the CUDA plan, their exact fp32 values for the CPU.
struct Weights {
  std::vector<std::vector<uint16_t>> bf16;
  std::vector<std::vector<float>> f32;
};

Weights load_weights(const std::string& name, std::span<const models::ParameterSpec> specs) {
  Weights weights;
  weights.bf16.resize(specs.size());
  weights.f32.resize(specs.size());
  models::load_hf_weights(fixture_dir(name), specs, [&](const models::ParameterSpec& spec, const io::SafetensorsTensor& tensor) {
    size_t index = static_cast<size_t>(&spec - specs.data());
    std::vector<float> values = io::read_tensor_as_float32(tensor);
    for (float& value : values) {
      uint16_t bits = float_to_bf16(value);
      weights.bf16[index].push_back(bits);
      value = bf16_to_float(bits);
    }
    weights.f32[index] = std::move(values);
  });
  return weights;
}

double scaled_max_error(std::span<const float> actual, std::span<const float> expected) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff = std::max(diff, std::abs(double(actual[i]) - double(expected[i])));
    if (std::isnan(actual[i])) diff = INFINITY;
    scale = std::max(scale, std::abs(double(expected[i])));
  }
  return diff / std::max(scale, 1e-30);
}

class DecoderOnCuda : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  }
};

TEST_P(DecoderOnCuda, LossAndGradientsMatchCpu) {
  const std::string name = GetParam();
  const io::ModelConfig config = io::load_model_config(fixture_dir(name));
  const Batch batch = open_batch(name);
  const graph::OpRegistry registry = ops::make_model_registry();
  const std::vector<models::ParameterSpec> specs = models::parameter_specs(config);
  const Weights weights = load_weights(name, specs);

  // CPU, fp32.
  models::DecoderGraphOptions cpu_options{.batch = batch.batch, .sequence = batch.sequence, .lmhead_chunks = 3};
  models::DecoderGraph cpu_graph = models::build_decoder_graph(config, registry, cpu_options);
  compiler::ExecutionPlan cpu_plan = compiler::compile_training(std::move(cpu_graph.graph), cpu_graph.loss, registry);
  runtime::CpuBackend cpu;
  cpu.load(cpu_plan, registry);
  for (size_t i = 0; i < specs.size(); ++i) {
    cpu.write(cpu_plan.tensor(specs[i].name), std::as_bytes(std::span<const float>(weights.f32[i])));
  }
  cpu.write(cpu_plan.tensor("loss_scale"), std::as_bytes(std::span<const float>(&batch.loss_scale, 1)));
  cpu.zero_gradients();
  cpu.execute(bindings(cpu_plan, batch));
  float cpu_loss = 0.0f;
  cpu.read(cpu_plan.loss, std::as_writable_bytes(std::span<float>(&cpu_loss, 1)));

  // CUDA, bf16; loss once with no recompute and once with every group recomputed.
  for (bool recompute : {false, true}) {
    SCOPED_TRACE(recompute ? "recompute on" : "recompute off");
    models::DecoderGraphOptions options = cpu_options;
    options.dtype = DType::BF16;
    models::DecoderGraph graph = models::build_decoder_graph(config, registry, options);
    compiler::CompileOptions compile;
    if (recompute) compile.recompute = compiler::RecomputePolicy::all();
    compiler::ExecutionPlan plan = compiler::compile_training(std::move(graph.graph), graph.loss, registry, compile);
    runtime::CudaBackend backend;
    backend.load(plan, registry);
    for (size_t i = 0; i < specs.size(); ++i) {
      backend.write(plan.tensor(specs[i].name), std::as_bytes(std::span<const uint16_t>(weights.bf16[i])));
    }
    backend.write(plan.tensor("loss_scale"), std::as_bytes(std::span<const float>(&batch.loss_scale, 1)));
    backend.zero_gradients();
    backend.execute(bindings(plan, batch));
    float loss = 0.0f;
    backend.read(plan.loss, std::as_writable_bytes(std::span<float>(&loss, 1)));
    const double loss_error = std::abs(double(loss) - cpu_loss) / std::abs(double(cpu_loss));
    std::printf("[ measured ] %s recompute=%d: loss cuda %.6f cpu %.6f rel %.2e\n", name.c_str(), int(recompute), loss,
                cpu_loss, loss_error);
    EXPECT_LT(loss_error, kLossTolerance) << name;

    double worst = 0.0;
    std::string worst_name;
    for (const models::ParameterSpec& spec : specs) {
      const size_t count = static_cast<size_t>(graph::shape_numel(spec.shape));
      std::vector<float> expected(count);
      cpu.read(cpu_plan.parameter_gradients.at(cpu_plan.tensor(spec.name)), std::as_writable_bytes(std::span<float>(expected)));
      std::vector<uint16_t> bits(count);
      backend.read(plan.parameter_gradients.at(plan.tensor(spec.name)), std::as_writable_bytes(std::span<uint16_t>(bits)));
      std::vector<float> actual(count);
      std::transform(bits.begin(), bits.end(), actual.begin(), bf16_to_float);
      const double error = scaled_max_error(actual, expected);
      if (error > worst) worst = error, worst_name = spec.name;
      EXPECT_LT(error, kGradientTolerance) << name << ": gradient of " << spec.name;
    }
    std::printf("[ measured ] %s recompute=%d: worst gradient error %.2e (%s)\n", name.c_str(), int(recompute), worst,
                worst_name.c_str());

    // A second step after zero_gradients gives the same loss bit for bit (outputs fully rewritten).
    backend.zero_gradients();
    backend.execute(bindings(plan, batch));
    float again = 0.0f;
    backend.read(plan.loss, std::as_writable_bytes(std::span<float>(&again, 1)));
    EXPECT_EQ(again, loss) << name;
  }
}

// Evaluation graph (forward only, with the argmax accuracy head): the loss as in training and
// the count of correct predictions within 1 of the CPU's (a bf16 logit tie may flip one argmax).
TEST_P(DecoderOnCuda, ForwardWithAccuracyMatchesCpu) {
  const std::string name = GetParam();
  const io::ModelConfig config = io::load_model_config(fixture_dir(name));
  const Batch batch = open_batch(name);
  const graph::OpRegistry registry = ops::make_model_registry();
  const std::vector<models::ParameterSpec> specs = models::parameter_specs(config);
  const Weights weights = load_weights(name, specs);
  float results[2][2] = {};  // [cpu, cuda][loss, correct]
  for (int device = 0; device < 2; ++device) {
    models::DecoderGraphOptions options{.batch = batch.batch, .sequence = batch.sequence, .lmhead_chunks = 2,
                                        .with_accuracy = true};
    if (device == 1) options.dtype = DType::BF16;
    models::DecoderGraph graph = models::build_decoder_graph(config, registry, options);
    const graph::TensorId correct = graph.correct;
    compiler::ExecutionPlan plan = compiler::compile_forward(std::move(graph.graph), registry);
    std::unique_ptr<runtime::Backend> backend;
    if (device == 0) backend = std::make_unique<runtime::CpuBackend>();
    else backend = std::make_unique<runtime::CudaBackend>();
    backend->load(plan, registry);
    for (size_t i = 0; i < specs.size(); ++i) {
      if (device == 0) backend->write(plan.tensor(specs[i].name), std::as_bytes(std::span<const float>(weights.f32[i])));
      else backend->write(plan.tensor(specs[i].name), std::as_bytes(std::span<const uint16_t>(weights.bf16[i])));
    }
    backend->write(plan.tensor("loss_scale"), std::as_bytes(std::span<const float>(&batch.loss_scale, 1)));
    backend->execute(bindings(plan, batch));
    backend->read(plan.tensor("loss"), std::as_writable_bytes(std::span<float>(&results[device][0], 1)));
    backend->read(correct, std::as_writable_bytes(std::span<float>(&results[device][1], 1)));
  }
  std::printf("[ measured ] %s eval: loss cuda %.6f cpu %.6f, correct cuda %.0f cpu %.0f\n", name.c_str(), results[1][0],
              results[0][0], results[1][1], results[0][1]);
  EXPECT_LT(std::abs(results[1][0] - results[0][0]) / std::abs(results[0][0]), kLossTolerance) << name;
  EXPECT_LE(std::abs(results[1][1] - results[0][1]), 1.0f) << name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DecoderOnCuda,
                         ::testing::Values("llama_bias_untied", "llama_gqa_llama3", "llama_rope_parameters_yarn",
                                           "mistral_sliding", "qwen2_bias_tied", "qwen3_qknorm"));

// Runs without a GPU: a F32 decoder graph is refused by the CUDA model binders with the fix named.
// (Binding needs the device, so this only checks the message where one is present.)
TEST(DecoderOnCudaRefusal, Float32GraphNamesTheDtypeOption) {
  std::string reason;
  if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  const std::string name = "qwen3_qknorm";
  const io::ModelConfig config = io::load_model_config(fixture_dir(name));
  const graph::OpRegistry registry = ops::make_model_registry();
  models::DecoderGraph graph = models::build_decoder_graph(config, registry, {.batch = 1, .sequence = 8});
  compiler::ExecutionPlan plan = compiler::compile_training(std::move(graph.graph), graph.loss, registry);
  runtime::CudaBackend backend;
  try {
    backend.load(plan, registry);
    FAIL() << "a F32 decoder plan was accepted by the CUDA backend";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("DecoderGraphOptions::dtype"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace surogate
