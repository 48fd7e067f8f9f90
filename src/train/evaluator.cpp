// Validation loss and accuracy; see evaluator.h. The CPU evaluator lives here.
#include "train/evaluator.h"

#include <algorithm>
#include <cstring>

#include "models/decoder_graph.h"
#include "models/fp16_emulation.h"
#include "models/model_definition.h"
#include "runtime/cpu_backend.h"
#include "train/fp8_weight_copies.h"
#include "train/vision_stage.h"

namespace surogate::train {

graph::Graph evaluation_graph(const EvaluatorSetup& setup, DType dtype) {
  models::DecoderGraphOptions options{setup.batch, setup.sequence, setup.lmhead_chunks, true};
  options.dtype = dtype;
  options.fused_rope = setup.fused_rope;
  models::DecoderGraph decoder =
      setup.vision != nullptr
          ? setup.vision->build_graph(*setup.registry, options, setup.vision->eval_patches())
          : models::build_model_graph(*setup.config, *setup.registry, options, setup.definition);
  graph::Graph graph = std::move(decoder.graph);
  if (setup.lora) {
    graph = models::apply_lora(graph, *setup.registry, setup.lora->adapters, setup.lora->options, false);
    if (setup.qlora) graph = models::apply_qlora_quantization(graph, *setup.registry, *setup.qlora);
  }
  if (setup.fp8) {
    models::Fp8Options options = *setup.fp8;
    options.amax_history = 0;  // each tensor at its own scale: evaluation leaves the training state alone
    graph = models::apply_fp8_recipe(graph, *setup.registry, options);
  }
  if (setup.fp16 && dtype == DType::F32) {
    graph = models::apply_fp16_emulation(graph, models::sixteen_bit_tensors(evaluation_graph(setup, DType::BF16)));
  }
  return graph;
}

std::unique_ptr<BatchInputs> evaluation_inputs(const EvaluatorSetup& setup, const compiler::ExecutionPlan& plan) {
  auto inputs = std::make_unique<BatchInputs>(plan);
  if (setup.vision != nullptr) inputs->extend(setup.vision->batch_inputs(plan));
  return inputs;
}

EvalResult evaluate_split(data::DataLoader& loader, BatchInputs& inputs, const EvaluateBatch& evaluate_batch) {
  loader.seek({0, 0});
  double loss_sum = 0.0, correct = 0.0;
  int64_t tokens = 0;
  for (uint64_t index = 0; index < loader.batches_per_epoch(); ++index) {
    data::PackedBatch batch = loader.next();
    auto [batch_loss, batch_correct] = evaluate_batch(inputs.bind(batch, 1.0f));
    loss_sum += batch_loss;
    correct += batch_correct;
    tokens += static_cast<int64_t>(std::count_if(inputs.targets().begin(), inputs.targets().end(),
                                                 [](int32_t target) { return target >= 0; }));
  }
  EvalResult result;
  result.tokens = tokens;
  if (tokens > 0) {
    result.loss = loss_sum / static_cast<double>(tokens);
    result.accuracy = correct / static_cast<double>(tokens);
  }
  return result;
}

namespace {

class CpuEvaluator final : public Evaluator {
public:
  CpuEvaluator(const EvaluatorSetup& setup, std::span<const WeightView> weights,
               std::span<const StoredQuantizedWeight> quantized)
      : weights_(weights), loader_(setup.cache, setup.cache->eval(), setup.batch, setup.seed, setup.pad_id) {
    plan_ = compiler::compile_forward(evaluation_graph(setup, DType::F32), *setup.registry);
    loss_ = plan_.tensor("loss");
    correct_ = plan_.tensor("correct");
    backend_.load(plan_, *setup.registry);
    for (const StoredQuantizedWeight& stored : quantized) write_quantized(backend_, plan_, stored.weight, stored.pieces);
    fp8_copies_ = fp8_weight_copies(plan_);
    inputs_ = evaluation_inputs(setup, plan_);
  }

  EvalResult run() override {
    for (const WeightView& weight : weights_) {
      std::span<float> destination = backend_.view<float>(plan_.tensor(weight.name));
      std::copy(weight.values.begin(), weight.values.end(), destination.begin());
    }
    refresh_fp8_weight_copies(backend_, fp8_copies_);
    return evaluate_split(loader_, *inputs_, [this](std::span<const runtime::InputBinding> bindings) {
      backend_.execute(bindings);
      return std::pair<double, double>(backend_.view<float>(loss_)[0], backend_.view<float>(correct_)[0]);
    });
  }

private:
  std::span<const WeightView> weights_;
  compiler::ExecutionPlan plan_;
  runtime::CpuBackend backend_;
  data::DataLoader loader_;
  std::unique_ptr<BatchInputs> inputs_;
  std::vector<Fp8WeightCopy> fp8_copies_;  // fp8_hybrid full fine-tuning: made from the copied weights
  graph::TensorId loss_ = graph::kNoTensor, correct_ = graph::kNoTensor;
};

}  // namespace

std::unique_ptr<Evaluator> make_cpu_evaluator(const EvaluatorSetup& setup, std::span<const WeightView> weights,
                                              std::span<const StoredQuantizedWeight> quantized) {
  return std::make_unique<CpuEvaluator>(setup, weights, quantized);
}

}  // namespace surogate::train
