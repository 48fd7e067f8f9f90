// The training step's graph and execution plan for the device the run trains on: the decoder
// forward graph (bf16 on the CUDA backend, fp32 on the CPU) with the LoRA rewrite when `lora`,
// compiled with the recompute the options allow and the device's memory requires
// (compiler/recompute_choice.h; apply_recommended_values allows every group). A plan fits when
// its predicted peak (train/device/memory_budget.h: the plan, its trainable state, the LM head's
// workspace, the evaluator, the CUDA context) plus a margin is at most what the device offers:
// the memory free on GPU 0, available on the host, or given (`--dry-run --gpu-memory`).
// The trainer and the dry run's memory prediction (train/memory_prediction.h) both build here.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "compiler/recompute_choice.h"
#include "config/config.h"
#include "distributed/communicator.h"
#include "distributed/parallel_layout.h"
#include "graph/op_registry.h"
#include "io/model_config.h"
#include "models/fp8_recipe.h"
#include "models/model_definition.h"
#include "models/lora.h"
#include "models/qlora.h"
#include "train/device/backend_selection.h"
#include "train/device/memory_budget.h"
#include "train/pipeline_plan.h"

namespace surogate::train {

class VisionStage;  // train/vision_stage.h: a vision-language folder's graph

// The registry training plans are compiled against: the model ops and sequence parallelism's
// exchange ops (distributed/sequence_exchange_ops.h), bound to `sequence_group` — null for
// planning; each rank of a sequence group binds its backend from one made with its communicator.
graph::OpRegistry make_training_registry(distributed::Communicator* sequence_group = nullptr);

// The LoRA adapters and options of the configuration (lora_rank, lora_alpha, lora_dropout,
// lora_target_modules), with the CUDA backend's faster graph forms on (models/lora.h).
// Out-of-range values are UserErrors naming where they were set (`sources`). A vision-language
// model (`vision`): the target modules may name the tower's when it trains, whose adapters follow
// the text model's, and every adapter carries its PEFT key (VisionStage::name_adapters).
models::LoraSetup lora_setup(const config::Lora& lora, const ConfigSources& sources, const io::ModelConfig& model,
                             TrainingBackend backend, const VisionStage* vision = nullptr);

// QLoRA: the format and layout of the frozen base: NF4 under qlora_bnb (qlora_bnb_block_size,
// qlora_bnb_double_quant), FP8 blocks under qlora_fp8 (qlora_block_size), NVFP4 under qlora_fp4
// (qlora_four_over_six); nullopt otherwise.
std::optional<models::QloraOptions> qlora_options(const config::Quant& quant);

// recipe fp8_hybrid: which projections run in FP8 (skip_quant_first_layers / _last_layers),
// fp8_amax_history and the backward format (gradient_dtype fp8_e4m3; E5M2 otherwise); nullopt
// for the other recipes.
std::optional<models::Fp8Options> fp8_options(const Config& config, const io::ModelConfig& model);

// Where the model's graph comes from: the `model_definition` JSON IR file, or (unset) the
// architecture's built-in builder (models/model_definition.h).
models::ModelDefinition model_definition(const config::Model& model, const ConfigSources& sources);

struct TrainingForward {
  graph::Graph graph;
  graph::TensorId loss = graph::kNoTensor;
};

// The forward graph of one micro-batch [batch, sequence] as the backend trains it (`training`:
// with the LoRA dropout, and with sequence_parallel_size N > 1 as each rank of a sequence group
// runs it, on sequence / N tokens (distributed/sequence_parallel_graph.h); false: as the evaluator
// runs it), with the quantized base under qlora_bnb / qlora_fp8 / qlora_fp4.
// Training graphs of MoE models whose config.json sets output_router_logits add the router
// load-balancing loss weighted for `data_parallel_ranks` × gradient_accumulation_steps micro-batches
// per optimizer step (models/decoder_graph.h). `vision`: a vision-language folder's stage, whose
// graph replaces the decoder's (null: the text model's), at its training or evaluation patch count.
TrainingForward build_training_forward(const Config& config, const io::ModelConfig& model,
                                       const graph::OpRegistry& registry, const models::LoraSetup* lora,
                                       TrainingBackend backend, int64_t batch, int64_t sequence,
                                       bool training = true, int64_t data_parallel_ranks = 1,
                                       const VisionStage* vision = nullptr);

// The recompute groups the configuration enables (recompute_* after the implications).
compiler::RecomputePolicy recompute_policy(const config::Recompute& recompute);

// What the device offers and what it holds beside the training plan (memory_budget.h).
struct DeviceMemory {
  std::string name;            // for messages: "GPU 0 (NVIDIA H100 ...)", "a GPU of 24 GiB", "host"
  size_t offered_bytes = 0;    // free now (or the size given); 0 = unknown, every plan fits
  size_t total_bytes = 0;      // the device's size (for the margin)
  int visible_gpus = 0;        // what `gpus: 0` means (0 with --gpu-memory: one GPU is predicted)
};
// GPU `gpu` (this process's first; 0 unless a launcher placed it) on the CUDA backend, the host's
// available memory on the CPU backend, or a GPU of `gpu_memory_bytes` when given (the dry run's
// --gpu-memory).
DeviceMemory device_memory(TrainingBackend backend, const MachineOffer& machine,
                           std::optional<size_t> gpu_memory_bytes = std::nullopt, int gpu = 0);

struct TrainingPlan {
  // The training step's plan; with pipeline_parallel_size > 1 the whole model's forward plan
  // instead (its inputs and weights are the run's; it is never loaded), and `pipeline` the stages'.
  compiler::ExecutionPlan plan;
  std::shared_ptr<const PipelinePlan> pipeline;
  compiler::RecomputeChoice recompute;
  MemoryEstimate memory;            // what the run will hold on the device (pipeline: the largest stage's)
  DeviceMemory device;
  size_t margin_bytes = 0;          // kept free beyond the prediction
  bool fits() const { return fits_in(memory.peak()); }
  bool fits_in(size_t peak) const { return device.offered_bytes == 0 || peak + margin_bytes <= device.offered_bytes; }
  std::string message;              // the line the trainer prints
};

// The training step's plan for micro-batches [batch, sequence] on `device`: the forward graph
// (build_training_forward), the recompute the options allow and the device's memory requires
// (or exactly `forced_recompute`, tests only: TrainerOptions::recompute), with offload_residual's
// host copies when set; with pipeline_parallel_size > 1, each stage's (train/pipeline_plan.h),
// judged stage by stage. `layout`: the run's (the trainer's, which knows this process's place
// among the processes); null: the layout of one process from the configuration (the dry run).
// `vision`: as for build_training_forward. `attention_span`: the training rows' (data/packing.h),
// which the recompute choice weighs re-running attention by; 0 (the dry run, which reads no data):
// documents as long as the rows.
TrainingPlan plan_training(const Config& config, const io::ModelConfig& model, const graph::OpRegistry& registry,
                           const models::LoraSetup* lora, TrainingBackend backend, int64_t batch, int64_t sequence,
                           const DeviceMemory& device,
                           std::optional<compiler::RecomputePolicy> forced_recompute = std::nullopt,
                           const distributed::ParallelLayout* layout = nullptr, const VisionStage* vision = nullptr,
                           int64_t attention_span = 0);

}  // namespace surogate::train
