// LoRA on the CUDA backend (bf16 recipe) against the CPU backend (fp32).
//
//  * Dropout kernel: the mask is the CPU op's function of (seed, stream, element index), so the
//    CUDA fp32 output equals ops::dropout_forward bit for bit, and the bf16 output equals the CPU
//    fp32 output of the same (bf16-exact) input rounded to bf16 — at sizes that take the 16-byte
//    path and the scalar one, seeds with the sign bit set, p = 0, 0.1, 0.5.
//  * scale in bf16: bf16(float(x) · float(factor)), exactly.
//  * A tiny Qwen3 decoder (head_dim 64: flash attention and the narrow-row q/k norm) with LoRA on
//    every linear projection, without and with dropout (p = 0.1): the BF16 graph on CudaBackend
//    against the F32 graph on CpuBackend from the same weights (rounded to bf16 once), loss and
//    every adapter gradient. Tolerances as in test_decoder_cuda.cpp and for the same reasons (every
//    activation rounded to bf16 along the chain): loss 1e-2 relative, gradients 5e-2 of each
//    tensor's largest entry. With dropout on, a mask differing from the CPU's gives lora_A
//    gradient errors of order 1 (dA is a product with the dropped input), far over 5e-2.
//  * The frozen head's input gradient computed in the forward (lm_head_loss_with_input_grad, the
//    default) gives the same loss and adapter gradients, bit for bit, as the plan compiled without
//    that rewrite (lm_head_loss_backward recomputing the logits): d_loss is exactly 1.
//  * A second micro-batch without zeroing doubles the adapter gradients (within one bf16
//    rounding): the fused linear_backward_weight_accumulate adds into the gradient.
//  * With the low-rank products of q/k/v and gate/up batched (concat / split on the GPU), and with
//    each B product's gradients from the fused low-rank kernel, loss and adapter gradients meet the
//    same CPU tolerances.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "core/bfloat16.h"
#include "cuda/device_buffer.h"
#include "cuda/device_info.h"
#include "cuda/kernels/dropout.h"
#include "cuda/kernels/elementwise_16bit.h"
#include "io/model_config.h"
#include "models/decoder_graph.h"
#include "models/lora.h"
#include "models/model_spec.h"
#include "ops/defs/register_ops.h"
#include "ops/dropout.h"
#include "runtime/cpu_backend.h"
#include "runtime/cuda_backend.h"
#include "runtime_cuda/two_document_rows.h"

