// Full fine-tuning's LM-head loss on the CUDA backend: the trainable-head rewrite
// (lm_head_loss_with_grads, compiler/loss_input_grad.h: d_hidden and d_weight written in the
// forward's pass over the logits, the backward only scale_by) against the plan compiled without
// it (lm_head_loss_backward recomputing the logits), on a tied (Qwen3) and an untied (Llama)
// decoder, in bf16 and fp16, with the rows in one chunk (the weight-gradient GEMM writes the 16-bit
// d_weight itself) and in three (a fp32 scratch accumulator, rounded at the end).
//
// Each CUDA plan against the fp32 CPU backend on the same weights: loss 1e-2 relative, every
// gradient 5e-2 of its tensor's largest entry (test_decoder_cuda.cpp's tolerances and reasons).
// Among the CUDA plans:
//  * rewrite vs none at the same chunking: the loss is the same bits (same forward kernels), and
//    the head / embedding gradient within 1e-2 of its largest entry. Both run the same GEMMs on
//    the same dlogits and scale_by multiplies by exactly 1, so the untied head's gradient is
//    expected bit for bit; the tied embedding adds the embedding backward's fp32 atomics, whose
//    order may flip a 16-bit rounding (2^-8 of an entry, 3.9e-3 of the largest) — 1e-2 bounds that.
//  * one chunk vs three (rewrite on): the head / embedding gradient within 1e-2 of its largest
//    entry. The direct GEMM rounds its fp32 sum over all rows to 16 bits once; three chunks sum
//    in another order into the fp32 accumulator and round once too (the logits GEMMs of other row
//    counts may also take other cuBLASLt algorithms): at most about one 16-bit rounding apart,
//    2^-8 ≈ 3.9e-3 of the largest entry in bf16. A wrong path (a chunk missing, overwritten
//    instead of accumulated, a missing scale) is off by order 1.
// fp16 scales the loss by 1024, as fp16 training's loss scale does, so the gradients of this small
// model stay clear of fp16's subnormals (test_fp16_cuda.cpp); the CPU reference gets the same scale.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "core/bfloat16.h"
#include "cuda/device_info.h"
#include "io/model_config.h"
#include "models/decoder_graph.h"
#include "models/model_spec.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "runtime/cuda_backend.h"
#include "runtime_cuda/random_16bit_weights.h"
#include "runtime_cuda/synthetic_config.h"
#include "runtime_cuda/two_document_rows.h"

namespace surogate {
namespace {

constexpr double kLossTolerance = 1e-2;
constexpr double kGradientTolerance = 5e-2;
constexpr double kHeadTolerance = 1e-2;

struct HeadModel {
  std::string name;
  std::string config_json;
  DType dtype = DType::BF16;
};
void PrintTo(const HeadModel& model, std::ostream* out) { *out << model.name; }  // gtest / ctest names

struct Batch {
  std::vector<int32_t> input_ids, position_ids, document_ids, targets;
  int64_t rows = 2, sequence = 96;
  float loss_scale = 0.0f;
};

// Two documents per row; the last token of each has no target.
Batch random_batch(const io::ModelConfig& config, std::mt19937& rng, float loss_multiplier) {
  Batch batch;
  append_two_document_rows(batch, config.vocab_size, batch.rows, batch.sequence, 41, 66, rng);
  batch.loss_scale = loss_multiplier / static_cast<float>(batch.rows * batch.sequence - 2 * batch.rows);
  return batch;
}

// max |actual − expected| / max |expected|; a non-finite value makes it infinite.
double scaled_max_error(std::span<const float> actual, std::span<const float> expected) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff = std::max(diff, std::abs(double(actual[i]) - double(expected[i])));
    if (!std::isfinite(actual[i])) diff = INFINITY;
    scale = std::max(scale, std::abs(double(expected[i])));
  }
  return diff / std::max(scale, 1e-30);
}

struct StepResult {
  float loss = 0.0f;
  std::vector<std::vector<float>> gradients;  // per parameter spec
};

class LmHeadGradsOnCuda : public ::testing::TestWithParam<HeadModel> {
protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::cuda_device_available(&reason)) GTEST_SKIP() << reason;
  }
};

