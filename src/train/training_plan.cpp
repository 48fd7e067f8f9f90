// The training plan under the device's memory budget; see training_plan.h.
#include "train/training_plan.h"

#include "train/device/quantized_base_shards.h"

#include "data/loss_scale.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/strings.h"
#include "config/config_rules.h"
#include "core/system_info.h"
#include "cuda/device_info.h"
#include "distributed/parallel_layout.h"
#include "distributed/sequence_exchange_ops.h"
#include "distributed/sequence_parallel_graph.h"
#include "models/decoder_graph.h"
#include "models/fp16_emulation.h"
#include "models/fp8_fusion.h"
#include "ops/defs/register_ops.h"
#include "train/device/memory_budget.h"
#include "train/device/sharded_gradients.h"
#include "train/device/weight_shards.h"
#include "train/lora_targets.h"
#include "train/vision_stage.h"
#include "train/objective/grpo_rollout_model.h"
#include "train/objective/training_objective.h"

namespace surogate::train {

graph::OpRegistry make_training_registry(distributed::Communicator* sequence_group) {
  graph::OpRegistry registry = ops::make_model_registry();
  distributed::register_sequence_exchange_ops(registry, sequence_group);
  return registry;
}

models::LoraSetup lora_setup(const config::Lora& lora, const ConfigSources& sources, const io::ModelConfig& model,
                             TrainingBackend backend, const VisionStage* vision) {
  models::LoraSetup setup;
  setup.options.rank = lora.lora_rank;
  setup.options.alpha = static_cast<double>(lora.lora_alpha);
  setup.options.dropout = lora.lora_dropout;
  const std::vector<std::string> text_modules = models::lora_module_names(model);
  std::vector<std::string> modules = text_modules;
  for (const std::string& module : vision ? vision->tower_lora_modules() : std::vector<std::string>{}) {
    if (std::find(modules.begin(), modules.end(), module) == modules.end()) modules.push_back(module);
  }
  setup.options.target_modules = resolve_lora_targets(lora.lora_target_modules, modules);
  if (lora.lora_rank <= 0) fail_user("{}: lora_rank must be positive, got {}", sources.of("lora_rank"), lora.lora_rank);
  if (!(lora.lora_dropout >= 0.0 && lora.lora_dropout < 1.0)) {
    fail_user("{}: lora_dropout must be in [0, 1), got {}", sources.of("lora_dropout"), lora.lora_dropout);
  }
  models::LoraOptions text = setup.options;  // the text model's adapters: its own module names only
  std::erase_if(text.target_modules, [&](const std::string& module) {
    return std::find(text_modules.begin(), text_modules.end(), module) == text_modules.end();
  });
  setup.adapters = models::lora_adapters(model, text);
  if (vision != nullptr) {
    vision->add_tower_adapters(setup);
    vision->name_adapters(setup);
  }
  if (backend == TrainingBackend::Cuda) {
    // The bf16 graph's faster LoRA forms (models/lora.h), measured on the H100 (bench/results/HISTORY.md).
    setup.options.batch_shared_inputs = true;
    setup.options.fuse_low_rank_backward = true;
  }
  return setup;
}

std::optional<models::QloraOptions> qlora_options(const config::Quant& quant) {
  if (quant.qlora_fp8) return models::QloraOptions{models::WeightFormat::Fp8Block, quant.qlora_block_size, false};
  if (quant.qlora_fp4) {
    return models::QloraOptions{models::WeightFormat::Nvfp4, quant::kNvfp4Block, false, quant.qlora_four_over_six};
  }
  if (!quant.qlora_bnb) return std::nullopt;
  return models::QloraOptions{models::WeightFormat::Nf4, quant.qlora_bnb_block_size, quant.qlora_bnb_double_quant};
}

std::optional<models::Fp8Options> fp8_options(const Config& config, const io::ModelConfig& model) {
  if (config.precision.recipe != Recipe::Fp8Hybrid) return std::nullopt;
  models::Fp8Options options;
  options.layers = model.num_hidden_layers;
  options.skip_first_layers = config.precision.skip_quant_first_layers;
  options.skip_last_layers = config.precision.skip_quant_last_layers;
  options.amax_history = config.precision.fp8_amax_history;
  if (config.precision.gradient_dtype == GradientDtype::Fp8E4M3) options.gradient_format = quant::Fp8Format::E4M3;
  options.trained_weights = !config.lora.enabled;  // LoRA's trainable weights are the adapters
  options.fuse_attention = config.parallel.sequence_parallel_size <= 1;  // the exchange reorders o_proj's input
  return options;
}

models::ModelDefinition model_definition(const config::Model& model, const ConfigSources& sources) {
  if (!model.model_definition) return {};
  models::ModelDefinition definition{
      *model.model_definition,
      fmt::format("{}: model_definition '{}'", sources.of("model_definition"), *model.model_definition)};
  definition.model_dir = model.name_or_path;
  return definition;
}

TrainingForward build_training_forward(const Config& config, const io::ModelConfig& model,
                                       const graph::OpRegistry& registry, const models::LoraSetup* lora,
                                       TrainingBackend backend, int64_t batch, int64_t sequence,
                                       bool training, int64_t data_parallel_ranks, const VisionStage* vision) {
  // The CUDA backend runs the bf16 recipe: parameters and activations in bf16; fp16 training
  // (torch_dtype: float16) the same graph with F16 for every 16-bit tensor.
  models::DecoderGraphOptions options{batch, sequence, config.kernels.lmhead_chunks, false};
  options.attention_backward_chunks = config.kernels.attn_bwd_chunks;
  if (backend == TrainingBackend::Cuda) options.dtype = fp16_training(config) ? DType::F16 : DType::BF16;
  options.fused_rope = config.kernels.use_fused_rope;
  const auto loss_scale = data::parse_loss_scale(config.data.loss_scale);
  // surogate grpo weighs each completion token by its advantage (train/objective/grpo_window.h).
  options.token_weights = training && ((loss_scale && data::loss_scale_has_weights(*loss_scale)) || config.grpo.enabled);
  if (training) {
    options.router_aux_loss_micro_batches =
        std::max<int64_t>(1, config.schedule.gradient_accumulation_steps) * std::max<int64_t>(1, data_parallel_ranks);
  }
  models::DecoderGraph decoder =
      vision != nullptr ? vision->build_graph(registry, options, training ? vision->plan_patches() : vision->eval_patches())
                        : models::build_model_graph(model, registry, options, model_definition(config.model, config.sources));
  TrainingForward forward{std::move(decoder.graph), decoder.loss};
  // A training mode's loss in place of the token cross-entropy (train/objective/: surogate dpo).
  if (const auto objective = make_training_objective(config); objective && training) {
    ObjectiveGraph rewritten = objective->rewrite_loss(std::move(forward.graph), forward.loss, registry, batch, sequence);
    forward = {std::move(rewritten.graph), rewritten.loss};
  }
  // LoRA: the same graph with adapters on the targeted projections and the base frozen.
  if (lora != nullptr) {
    forward.graph = models::apply_lora(forward.graph, registry, lora->adapters, lora->options, training);
    if (const auto qlora = qlora_options(config.quant)) {
      forward.graph = models::apply_qlora_quantization(forward.graph, registry, *qlora);
    }
  }
  if (auto fp8 = fp8_options(config, model)) {
    if (!training) fp8->amax_history = 0;  // evaluation: each tensor at its own scale, no state
    forward.graph = models::apply_fp8_recipe(forward.graph, registry, *fp8);
  }
  if (training && config.parallel.sequence_parallel_size > 1) {
    forward.graph =
        distributed::apply_sequence_parallel(forward.graph, registry, config.parallel.sequence_parallel_size);
  }
  // fp16 on the CPU backend: rounded to fp16 wherever the GPU graph (the bf16 twin, same names)
  // holds 16-bit values (models/fp16_emulation.h).
  if (backend == TrainingBackend::Cpu && fp16_training(config)) {
    const TrainingForward twin = build_training_forward(config, model, registry, lora, TrainingBackend::Cuda, batch,
                                                        sequence, training, data_parallel_ranks, vision);
    forward.graph = models::apply_fp16_emulation(forward.graph, models::sixteen_bit_tensors(twin.graph));
  }
  return forward;
}

compiler::RecomputePolicy recompute_policy(const config::Recompute& recompute) {
  compiler::RecomputePolicy policy;
  policy.rmsnorm = recompute.recompute_rmsnorm;
  policy.qkv = recompute.recompute_qkv;
  policy.att = recompute.recompute_att;
  policy.swiglu = recompute.recompute_swiglu;
  policy.ffn = recompute.recompute_ffn;
  policy.block = recompute.recompute_block;
  return policy;
}

DeviceMemory device_memory(TrainingBackend backend, const MachineOffer& machine, std::optional<size_t> gpu_memory_bytes,
                           int gpu) {
  if (gpu_memory_bytes) {
    return {fmt::format("a GPU of {} (--gpu-memory)", format_memory_size(*gpu_memory_bytes)), *gpu_memory_bytes,
            *gpu_memory_bytes, machine.visible_gpus};
  }
  if (backend == TrainingBackend::Cuda) {
    return {fmt::format("GPU {} ({}, memory free now)", gpu, machine.gpu_name), cuda::gpu_free_bytes(gpu),
            machine.gpu_total_bytes, machine.visible_gpus};
  }
  const HostInfo host = query_host_info();
  return {"the host (CPU backend, memory available now)", host.memory_available_bytes, host.memory_total_bytes};
}

namespace {

// The evaluator's own backend (forward only, no dropout, the whole sequence on GPU 0): its arena
// and LM-head scratch. Under ZeRO-3 a GPU's evaluator gathers the weights layer by layer too (its
// own gather buffers); CPU ranks keep host copies of every weight, which their evaluator reads.
void add_evaluation_memory(const Config& config, const io::ModelConfig& model, const graph::OpRegistry& registry,
                           const models::LoraSetup* lora, TrainingBackend backend, int64_t batch, int64_t sequence,
                           const VisionStage* vision, MemoryEstimate& memory) {
  const TrainingForward evaluation =
      build_training_forward(config, model, registry, lora, backend, batch, sequence, false, 1, vision);
  const compiler::ExecutionPlan evaluation_plan = compiler::compile_forward(evaluation.graph, registry);
  memory.evaluation_arena = evaluation_plan.memory.arena_bytes;
  memory.evaluation_scratch = lm_head_workspace_bytes(evaluation_plan);
  bool gathering = false;
  if (memory.shard_weights && backend == TrainingBackend::Cuda) {
    memory.evaluation_other += evaluation_gathering(evaluation_plan).region_bytes;
    gathering = true;
  }
  // Its quantized base too, from a host image, unless the training GPUs keep it whole.
  if ((memory.shard_weights || config.offload.offload_quants) && backend == TrainingBackend::Cuda &&
      quantized_base_keeping(config.offload) != QuantizedBaseKeeping::Whole) {
    memory.evaluation_other += quantized_base_memory(evaluation_plan, QuantizedBaseKeeping::Offloaded, 1).gathered;
    gathering = true;
  }
  // A GPU's evaluator that reads the weights in place also borrows the training's arena and
  // scratch (train/device/cuda_evaluator.h); a pipeline's stages gather theirs.
  memory.evaluation_shares_training_memory =
      backend == TrainingBackend::Cuda && !gathering && config.parallel.pipeline_parallel_size <= 1;
  if (memory.shard_weights && backend == TrainingBackend::Cpu) {
    for (graph::TensorId id : shardable_weights(evaluation_plan)) {
      memory.weight_copies += evaluation_plan.graph.tensor(id).type.size_bytes();
    }
  }
}

}  // namespace

TrainingPlan plan_training(const Config& config, const io::ModelConfig& model, const graph::OpRegistry& registry,
                           const models::LoraSetup* lora, TrainingBackend backend, int64_t batch, int64_t sequence,
                           const DeviceMemory& device, std::optional<compiler::RecomputePolicy> forced_recompute,
                           const distributed::ParallelLayout* run_layout, const VisionStage* vision,
                           int64_t attention_span) {
  if (backend == TrainingBackend::Cuda) {
    check_fp16_cuda_model(config, model, vision != nullptr);  // before any weight loads
  }
  TrainingPlan result;
  result.device = device;
  result.margin_bytes = device_margin_bytes(device.total_bytes);
  MemoryEstimate& memory = result.memory;
  const distributed::ParallelLayout layout = run_layout != nullptr                ? *run_layout
                                             : backend == TrainingBackend::Cuda ? distributed::gpu_parallel_layout(config, device.visible_gpus)
                                                                                : distributed::cpu_parallel_layout(config);
  // CPU ranks: every rank thread of this process holds its own backend.
  if (backend == TrainingBackend::Cpu) memory.ranks = layout.local_ranks;
  if (backend == TrainingBackend::Cuda) memory.gpus = layout.world_size;
  // The optimizer state is shared out among the ranks that hold the same parameters.
  const int optimizer_shards = backend == TrainingBackend::Cuda ? layout.gradient_group_size() : 1;
  // ZeRO-3 shards the weights over several ranks (one rank has nothing to shard).
  memory.shard_weights = layout.shard_weights && layout.several_ranks();
  const int weight_shards = memory.shard_weights ? layout.gradient_group_size() : 1;
  // ZeRO-2/3 shrink each rank's gradient accumulators to its shard and the bucket staging.
  GradientSharding gradient_sharding;
  if (layout.shard_gradients && layout.several_ranks()) {
    gradient_sharding.ranks = layout.gradient_group_size();
    gradient_sharding.staging_slots =
        backend == TrainingBackend::Cuda ? kCudaGradientStagingSlots : kCpuGradientStagingSlots;
  }
  memory.context = backend == TrainingBackend::Cuda ? kCudaContextBytes : 0;
  // A pipeline stage's two plans exchange over two sequence groups, one per stream (cuda_sequence_groups.h).
  if (backend == TrainingBackend::Cuda && layout.sequence_size > 1) {
    memory.collectives = kSequenceExchangeBufferBytes * (layout.pipeline_size > 1 ? 2 : 1);
  }
  // No validation data, no evaluator: nothing of it is allocated.
  if (evaluates(config)) add_evaluation_memory(config, model, registry, lora, backend, batch, sequence, vision, memory);
  if (config.grpo.enabled) {  // the rollout model beside the trainer's weights, planned with them
    const generate::KvCacheMemory rollout = predict_grpo_rollout_memory(
        config, model, lora != nullptr ? &lora->options : nullptr, backend == TrainingBackend::Cuda);
    memory.rollout_caches = rollout.caches;
    memory.rollout_activations = rollout.activations;
    const GrpoReferenceMemory reference = predict_grpo_reference_memory(
        config, model, lora != nullptr ? &lora->options : nullptr, backend == TrainingBackend::Cuda);
    memory.reference_weights = reference.weights;
    memory.reference_model = reference.model.total();
  }

  // The parts a recompute choice changes are the plan's own; the rest is fixed above.
  auto estimate = [&](const compiler::ExecutionPlan& plan) {
    MemoryEstimate candidate = memory;
    candidate.plan = plan_memory(plan, {config.precision, config.optimizer, config.offload}, optimizer_shards,
                                 weight_shards, gradient_sharding);
    // offload_residual's host region is the device's own memory on the CPU backend.
    if (backend == TrainingBackend::Cpu) candidate.plan.activations += std::exchange(candidate.plan.host_residuals, 0);
    // offload_quants' image is one per process, in the CPU ranks' own memory.
    if (backend == TrainingBackend::Cpu) candidate.weight_copies += std::exchange(candidate.plan.host_quantized, 0);
    candidate.lm_head_workspace = lm_head_workspace_bytes(plan);
    // One scratch serves every step (runtime::CudaResources): the attention's counts where it is larger.
    const size_t attention = backend == TrainingBackend::Cuda ? attention_workspace_bytes(plan) : 0;
    candidate.attention_workspace = attention > candidate.lm_head_workspace ? attention - candidate.lm_head_workspace : 0;
    return candidate;
  };
  // MoE's router loss is weighted for the step's micro-batches: accumulation × the replicas.
  const TrainingForward forward =
      build_training_forward(config, model, registry, lora, backend, batch, sequence, true, layout.data_size, vision);
  compiler::CompileOptions options{.recompute = recompute_policy(config.recompute),
                                   .alignment = 256,
                                   .offload_residual = config.offload.offload_residual,
                                   .attention_span = attention_span};
  if (fp8_options(config, model)) options.rewrite_training_graph = models::fuse_fp8_gradients;
  const std::string per_gpu = memory.gpus > 1 ? fmt::format(" (per GPU, {} GPUs)", memory.gpus) : std::string();
  if (config.parallel.pipeline_parallel_size > 1) {
    // Each stage's plan is judged with what the stage holds beside it; the run needs the largest.
    auto stage_estimate = [&](const compiler::ExecutionPlan& plan, size_t extra) {
      MemoryEstimate candidate = estimate(plan);
      candidate.pipeline = extra;
      return candidate;
    };
    auto pipeline = std::make_shared<PipelinePlan>(plan_pipeline(
        config, forward.graph, forward.loss, model.num_hidden_layers, registry, options,
        [&](const compiler::ExecutionPlan& plan, size_t extra) { return result.fits_in(stage_estimate(plan, extra).peak()); }));
    size_t largest = 0;
    for (const PipelineStagePlan& stage : pipeline->stages) {
      const MemoryEstimate candidate = stage_estimate(stage.training, stage.extra_bytes);
      if (candidate.peak() < largest) continue;
      largest = candidate.peak();
      memory = candidate;
      result.recompute = stage.recompute;
    }
    result.plan = compiler::compile_forward(forward.graph, registry);
    result.pipeline = std::move(pipeline);
    result.message = fmt::format("pipeline: {}; largest stage: {}; predicted peak {} of the {} {} offers{}",
                                 result.pipeline->describe(), result.recompute.summary,
                                 format_memory_size(result.memory.peak()), format_memory_size(device.offered_bytes),
                                 backend == TrainingBackend::Cuda ? "GPU" : "host", per_gpu);
    return result;
  }
  auto fits = [&](const compiler::ExecutionPlan& plan) { return result.fits_in(estimate(plan).peak()); };
  if (forced_recompute) {
    compiler::CompileOptions forced = options;
    forced.recompute = *forced_recompute;
    result.plan = compiler::compile_training(forward.graph, forward.loss, registry, forced);
    result.recompute = {*forced_recompute, model.num_hidden_layers, fits(result.plan), 1,
                        "recompute: as the caller set it (tests)"};
  } else {
    result.plan = compiler::compile_training_to_fit(forward.graph, forward.loss, registry, options,
                                                    model.num_hidden_layers, config.run.apply_recommended_values, fits,
                                                    &result.recompute);
  }
  memory = estimate(result.plan);
  result.message = fmt::format("{}{}; predicted peak {} of the {} {} offers{}", config.run.apply_recommended_values
                                   ? "apply_recommended_values: " : "",
                               result.recompute.summary, format_memory_size(result.memory.peak()),
                               format_memory_size(device.offered_bytes),
                               backend == TrainingBackend::Cuda ? "GPU" : "host", per_gpu);
  return result;
}

}  // namespace surogate::train