namespace surogate {
namespace {

constexpr double kLossTolerance = 1e-2;
constexpr double kGradientTolerance = 5e-2;

bool skip_without_gpu() {
  std::string reason;
  if (cuda::cuda_device_available(&reason)) return false;
  std::printf("skipped: %s\n", reason.c_str());
  return true;
}

std::vector<float> random_bf16_exact(size_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) value = bf16_to_float(float_to_bf16(normal(rng)));
  return values;
}

TEST(LoraCudaKernels, DropoutMaskMatchesCpuBitForBit) {
  if (skip_without_gpu()) GTEST_SKIP();
  std::mt19937 rng(3);
  for (int64_t count : {1, 7, 333, 4096, 4099, 65536}) {
    for (double p : {0.0, 0.1, 0.5}) {
      // kDropoutOffSeed: dropout switched off (evaluation through a training plan): x itself.
      for (int32_t seed : {0, 12345, -7, kDropoutOffSeed}) {
        const double applied = seed == kDropoutOffSeed ? 0.0 : p;
        const uint64_t stream_id = static_cast<uint64_t>(count % 5 + 2);
        SCOPED_TRACE(testing::Message() << "count " << count << " p " << p << " seed " << seed);
        const std::vector<float> x = random_bf16_exact(static_cast<size_t>(count), rng);
        std::vector<float> expected(x.size());
        ops::dropout_forward(x.data(), count, applied, static_cast<uint64_t>(static_cast<uint32_t>(seed)), stream_id,
                             expected.data());

        cuda::DeviceBuffer<int32_t> seed_buffer = cuda::to_device(std::vector<int32_t>{seed});
        cuda::DeviceBuffer<float> x32 = cuda::to_device(x);
        cuda::DeviceBuffer<float> out32(x.size());
        out32.poison();
        cuda::dropout_f32(x32.data(), seed_buffer.data(), stream_id, p, out32.data(), count, nullptr);
        const std::vector<float> actual32 = out32.download();
        EXPECT_EQ(std::memcmp(actual32.data(), expected.data(), x.size() * sizeof(float)), 0) << "fp32 dropout";

        std::vector<uint16_t> bits(x.size());
        std::transform(x.begin(), x.end(), bits.begin(), float_to_bf16);
        cuda::DeviceBuffer<uint16_t> x16 = cuda::to_device(bits);
        cuda::DeviceBuffer<uint16_t> out16(x.size());
        out16.poison();
        cuda::dropout_16bit(reinterpret_cast<const __nv_bfloat16*>(x16.data()), seed_buffer.data(),
                                            stream_id, p, reinterpret_cast<__nv_bfloat16*>(out16.data()), count, nullptr);
        const std::vector<uint16_t> actual16 = out16.download();
        int64_t mismatches = 0, dropped = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          mismatches += actual16[i] != float_to_bf16(expected[i]);
          dropped += expected[i] == 0.0f;
        }
        EXPECT_EQ(mismatches, 0) << "bf16 dropout";

        // dropout_add: addend + dropout(x), fp32 sum, one bf16 rounding (the CPU float op, rounded).
        const std::vector<float> addend = random_bf16_exact(x.size(), rng);
        std::vector<float> expected_sum(x.size());
        ops::dropout_forward(x.data(), count, applied, static_cast<uint64_t>(static_cast<uint32_t>(seed)), stream_id,
                             expected_sum.data(), addend.data());
        cuda::DeviceBuffer<float> addend32 = cuda::to_device(addend);
        out32.poison();
        cuda::dropout_f32(x32.data(), seed_buffer.data(), stream_id, p, out32.data(), count, nullptr,
                                           addend32.data());
        const std::vector<float> sum32 = out32.download();
        EXPECT_EQ(std::memcmp(sum32.data(), expected_sum.data(), x.size() * sizeof(float)), 0) << "fp32 dropout_add";
        std::vector<uint16_t> addend_bits(x.size());
        std::transform(addend.begin(), addend.end(), addend_bits.begin(), float_to_bf16);
        cuda::DeviceBuffer<uint16_t> addend16 = cuda::to_device(addend_bits);
        out16.poison();
        cuda::dropout_16bit(reinterpret_cast<const __nv_bfloat16*>(x16.data()), seed_buffer.data(),
                                            stream_id, p, reinterpret_cast<__nv_bfloat16*>(out16.data()), count, nullptr,
                                            reinterpret_cast<const __nv_bfloat16*>(addend16.data()));
        const std::vector<uint16_t> sum16 = out16.download();
        int64_t sum_mismatches = 0;
        for (size_t i = 0; i < x.size(); ++i) sum_mismatches += sum16[i] != float_to_bf16(expected_sum[i]);
        EXPECT_EQ(sum_mismatches, 0) << "bf16 dropout_add";
        if (applied == 0.0) EXPECT_EQ(dropped, 0);
        if (applied == 0.5 && count >= 4096) EXPECT_NEAR(double(dropped) / double(count), 0.5, 0.05);
      }
    }
  }
}

