// Evaluation on the validation split: a forward-only plan of the same decoder (plus the
// next-token accuracy op) on its own CPU backend, so evaluating never touches the training
// gradients or the training loader. Every evaluation visits every validation row once, in the
// same order, so eval numbers are comparable across steps and across resumed runs.
#pragma once

#include <memory>
#include <span>

#include "compiler/execution_plan.h"
#include "data/data_loader.h"
#include "io/model_config.h"
#include "models/lora.h"
#include "runtime/cpu_backend.h"
#include "train/batch_inputs.h"
#include "train/checkpoint_io.h"

namespace surogate::train {

struct EvalResult {
  double loss = 0.0;      // mean token cross-entropy
  double accuracy = 0.0;  // fraction of scored tokens predicted exactly (argmax)
  int64_t tokens = 0;     // scored tokens
};

class Evaluator {
public:
  Evaluator(const io::ModelConfig& config, const graph::OpRegistry& registry, int64_t batch, int64_t sequence,
            int64_t lmhead_chunks, std::shared_ptr<const data::TokenCache> cache, uint64_t seed, int32_t pad_id,
            const models::LoraSetup* lora = nullptr);

  // With `lora`, the graph carries the adapters (no dropout: evaluation is PEFT's eval mode).
  // Copies `weights` (the trainer's parameters, base and adapters, by name) in and evaluates the whole split.
  EvalResult run(std::span<const WeightView> weights);

private:
  compiler::ExecutionPlan plan_;
  runtime::CpuBackend backend_;
  data::DataLoader loader_;
  std::unique_ptr<BatchInputs> inputs_;
  graph::TensorId loss_ = graph::kNoTensor, correct_ = graph::kNoTensor;
};

}  // namespace surogate::train
