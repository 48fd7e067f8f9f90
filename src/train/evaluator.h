// Evaluation on the validation split: a forward-only plan of the same decoder (plus the
// next-token accuracy op) on its own backend, so evaluating never touches the training
// gradients or the training loader. Every evaluation visits every validation row once, in the
// same order, so eval numbers are comparable across steps and across resumed runs.
//
// The training device makes its evaluator (TrainingDevice::make_evaluator): on the CPU an fp32
// plan on a CpuBackend that copies the device's weights in (make_cpu_evaluator); on the GPU a bf16
// plan on a CudaBackend that reads the training backend's bf16 weights in place, with no copy
// (train/device/cuda_evaluator.cpp).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <utility>

#include "compiler/execution_plan.h"
#include "data/data_loader.h"
#include "graph/op_registry.h"
#include "io/model_config.h"
#include "models/lora.h"
#include "models/model_definition.h"
#include "runtime/backend.h"
#include "train/batch_inputs.h"
#include "train/checkpoint_io.h"
#include "models/fp8_recipe.h"
#include "models/qlora.h"
#include "train/quantized_weights.h"

namespace surogate::train {

class VisionStage;  // train/vision_stage.h: a vision-language folder's graph and image inputs

struct EvalResult {
  double loss = 0.0;      // mean token cross-entropy
  double accuracy = 0.0;  // fraction of scored tokens predicted exactly (argmax)
  int64_t tokens = 0;     // scored tokens
};

struct EvaluatorSetup {
  const io::ModelConfig* config = nullptr;
  const graph::OpRegistry* registry = nullptr;
  int64_t batch = 1, sequence = 1, lmhead_chunks = 1;
  std::shared_ptr<const data::TokenCache> cache;
  uint64_t seed = 0;
  int32_t pad_id = 0;
  const models::LoraSetup* lora = nullptr;  // the adapters, evaluated without dropout (PEFT's eval mode)
  const models::QloraOptions* qlora = nullptr;  // QLoRA: the frozen projections quantized (models/qlora.h)
  const models::Fp8Options* fp8 = nullptr;  // fp8_hybrid (models/fp8_recipe.h), run with current scaling
  bool fp16 = false;  // torch_dtype float16: the F32 graph rounds what fp16 holds (models/fp16_emulation.h)
  bool fused_rope = false;                  // use_fused_rope (models::DecoderGraphOptions::fused_rope)
  models::ModelDefinition definition;       // model_definition: the IR file the graph comes from
  // A vision-language folder: the graph is its model at the validation split's patch count, and
  // each batch binds its images through the stage (as training does). Null for a text model.
  const VisionStage* vision = nullptr;
};

class Evaluator {
public:
  virtual ~Evaluator() = default;
  // Evaluates the whole split with the training device's current weights.
  virtual EvalResult run() = 0;
};

// The forward graph both evaluators compile: the decoder (or the vision-language model) with its
// accuracy output, in `dtype`, with the LoRA adapters (no dropout) when the setup has them.
graph::Graph evaluation_graph(const EvaluatorSetup& setup, DType dtype);

// One batch: execute the bindings, return {summed loss, correct predictions}.
using EvaluateBatch = std::function<std::pair<double, double>(std::span<const runtime::InputBinding>)>;

// Every batch of the split from the start, through `evaluate_batch`, summed into the result.
EvalResult evaluate_split(data::DataLoader& loader, BatchInputs& inputs, const EvaluateBatch& evaluate_batch);

// The evaluator's batch inputs for `plan`: a vision-language setup's binds the images too.
std::unique_ptr<BatchInputs> evaluation_inputs(const EvaluatorSetup& setup, const compiler::ExecutionPlan& plan);

// `weights` are the CPU training device's fp32 parameters (its backend's own buffers).
// `quantized`: the QLoRA base, written into the evaluator's backend once.
std::unique_ptr<Evaluator> make_cpu_evaluator(const EvaluatorSetup& setup, std::span<const WeightView> weights,
                                              std::span<const StoredQuantizedWeight> quantized = {});

}  // namespace surogate::train