TEST(LoraCudaKernels, ScaleBf16IsOneRoundingOfTheFloatProduct) {
  if (skip_without_gpu()) GTEST_SKIP();
  std::mt19937 rng(5);
  for (int64_t count : {1, 9, 4096, 4101}) {
    const std::vector<float> x = random_bf16_exact(static_cast<size_t>(count), rng);
    std::vector<uint16_t> bits(x.size());
    std::transform(x.begin(), x.end(), bits.begin(), float_to_bf16);
    cuda::DeviceBuffer<uint16_t> in = cuda::to_device(bits), out(x.size());
    out.poison();
    const float factor = static_cast<float>(32.0 / 16.0 * 0.7);
    cuda::scale_16bit(reinterpret_cast<const __nv_bfloat16*>(in.data()), factor,
                                      reinterpret_cast<__nv_bfloat16*>(out.data()), count, nullptr);
    const std::vector<uint16_t> actual = out.download();
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(actual[i], float_to_bf16(x[i] * factor)) << "element " << i;
  }
}

constexpr const char* kQwen3Config = R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
  "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 512, "tie_word_embeddings": true,
  "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 4096, "hidden_act": "silu",
  "attention_bias": false})";

struct Inputs {
  std::vector<int32_t> input_ids, position_ids, document_ids, targets;
  int32_t seed = 20261122;
  float loss_scale = 0.0f;
};

class LoraDecoderOnCuda : public ::testing::TestWithParam<double> {
protected:
  void SetUp() override {
    if (skip_without_gpu()) GTEST_SKIP();
  }
};