TEST_P(LmHeadGradsOnCuda, RewrittenHeadGradientsMatchTheRecomputingBackward) {
  const HeadModel& model = GetParam();
  const bool fp16 = model.dtype == DType::F16;
  const std::filesystem::path dir = synthetic_config_dir("surogate_lm_head_grads_" + model.name);
  const io::ModelConfig config = load_synthetic_config(dir, model.config_json);
  std::filesystem::remove_all(dir);
  const graph::OpRegistry registry = ops::make_model_registry();
  const std::vector<models::ParameterSpec> specs = models::parameter_specs(config);
  const std::string head = config.tie_word_embeddings ? "embed.weight" : "lm_head.weight";
  const auto head_spec = std::find_if(specs.begin(), specs.end(), [&](const auto& spec) { return spec.name == head; });
  ASSERT_NE(head_spec, specs.end()) << head;
  const size_t head_index = static_cast<size_t>(head_spec - specs.begin());

  // Weights rounded to the 16-bit type once: bits for CUDA, their exact values for the CPU.
  auto from_bits = [&](uint16_t bits) { return fp16 ? f16_to_float(bits) : bf16_to_float(bits); };
  std::mt19937 rng(29);
  const Random16BitWeights weights = random_16bit_weights(specs, fp16, rng);
  const std::vector<std::vector<uint16_t>>& bits = weights.bits;
  const std::vector<std::vector<float>>& values = weights.values;
  const Batch batch = random_batch(config, rng, fp16 ? 1024.0f : 1.0f);

  auto step = [&](bool cuda, bool rewrite, int64_t chunks) {
    models::DecoderGraphOptions options{.batch = batch.rows, .sequence = batch.sequence, .lmhead_chunks = chunks};
    if (cuda) options.dtype = model.dtype;
    models::DecoderGraph decoder = models::build_decoder_graph(config, registry, options);
    compiler::CompileOptions compile;
    compile.loss_input_grad_in_forward = rewrite;
    compiler::ExecutionPlan plan = compiler::compile_training(std::move(decoder.graph), decoder.loss, registry, compile);
    const auto has_op = [&](const char* op) {
      return std::any_of(plan.graph.nodes.begin(), plan.graph.nodes.end(), [&](const graph::Node& n) { return n.op == op; });
    };
    EXPECT_EQ(has_op("lm_head_loss_with_grads"), rewrite);
    EXPECT_EQ(has_op("lm_head_loss_backward"), !rewrite);
    std::unique_ptr<runtime::Backend> backend;
    if (cuda) backend = std::make_unique<runtime::CudaBackend>();
    else backend = std::make_unique<runtime::CpuBackend>();
    backend->load(plan, registry);
    for (size_t i = 0; i < specs.size(); ++i) {
      if (cuda) backend->write(plan.tensor(specs[i].name), std::as_bytes(std::span<const uint16_t>(bits[i])));
      else backend->write(plan.tensor(specs[i].name), std::as_bytes(std::span<const float>(values[i])));
    }
    backend->write(plan.tensor("loss_scale"), std::as_bytes(std::span<const float>(&batch.loss_scale, 1)));
    backend->zero_gradients();
    backend->execute(std::vector<runtime::InputBinding>{
        {plan.tensor("input_ids"), std::as_bytes(std::span<const int32_t>(batch.input_ids))},
        {plan.tensor("position_ids"), std::as_bytes(std::span<const int32_t>(batch.position_ids))},
        {plan.tensor("document_ids"), std::as_bytes(std::span<const int32_t>(batch.document_ids))},
        {plan.tensor("targets"), std::as_bytes(std::span<const int32_t>(batch.targets))}});
    StepResult result;
    backend->read(plan.loss, std::as_writable_bytes(std::span<float>(&result.loss, 1)));
    for (const models::ParameterSpec& spec : specs) {
      const size_t count = static_cast<size_t>(graph::shape_numel(spec.shape));
      const graph::TensorId id = plan.parameter_gradients.at(plan.tensor(spec.name));
      std::vector<float> gradient(count);
      if (cuda) {
        std::vector<uint16_t> raw(count);
        backend->read(id, std::as_writable_bytes(std::span<uint16_t>(raw)));
        std::transform(raw.begin(), raw.end(), gradient.begin(), from_bits);
      } else {
        backend->read(id, std::as_writable_bytes(std::span<float>(gradient)));
      }
      result.gradients.push_back(std::move(gradient));
    }
    return result;
  };

  const StepResult cpu = step(false, true, 1);
  struct Variant {
    bool rewrite;
    int64_t chunks;
  };
  const Variant variants[] = {{false, 1}, {true, 1}, {false, 3}, {true, 3}};
  std::vector<StepResult> runs;
  for (const Variant& variant : variants) {
    SCOPED_TRACE(testing::Message() << model.name << " rewrite " << variant.rewrite << " chunks " << variant.chunks);
    runs.push_back(step(true, variant.rewrite, variant.chunks));
    const StepResult& run = runs.back();
    const double loss_error = std::abs(double(run.loss) - cpu.loss) / std::abs(double(cpu.loss));
    EXPECT_LT(loss_error, kLossTolerance);
    double worst = 0.0;
    for (size_t i = 0; i < specs.size(); ++i) {
      const double error = scaled_max_error(run.gradients[i], cpu.gradients[i]);
      worst = std::max(worst, error);
      EXPECT_LT(error, kGradientTolerance) << "gradient of " << specs[i].name;
    }
    std::printf("[ measured ] %s rewrite=%d chunks=%lld: loss rel %.2e vs cpu, worst gradient %.2e, head %.2e\n",
                model.name.c_str(), int(variant.rewrite), static_cast<long long>(variant.chunks), loss_error, worst,
                scaled_max_error(run.gradients[head_index], cpu.gradients[head_index]));
  }
  // runs: 0 none/1 chunk, 1 rewrite/1 chunk, 2 none/3 chunks, 3 rewrite/3 chunks.
  for (size_t chunked : {0u, 2u}) {
    const StepResult &reference = runs[chunked], &rewritten = runs[chunked + 1];
    EXPECT_EQ(std::memcmp(&rewritten.loss, &reference.loss, sizeof(float)), 0) << rewritten.loss << " vs " << reference.loss;
    const double error = scaled_max_error(rewritten.gradients[head_index], reference.gradients[head_index]);
    const bool same = rewritten.gradients[head_index] == reference.gradients[head_index];
    std::printf("[ measured ] %s chunks=%d: %s gradient, rewrite vs recompute %.2e%s\n", model.name.c_str(),
                chunked == 0 ? 1 : 3, head.c_str(), error, same ? " (same bits)" : "");
    EXPECT_LT(error, kHeadTolerance) << head << " with " << (chunked == 0 ? 1 : 3) << " chunks";
  }
  const double direct = scaled_max_error(runs[1].gradients[head_index], runs[3].gradients[head_index]);
  std::printf("[ measured ] %s: %s gradient, one chunk (direct) vs three (fp32 accumulator) %.2e\n",
              model.name.c_str(), head.c_str(), direct);
  EXPECT_LT(direct, kHeadTolerance) << head;
}

constexpr const char* kQwen3Tied = R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
  "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 512, "tie_word_embeddings": true,
  "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 4096, "hidden_act": "silu",
  "attention_bias": false})";
constexpr const char* kLlamaUntied = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2,
  "num_key_value_heads": 1, "head_dim": 64, "vocab_size": 384, "tie_word_embeddings": false,
  "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "max_position_embeddings": 4096, "hidden_act": "silu",
  "attention_bias": false})";

INSTANTIATE_TEST_SUITE_P(
    Heads, LmHeadGradsOnCuda,
    ::testing::Values(HeadModel{"qwen3_tied_bf16", kQwen3Tied, DType::BF16},
                      HeadModel{"llama_untied_bf16", kLlamaUntied, DType::BF16},
                      HeadModel{"qwen3_tied_fp16", kQwen3Tied, DType::F16},
                      HeadModel{"llama_untied_fp16", kLlamaUntied, DType::F16}),
    [](const ::testing::TestParamInfo<HeadModel>& info) { return info.param.name; });

}  // namespace
}  // namespace surogate
