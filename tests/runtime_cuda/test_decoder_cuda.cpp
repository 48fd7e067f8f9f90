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
#include <random>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "compiler/execution_plan.h"
#include "core/bfloat16.h"
#include "cuda/device_info.h"
#include "io/model_config.h"
#include "runtime_cuda/synthetic_config.h"
#include "io/safetensors.h"
#include "models/decoder_graph.h"
#include "models/model_eval.h"
#include "models/model_spec.h"
#include "models/token_batches.h"
#include "models/weight_io.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "runtime/cuda_backend.h"
#include "runtime_cuda/two_document_rows.h"

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

  // CUDA, bf16; loss once with no recompute, once with every group recomputed, once with the
  // attention backward over slices of one batch row each (attn_bwd_chunks = batch), and once with
  // RoPE computed in the kernel from the positions (use_fused_rope).
  struct Variant {
    bool recompute;
    int64_t chunks;
    bool fused_rope;
  };
  for (const Variant variant : {Variant{false, 1, false}, Variant{true, 1, false}, Variant{false, batch.batch, false},
                                Variant{false, 1, true}}) {
    const bool recompute = variant.recompute;
    SCOPED_TRACE(recompute ? "recompute on" : "recompute off");
    SCOPED_TRACE(fmt::format("attention backward in {} chunks, fused rope {}", variant.chunks, variant.fused_rope));
    models::DecoderGraphOptions options = cpu_options;
    options.dtype = DType::BF16;
    options.attention_backward_chunks = variant.chunks;
    options.fused_rope = variant.fused_rope;
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

// Model-sized head dims (the fixtures' head_dim 8 takes the plain attention kernel and the
// generic rmsnorm): synthetic Qwen3 (q/k-norm) and Llama configs with head_dim 64 and 128 run the
// flash attention kernels and the narrow-row norm path, random weights (std 0.05), two packed
// documents per row. Same comparison and tolerances as above, recompute off.
struct SyntheticModel {
  std::string name, config_json;
};

class SyntheticDecoderOnCuda : public ::testing::TestWithParam<SyntheticModel> {
protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  }
};

TEST_P(SyntheticDecoderOnCuda, LossAndGradientsMatchCpu) {
  const SyntheticModel& model = GetParam();
  const std::filesystem::path dir = synthetic_config_dir("surogate_cuda_" + model.name);
  const io::ModelConfig config = load_synthetic_config(dir, model.config_json);
  const graph::OpRegistry registry = ops::make_model_registry();
  const std::vector<models::ParameterSpec> specs = models::parameter_specs(config);
  Weights weights;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (const models::ParameterSpec& spec : specs) {
    const size_t count = static_cast<size_t>(graph::shape_numel(spec.shape));
    std::vector<uint16_t> bits(count);
    std::vector<float> values(count);
    for (size_t i = 0; i < count; ++i) {
      bits[i] = float_to_bf16(spec.shape.size() == 1 ? 1.0f + normal(rng) : normal(rng));
      values[i] = bf16_to_float(bits[i]);
    }
    weights.bf16.push_back(std::move(bits));
    weights.f32.push_back(std::move(values));
  }
  Batch batch;
  batch.batch = 2;
  batch.sequence = 96;
  append_two_document_rows(batch, config.vocab_size, batch.batch, batch.sequence, 37, 70, rng);
  batch.loss_scale = 1.0f / static_cast<float>(batch.batch * batch.sequence - 4);

  float losses[2] = {};
  std::vector<std::vector<float>> gradients[2];
  for (int device = 0; device < 2; ++device) {
    models::DecoderGraphOptions options{.batch = batch.batch, .sequence = batch.sequence, .lmhead_chunks = 2};
    if (device == 1) options.dtype = DType::BF16;
    models::DecoderGraph graph = models::build_decoder_graph(config, registry, options);
    compiler::ExecutionPlan plan = compiler::compile_training(std::move(graph.graph), graph.loss, registry);
    std::unique_ptr<runtime::Backend> backend;
    if (device == 0) backend = std::make_unique<runtime::CpuBackend>();
    else backend = std::make_unique<runtime::CudaBackend>();
    backend->load(plan, registry);
    for (size_t i = 0; i < specs.size(); ++i) {
      if (device == 0) backend->write(plan.tensor(specs[i].name), std::as_bytes(std::span<const float>(weights.f32[i])));
      else backend->write(plan.tensor(specs[i].name), std::as_bytes(std::span<const uint16_t>(weights.bf16[i])));
    }
    backend->write(plan.tensor("loss_scale"), std::as_bytes(std::span<const float>(&batch.loss_scale, 1)));
    backend->zero_gradients();
    backend->execute(bindings(plan, batch));
    backend->read(plan.loss, std::as_writable_bytes(std::span<float>(&losses[device], 1)));
    for (const models::ParameterSpec& spec : specs) {
      const size_t count = static_cast<size_t>(graph::shape_numel(spec.shape));
      std::vector<float> values(count);
      const graph::TensorId gradient = plan.parameter_gradients.at(plan.tensor(spec.name));
      if (device == 0) {
        backend->read(gradient, std::as_writable_bytes(std::span<float>(values)));
      } else {
        std::vector<uint16_t> bits(count);
        backend->read(gradient, std::as_writable_bytes(std::span<uint16_t>(bits)));
        std::transform(bits.begin(), bits.end(), values.begin(), bf16_to_float);
      }
      gradients[device].push_back(std::move(values));
    }
  }
  const double loss_error = std::abs(double(losses[1]) - losses[0]) / std::abs(double(losses[0]));
  std::printf("[ measured ] %s: loss cuda %.6f cpu %.6f rel %.2e\n", model.name.c_str(), losses[1], losses[0], loss_error);
  EXPECT_LT(loss_error, kLossTolerance);
  double worst = 0.0;
  std::string worst_name;
  for (size_t i = 0; i < specs.size(); ++i) {
    const double error = scaled_max_error(gradients[1][i], gradients[0][i]);
    if (error > worst) worst = error, worst_name = specs[i].name;
    EXPECT_LT(error, kGradientTolerance) << model.name << ": gradient of " << specs[i].name;
  }
  std::printf("[ measured ] %s: worst gradient error %.2e (%s)\n", model.name.c_str(), worst, worst_name.c_str());
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    HeadDims, SyntheticDecoderOnCuda,
    ::testing::Values(
        SyntheticModel{"qwen3_d64", R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 128,
          "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 64, "vocab_size": 512, "tie_word_embeddings": true, "rms_norm_eps": 1e-6,
          "rope_theta": 1000000.0, "max_position_embeddings": 4096, "hidden_act": "silu", "attention_bias": false})"},
        SyntheticModel{"llama_d128", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
          "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
          "head_dim": 128, "vocab_size": 384, "tie_word_embeddings": false, "rms_norm_eps": 1e-5,
          "rope_theta": 500000.0, "max_position_embeddings": 4096, "hidden_act": "silu", "attention_bias": false})"},
        SyntheticModel{"mistral_d32_window", R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral",
          "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 256, "tie_word_embeddings": false,
          "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 4096, "hidden_act": "silu",
          "sliding_window": 24})"}),
    [](const ::testing::TestParamInfo<SyntheticModel>& info) { return info.param.name; });

}  // namespace
}  // namespace surogate