TEST_P(LoraDecoderOnCuda, LossAndAdapterGradientsMatchCpu) {
  const double dropout = GetParam();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "surogate_cuda_lora_qwen3";
  std::filesystem::create_directories(dir);
  {
    std::FILE* file = std::fopen((dir / "config.json").c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs(kQwen3Config, file);
    std::fclose(file);
  }
  const io::ModelConfig config = io::load_model_config(dir);
  std::filesystem::remove_all(dir);
  const graph::OpRegistry registry = ops::make_model_registry();
  models::LoraOptions lora{.rank = 8, .alpha = 16.0, .dropout = dropout,
                           .target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}};
  const std::vector<models::LoraAdapter> adapters = models::lora_adapters(config, lora);
  ASSERT_EQ(adapters.size(), 14u);

  // Same values on both backends: bf16-exact fp32 for the CPU, their bits for CUDA.
  std::vector<models::ParameterSpec> specs = models::parameter_specs(config);
  for (const models::LoraAdapter& adapter : adapters) specs.push_back(adapter.a), specs.push_back(adapter.b);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<std::vector<float>> values;
  for (const models::ParameterSpec& spec : specs) {
    std::vector<float> tensor(static_cast<size_t>(graph::shape_numel(spec.shape)));
    for (float& value : tensor) value = bf16_to_float(float_to_bf16(spec.shape.size() == 1 ? 1.0f + normal(rng) : normal(rng)));
    values.push_back(std::move(tensor));
  }
  const int64_t rows = 2, sequence = 96;
  Inputs inputs;
  append_two_document_rows(inputs, config.vocab_size, rows, sequence, 41, 66, rng);
  inputs.loss_scale = 1.0f / static_cast<float>(rows * sequence - 4);

  // run 0: CPU; 1: CUDA; 2: CUDA without the frozen-head loss rewrite; 3: CUDA with the low-rank
  // products of q/k/v and gate/up batched (LoraOptions::batch_shared_inputs; with dropout too);
  // 4: CUDA with each B product's gradients from the fused kernel (fuse_low_rank_backward).
  float losses[5] = {};
  std::vector<std::vector<float>> gradients[5];
  for (int device = 0; device < 5; ++device) {
    models::DecoderGraphOptions options{.batch = rows, .sequence = sequence, .lmhead_chunks = 2};
    if (device >= 1) options.dtype = DType::BF16;
    models::DecoderGraph decoder = models::build_decoder_graph(config, registry, options);
    models::LoraOptions run_lora = lora;
    run_lora.batch_shared_inputs = device == 3;
    run_lora.fuse_low_rank_backward = device == 4;
    graph::Graph forward = models::apply_lora(decoder.graph, registry, adapters, run_lora, true);
    for (const models::LoraAdapter& adapter : adapters) {
      ASSERT_EQ(forward.tensor(forward.require_tensor(adapter.a.name)).type.dtype, options.dtype) << adapter.a.name;
    }
    compiler::CompileOptions compile_options;
    compile_options.loss_input_grad_in_forward = device != 2;
    compiler::ExecutionPlan plan = compiler::compile_training(std::move(forward), decoder.loss, registry, compile_options);
    ASSERT_EQ(plan.parameter_gradients.size(), 2 * adapters.size()) << "only the adapters are trainable";
    const auto has_op = [&](const char* op) {
      return std::any_of(plan.graph.nodes.begin(), plan.graph.nodes.end(), [&](const graph::Node& n) { return n.op == op; });
    };
    EXPECT_EQ(has_op("lm_head_loss_with_input_grad"), device != 2);
    EXPECT_EQ(has_op("lm_head_loss_backward"), device == 2);
    EXPECT_EQ(has_op("concat"), device == 3);
    EXPECT_EQ(has_op("linear_backward_low_rank_accumulate"), device == 4);
    std::unique_ptr<runtime::Backend> backend;
    if (device == 0) backend = std::make_unique<runtime::CpuBackend>();
    else backend = std::make_unique<runtime::CudaBackend>();
    backend->load(plan, registry);
    for (size_t i = 0; i < specs.size(); ++i) {
      if (device == 0) {
        backend->write(plan.tensor(specs[i].name), std::as_bytes(std::span<const float>(values[i])));
      } else {
        std::vector<uint16_t> bits(values[i].size());
        std::transform(values[i].begin(), values[i].end(), bits.begin(), float_to_bf16);
        backend->write(plan.tensor(specs[i].name), std::as_bytes(std::span<const uint16_t>(bits)));
      }
    }
    backend->write(plan.tensor("loss_scale"), std::as_bytes(std::span<const float>(&inputs.loss_scale, 1)));
    std::vector<runtime::InputBinding> bindings{
        {plan.tensor("input_ids"), std::as_bytes(std::span<const int32_t>(inputs.input_ids))},
        {plan.tensor("position_ids"), std::as_bytes(std::span<const int32_t>(inputs.position_ids))},
        {plan.tensor("document_ids"), std::as_bytes(std::span<const int32_t>(inputs.document_ids))},
        {plan.tensor("targets"), std::as_bytes(std::span<const int32_t>(inputs.targets))}};
    if (dropout > 0.0) {
      bindings.push_back({plan.tensor(models::kDropoutSeed), std::as_bytes(std::span<const int32_t>(&inputs.seed, 1))});
    }
    backend->zero_gradients();
    backend->execute(bindings);
    backend->read(plan.loss, std::as_writable_bytes(std::span<float>(&losses[device], 1)));
    auto read_gradients = [&] {
      std::vector<std::vector<float>> result;
      for (const models::LoraAdapter& adapter : adapters) {
        for (const models::ParameterSpec* spec : {&adapter.a, &adapter.b}) {
          const size_t count = static_cast<size_t>(graph::shape_numel(spec->shape));
          std::vector<float> gradient(count);
          const graph::TensorId id = plan.parameter_gradients.at(plan.tensor(spec->name));
          if (device == 0) {
            backend->read(id, std::as_writable_bytes(std::span<float>(gradient)));
          } else {
            std::vector<uint16_t> bits(count);
            backend->read(id, std::as_writable_bytes(std::span<uint16_t>(bits)));
            std::transform(bits.begin(), bits.end(), gradient.begin(), bf16_to_float);
          }
          result.push_back(std::move(gradient));
        }
      }
      return result;
    };
    gradients[device] = read_gradients();
    if (device == 1) {
      // A second micro-batch without zeroing accumulates: on CUDA the adapter gradients are
      // written by linear_backward_weight_accumulate (beta = 1), so each is bf16(g + product) with
      // bf16(product) = g: within 3 half-ulps (3 · 2^-9 of 2g) of 2g, plus 1e-3 of the tensor's
      // largest entry for the dQ atomics' order, which may differ between the two runs.
      // Overwriting instead of accumulating would be off by g itself.
      backend->execute(bindings);
      const std::vector<std::vector<float>> twice = read_gradients();
      for (size_t t = 0; t < twice.size(); ++t) {
        float largest = 0.0f;
        for (float value : gradients[1][t]) largest = std::max(largest, std::abs(value));
        for (size_t i = 0; i < twice[t].size(); ++i) {
          const float expected = 2.0f * gradients[1][t][i];
          ASSERT_LE(std::abs(twice[t][i] - expected), std::abs(expected) * 0x1p-7f + 1e-3f * largest)
              << "adapter gradient " << t << "[" << i << "] after two micro-batches";
        }
      }
    }
  }
  const double loss_error = std::abs(double(losses[1]) - losses[0]) / std::abs(double(losses[0]));
  std::printf("[ measured ] lora dropout=%.1f: loss cuda %.6f cpu %.6f rel %.2e\n", dropout, losses[1], losses[0],
              loss_error);
  EXPECT_LT(loss_error, kLossTolerance);
  double worst = 0.0;
  std::string worst_name;
  size_t index = 0;
  for (const models::LoraAdapter& adapter : adapters) {
    for (const models::ParameterSpec* spec : {&adapter.a, &adapter.b}) {
      const std::vector<float>& expected = gradients[0][index];
      const std::vector<float>& actual = gradients[1][index++];
      double diff = 0.0, scale = 0.0;
      for (size_t i = 0; i < expected.size(); ++i) {
        diff = std::max(diff, std::isnan(actual[i]) ? INFINITY : std::abs(double(actual[i]) - expected[i]));
        scale = std::max(scale, std::abs(double(expected[i])));
      }
      ASSERT_GT(scale, 0.0) << spec->name << ": a zero CPU gradient would make the comparison empty";
      const double error = diff / scale;
      if (error > worst) worst = error, worst_name = spec->name;
      EXPECT_LT(error, kGradientTolerance) << "gradient of " << spec->name;
    }
  }
  std::printf("[ measured ] lora dropout=%.1f: worst adapter gradient error %.2e (%s)\n", dropout, worst,
              worst_name.c_str());
  EXPECT_EQ(std::memcmp(&losses[1], &losses[2], sizeof(float)), 0) << losses[1] << " vs " << losses[2];
  // Batched low-rank products (run 3) and the fused B backward (run 4): the same comparison with
  // the CPU, the same tolerances.
  for (int run : {3, 4}) {
    const char* what = run == 3 ? "batched" : "fused low-rank backward";
    EXPECT_LT(std::abs(double(losses[run]) - losses[0]) / std::abs(double(losses[0])), kLossTolerance) << what;
    for (size_t t = 0; t < gradients[0].size(); ++t) {
      double diff = 0.0, scale = 0.0;
      for (size_t i = 0; i < gradients[0][t].size(); ++i) {
        const double actual = gradients[run][t][i];
        diff = std::max(diff, std::isnan(actual) ? INFINITY : std::abs(actual - gradients[0][t][i]));
        scale = std::max(scale, std::abs(double(gradients[0][t][i])));
      }
      EXPECT_LT(diff / scale, kGradientTolerance) << what << ", adapter gradient " << t;
    }
  }
  for (size_t i = 0; i < gradients[1].size(); ++i) {
    EXPECT_EQ(gradients[1][i], gradients[2][i]) << "adapter gradient " << i << " differs without the frozen-head rewrite";
  }
}

INSTANTIATE_TEST_SUITE_P(Dropout, LoraDecoderOnCuda, ::testing::Values(0.0, 0.1),
                         [](const ::testing::TestParamInfo<double>& info) {
                           return info.param == 0.0 ? std::string("NoDropout") : std::string("Dropout0p1");
                         });

}  // namespace
}  // namespace surogate
