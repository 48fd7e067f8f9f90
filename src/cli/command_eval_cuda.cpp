// The CUDA side of `surogate eval --device cuda` (command_eval.cpp calls it): the built-in decoder
// graph in BF16 (the CUDA backend's bf16 recipe; ops/defs/statistic_dtype.h keeps the loss F32),
// forward only, the model folder's weights rounded to bf16 once, every batch's loss summed.
// Without the CUDA backend in the build it is a UserError naming the option.
#include <filesystem>
#include <span>
#include <vector>

#include "core/error.h"
#include "graph/op_registry.h"
#include "io/model_config.h"
#include "models/model_eval.h"
#include "models/token_batches.h"

#if SUROGATE_WITH_CUDA
#include "compiler/execution_plan.h"
#include "core/bfloat16.h"
#include "io/safetensors.h"
#include "models/decoder_graph.h"
#include "models/model_spec.h"
#include "models/weight_io.h"
#include "runtime/cuda_backend.h"
#endif

namespace surogate::cli {

models::EvalResult evaluate_on_cuda(const graph::OpRegistry& registry, const io::ModelConfig& config,
                                    const std::filesystem::path& model_dir,
                                    const std::vector<models::TokenBatch>& batches, int64_t batch_size,
                                    int64_t sequence_length, int64_t lmhead_chunks) {
#if SUROGATE_WITH_CUDA
  models::DecoderGraphOptions options{.batch = batch_size, .sequence = sequence_length, .lmhead_chunks = lmhead_chunks};
  options.dtype = DType::BF16;
  models::DecoderGraph decoder = models::build_decoder_graph(config, registry, options);
  const graph::TensorId loss = decoder.loss;
  compiler::ExecutionPlan plan = compiler::compile_forward(std::move(decoder.graph), registry);
  runtime::CudaBackend backend;
  backend.load(plan, registry);
  models::load_hf_weights(model_dir, models::parameter_specs(config),
                          [&](const models::ParameterSpec& spec, const io::SafetensorsTensor& tensor) {
                            std::vector<float> values = io::read_tensor_as_float32(tensor);
                            std::vector<uint16_t> bits(values.size());
                            for (size_t i = 0; i < values.size(); ++i) bits[i] = float_to_bf16(values[i]);
                            backend.write(plan.tensor(spec.name), std::as_bytes(std::span<const uint16_t>(bits)));
                          });
  const float unit_scale = 1.0f;  // the loss output is then the plain sum
  backend.write(plan.tensor(models::kLossScale), std::as_bytes(std::span<const float>(&unit_scale, 1)));
  models::EvalResult result;
  for (const models::TokenBatch& batch : batches) {
    std::vector<runtime::InputBinding> bindings{
        {plan.tensor(models::kInputIds), std::as_bytes(std::span<const int32_t>(batch.input_ids))},
        {plan.tensor(models::kPositionIds), std::as_bytes(std::span<const int32_t>(batch.position_ids))},
        {plan.tensor(models::kDocumentIds), std::as_bytes(std::span<const int32_t>(batch.document_ids))},
        {plan.tensor(models::kTargets), std::as_bytes(std::span<const int32_t>(batch.targets))}};
    backend.execute(bindings);
    float loss_sum = 0.0f;
    backend.read(loss, std::as_writable_bytes(std::span<float>(&loss_sum, 1)));
    result.loss_sum += loss_sum;
    result.tokens += batch.scored_tokens();
  }
  return result;
#else
  (void)registry, (void)config, (void)model_dir, (void)batches, (void)batch_size, (void)sequence_length,
      (void)lmhead_chunks;
  fail_user("--device cuda: this surogate was built without the CUDA backend (SUROGATE_CUDA=OFF); use --device cpu");
#endif
}

}  // namespace surogate::cli