namespace surogate::cli {
models::EvalResult evaluate_on_cuda(const graph::OpRegistry& registry, const io::ModelConfig& config,
                                    const std::filesystem::path& model_dir,
                                    const std::vector<models::TokenBatch>& batches, int64_t batch_size,
                                    int64_t sequence_length, int64_t lmhead_chunks);
}  // namespace surogate::cli

namespace surogate {
namespace {

// `surogate eval --device cuda` (cli/command_eval_cuda.cpp, compiled into this test) against the
// CPU evaluator on the fixture's model: sequences of unequal lengths packed two per row, the
// summed loss within the loss tolerance and the same scored-token count.
TEST(EvalOnCuda, MatchesCpuEvaluation) {
  std::string reason;
  if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  for (const std::string name : {"qwen3_qknorm", "mistral_sliding"}) {
    const io::ModelConfig config = io::load_model_config(fixture_dir(name));
    const graph::OpRegistry registry = ops::make_model_registry();
    std::mt19937 rng(11);
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config.vocab_size - 1));
    std::vector<models::TokenSequence> sequences;
    for (int length : {9, 14, 5, 16, 11, 3, 7}) {
      models::TokenSequence sequence;
      for (int i = 0; i < length; ++i) sequence.input_ids.push_back(token(rng));
      sequence.labels = sequence.input_ids;
      if (length > 4) sequence.labels[1] = -100;  // a masked prompt token
      sequences.push_back(std::move(sequence));
    }
    const int64_t batch_size = 2, sequence_length = 16;
    std::vector<models::TokenBatch> batches = models::pack_token_batches(sequences, batch_size, sequence_length, "test");
    models::DecoderGraph forward = models::build_decoder_graph(config, registry, {.batch = batch_size, .sequence = sequence_length});
    models::EvalResult cpu = models::evaluate_on_cpu(registry, std::move(forward.graph), config, fixture_dir(name), batches);
    models::EvalResult gpu = cli::evaluate_on_cuda(registry, config, fixture_dir(name), batches, batch_size, sequence_length, 1);
    std::printf("[ measured ] %s eval --device cuda: loss sum %.5f (cpu %.5f), tokens %lld (cpu %lld)\n", name.c_str(),
                gpu.loss_sum, cpu.loss_sum, static_cast<long long>(gpu.tokens), static_cast<long long>(cpu.tokens));
    EXPECT_EQ(gpu.tokens, cpu.tokens) << name;
    EXPECT_LT(std::abs(gpu.loss_sum - cpu.loss_sum) / std::abs(cpu.loss_sum), kLossTolerance) << name;
  }
}

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
