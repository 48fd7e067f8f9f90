// The dry run's memory prediction; see memory_prediction.h.
#include "train/memory_prediction.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "config/config_rules.h"
#include "core/strings.h"
#include "data/pipeline.h"
#include "io/model_config.h"
#include "models/defined_weights.h"
#include "train/device/backend_selection.h"
#include "train/objective/grpo_rollout_model.h"
#include "train/pipeline_plan.h"
#include "train/training_plan.h"
#include "train/vision_memory_plan.h"
#include "train/vision_stage.h"

namespace surogate::train {
namespace {

struct Target {
  TrainingBackend backend = TrainingBackend::Cpu;
  DeviceMemory memory;
  int sm = 0;  // the GPU's compute capability (major · 10 + minor); 0: none, or unknown (--gpu-memory)
};

Target target_device(std::optional<size_t> gpu_memory_bytes) {
  // The backend the run would take (train/device/backend_selection.h), without its option checks:
  // a dry run validates a configuration that may be meant for another machine.
  const MachineOffer machine = gpu_memory_bytes ? MachineOffer{} : probe_machine();
  const bool gpu = gpu_memory_bytes || cuda_backend_usable(machine);
  const TrainingBackend backend = gpu ? TrainingBackend::Cuda : TrainingBackend::Cpu;
  return {backend, device_memory(backend, machine, gpu_memory_bytes), machine.gpu_sm};
}

// The plan the trainer would compile for `config` on `target`; `row_patches` (0 for a text model): a
// vision-language model's most patches one packed row holds (train/vision_memory_plan.h), the tower is planned for
// per_device_train_batch_size times it, as the trainer plans it.
TrainingPlan plan_for(const Config& config, const io::ModelConfig& model, const Target& target,
                      int64_t row_patches) {
  const graph::OpRegistry registry = make_training_registry();
  // surogate grpo's rows hold a prompt and its completion (sequence_len does not apply).
  const auto sequence = config.grpo.enabled ? grpo_row_length(config)
                                            : static_cast<int64_t>(data::data_settings_from_config(config).sequence_len);
  const std::shared_ptr<VisionStage> vision = vision_stage(config);
  if (vision) vision->set_plan_patches(row_patches, config.schedule.per_device_train_batch_size);
  std::optional<models::LoraSetup> lora;
  if (config.lora.enabled) lora = lora_setup(config.lora, config.sources, model, target.backend, vision.get());
  return plan_training(config, model, registry, lora ? &*lora : nullptr, target.backend,
                       config.schedule.per_device_train_batch_size, sequence, target.memory, std::nullopt, nullptr,
                       vision.get());
}

// One change to the configuration that saves memory, when it applies.
struct Lever {
  std::string description;
  std::function<bool(Config&)> apply;  // false when it does not apply to this configuration
};

// Sets an offload_* option, on the CUDA backend and where the feature-support table allows it as
// the configuration stands (masters need fp32 masters; masters and gradients one GPU; the staged
// step adamw or adamw_8bit with fp32 masters, unless use_zero_copy is set).
Lever offload_lever(const char* description, bool config::Offload::*option, bool cuda) {
  return {description, [option, cuda](Config& c) {
            if (!cuda || c.offload.*option) return false;
            if (option != &config::Offload::offload_optimizer && c.parallel.gpus != 1) return false;
            if (option == &config::Offload::offload_master && c.precision.master_dtype == MasterDtype::Bf16)
              return false;
            const bool staged = option != &config::Offload::offload_grads && !c.offload.use_zero_copy;
            if (staged && (c.optimizer.algorithm == surogate::Optimizer::NorMuon ||
                           c.precision.master_dtype == MasterDtype::Bf16)) {
              return false;
            }
            c.offload.*option = true;
            return true;
          }};
}

// `sm`: the target GPU's compute capability; qlora_fp8 is offered on SM89+ only. `cuda`: the
// target is the CUDA backend (offloading applies).
std::vector<Lever> levers(int sm, bool cuda) {
  std::vector<Lever> all = {
      {"recompute_block: true (recompute allowed in every group)",
       [](Config& c) {
         if (c.recompute.recompute_block && c.recompute.recompute_att && c.recompute.recompute_ffn &&
             c.recompute.recompute_rmsnorm && c.recompute.recompute_qkv && c.recompute.recompute_swiglu) {
           return false;
         }
         c.recompute.recompute_block = c.recompute.recompute_att = c.recompute.recompute_ffn =
             c.recompute.recompute_rmsnorm = c.recompute.recompute_qkv = c.recompute.recompute_swiglu = true;
         return true;
       }},
      {"optimizer: adamw_8bit",
       [](Config& c) {
         if (c.optimizer.algorithm == surogate::Optimizer::AdamW8bit) return false;
         c.optimizer.algorithm = surogate::Optimizer::AdamW8bit;
         return true;
       }},
      {"master_dtype: bf16",
       [](Config& c) {
         // One GPU's only (backend_selection.cpp refuses it with several).
         if (c.precision.master_dtype == MasterDtype::Bf16 || c.parallel.gpus != 1) return false;
         c.precision.master_dtype = MasterDtype::Bf16;
         return true;
       }},
      {"offload_residual: true (the residual stream's checkpoints in pinned host memory)",
       [cuda](Config& c) {
         if (!cuda || c.offload.offload_residual) return false;
         c.offload.offload_residual = true;
         if (c.lora.enabled && c.recompute.recompute_lora)
           c.kernels.use_cuda_graphs = false;  // as the configuration's implication does
         return true;
       }},
      offload_lever("offload_optimizer: true (optimizer state in pinned host memory)",
                    &config::Offload::offload_optimizer, cuda),
      offload_lever("offload_master: true (fp32 master weights in pinned host memory)",
                    &config::Offload::offload_master, cuda),
      offload_lever("offload_grads: true (gradient accumulators in pinned host memory; slow)",
                    &config::Offload::offload_grads, cuda),
      {"zero_level: 2 (each data-parallel rank accumulates only its shard of the gradients)",
       [](Config& c) {
         if (c.parallel.shard_gradients || c.parallel.shard_weights || c.parallel.zero_level >= 2 ||
             c.parallel.gpus == 1)
           return false;
         c.parallel.zero_level = 2;
         c.parallel.shard_gradients = true;
         return true;
       }},
      {"zero_level: 3 (each data-parallel rank keeps its shard of the weights, gathered a layer at a time)",
       [](Config& c) {
         if (c.parallel.shard_weights || c.parallel.zero_level >= 3 || c.parallel.gpus == 1) return false;
         c.parallel.zero_level = 3;
         c.parallel.shard_weights = c.parallel.shard_gradients = true;
         return true;
       }},
      {"grpo.beta: 0 (no KL term: no reference model, nor under full fine-tuning its copy of the starting weights)",
       [](Config& c) {
         if (!c.grpo.enabled || c.grpo.beta == 0.0) return false;
         c.grpo.beta = 0.0;
         return true;
       }},
      {"lora: true (train adapters, not every weight)",
       [](Config& c) {
         if (c.lora.enabled) return false;
         c.lora.enabled = true;
         return true;
       }},
      {"qlora_bnb: true (the frozen base in NF4, about 0.28 of its bf16 size)",
       [](Config& c) {
         if (!c.lora.enabled || c.quant.qlora_bnb || c.quant.qlora_fp8 || c.quant.qlora_fp4) return false;
         c.quant.qlora_bnb = true;
         c.kernels.use_cuda_graphs = false;  // as the configuration's implication does
         return true;
       }},
      {"qlora_fp8: true (the frozen base in FP8 E4M3 blocks, about 0.5 of its bf16 size)",
       [sm](Config& c) {
         if (sm < 89 || !c.lora.enabled || c.quant.qlora_bnb || c.quant.qlora_fp8 || c.quant.qlora_fp4) return false;
         c.quant.qlora_fp8 = true;
         c.kernels.use_cuda_graphs = false;  // as the configuration's implication does
         return true;
       }},
      {"qlora_fp4: true (the frozen base in NVFP4, about 0.28 of its bf16 size, on any GPU)",
       [](Config& c) {
         if (!c.lora.enabled || c.quant.qlora_bnb || c.quant.qlora_fp8 || c.quant.qlora_fp4) return false;
         c.quant.qlora_fp4 = true;
         c.kernels.use_cuda_graphs = false;  // as the configuration's implication does
         return true;
       }},
      {"lmhead_chunks: 8",
       [](Config& c) {
         if (c.kernels.lmhead_chunks >= 8) return false;
         c.kernels.lmhead_chunks = 8;
         return true;
       }},
      {"per_device_train_batch_size: 1 (gradient_accumulation_steps raised to keep the batch)",
       [](Config& c) {
         if (c.schedule.per_device_train_batch_size <= 1) return false;
         c.schedule.gradient_accumulation_steps *= c.schedule.per_device_train_batch_size;
         c.schedule.per_device_train_batch_size = 1;
         return true;
       }},
      {"validation_split_ratio: 0 (no held-out evaluation: its forward of the whole sequence on GPU 0 goes)",
       [](Config& c) {
         if (!c.eval.validation_datasets.empty() || c.eval.validation_split_ratio <= 0.0) return false;
         c.eval.validation_split_ratio = 0.0;
         return true;
       }},
  };
  return all;
}

// The ranks the run has: `gpus` (every visible GPU for 0; one with --gpu-memory, which predicts
// one GPU of a given size), on CPU ranks `gpus` threads (0 and 1: one).
int run_ranks(const Config& config, const Target& target) {
  if (config.parallel.gpus > 0) return static_cast<int>(config.parallel.gpus);
  return target.backend == TrainingBackend::Cuda ? std::max(1, target.memory.visible_gpus) : 1;
}

// Every layout of the run's ranks, predicted; the configured one marked, and the engine's pick.
void predict_layouts(const Config& config, const io::ModelConfig& model, const Target& target,
                     int64_t row_patches, MemoryPrediction& prediction) {
  const int ranks = run_ranks(config, target);
  if (ranks == 1 && config.parallel.sequence_parallel_size == 1 && config.parallel.pipeline_parallel_size == 1) return;
  prediction.layout_ranks = ranks;
  for (int sequence = 1; sequence <= ranks; ++sequence) {
    for (int pipeline = 1; pipeline <= ranks; ++pipeline) {
      if (ranks % (sequence * pipeline) != 0) continue;
      LayoutPrediction layout;
      layout.data = ranks / (sequence * pipeline);
      layout.sequence = sequence;
      layout.pipeline = pipeline;
      layout.configured =
          sequence == config.parallel.sequence_parallel_size && pipeline == config.parallel.pipeline_parallel_size;
      Config variant = config;
      variant.parallel.gpus = ranks;
      variant.parallel.sequence_parallel_size = sequence;
      variant.parallel.pipeline_parallel_size = pipeline;
      if (pipeline != config.parallel.pipeline_parallel_size) variant.parallel.pipeline_stage_layers.clear();
      try {
        validate_config(variant, "");  // a layout the options' rules refuse is listed with their reason
        const TrainingPlan plan = plan_for(variant, model, target, row_patches);
        layout.peak_bytes = plan.memory.peak();
        layout.fits = plan.fits();
      } catch (const UserError& error) {
        // The variant's sizes were set here, not in a file: drop the "where it was set" prefix.
        const std::string message = error.what();
        const std::string unset = "the default: ";
        layout.refusal = message.starts_with(unset) ? message.substr(unset.size()) : message;
      }
      prediction.layouts.push_back(std::move(layout));
    }
  }
  // Data parallelism alone first, then the fewest ranks per sequence group, then the fewest stages.
  std::stable_sort(prediction.layouts.begin(), prediction.layouts.end(),
                   [](const LayoutPrediction& x, const LayoutPrediction& y) {
                     return std::tuple(x.pipeline > 1, x.sequence, x.pipeline) < std::tuple(y.pipeline > 1, y.sequence, y.pipeline);
                   });
  for (size_t index = 0; index < prediction.layouts.size(); ++index) {
    const LayoutPrediction& layout = prediction.layouts[index];
    if (layout.fits && layout.refusal.empty()) {
      prediction.picked_layout = index;
      break;
    }
  }
}

std::string layout_name(const LayoutPrediction& layout) {
  return fmt::format("{} × {} × {}", layout.data, layout.sequence, layout.pipeline);
}

std::string layout_settings(const LayoutPrediction& layout) {
  if (layout.sequence > 1 && layout.pipeline > 1) {
    return fmt::format("sequence_parallel_size: {}, pipeline_parallel_size: {}", layout.sequence, layout.pipeline);
  }
  if (layout.sequence > 1) return fmt::format("sequence_parallel_size: {}", layout.sequence);
  if (layout.pipeline > 1) return fmt::format("pipeline_parallel_size: {}", layout.pipeline);
  return "data parallelism alone: only gradients travel";
}

// surogate grpo: the rollout model's categories and the line that says what its KV cache is.
void add_rollout_prediction(const Config& config, const io::ModelConfig& model, const Target& target,
                            const MemoryEstimate& memory, MemoryPrediction& prediction) {
  const int64_t slots = grpo_rollout_slots(config);
  const int64_t tokens = grpo_row_length(config);
  prediction.categories.emplace_back(fmt::format("rollout KV cache ({} × {} tokens)", slots, tokens),
                                     memory.rollout_caches);
  prediction.categories.emplace_back("rollout decode and prefill activations", memory.rollout_activations);
  if (memory.reference_weights > 0) {  // full fine-tuning with beta: the frozen starting weights
    prediction.categories.emplace_back("KL reference: starting weights (grpo.beta)", memory.reference_weights);
  }
  if (memory.reference_model > 0) {
    prediction.categories.emplace_back("KL reference: KV cache and activations", memory.reference_model);
  }
  const bool cuda = target.backend == TrainingBackend::Cuda;
  prediction.rollout = fmt::format(
      "rollouts: a KV cache of {} completions at once (per_device_train_batch_size × gradient_accumulation_steps, at "
      "most {}{}) × {} tokens (grpo.max_prompt_length {} + grpo.max_completion_length {}) × {} layers × {} KV heads × "
      "{} × {} (keys and values), beside the trainer's weights{}",
      slots, config.grpo.generation_batch_size.value_or(kGrpoRolloutSlots),
      config.grpo.generation_batch_size ? ", grpo.generation_batch_size" : "", tokens, config.grpo.max_prompt_length, config.grpo.max_completion_length,
      model.num_hidden_layers, model.num_key_value_heads, model.head_dim, cuda ? "bf16" : "fp32",
      prediction.ranks > 1 || prediction.gpus > 1 ? ", on every rank" : "");
}

// surogate grpo with grpo.generation_batch_size unset and more completions a step than the
// default slots: the largest generation batch (the step's completions, halved while above the
// default) with which the run still fits under the same recompute choice — fewer waves of
// rollouts, the training unchanged — as a line to set; empty when none.
std::string larger_generation_batch(const Config& config, const io::ModelConfig& model, const Target& target,
                                    const TrainingPlan& plan) {
  const int64_t completions =
      config.schedule.per_device_train_batch_size * std::max<int64_t>(1, config.schedule.gradient_accumulation_steps);
  if (config.grpo.generation_batch_size || completions <= kGrpoRolloutSlots) return {};
  const auto waves = [&](int64_t slots) { return (completions + slots - 1) / slots; };
  for (int64_t slots = completions; slots > kGrpoRolloutSlots; slots = (slots + 1) / 2) {
    Config larger = config;
    larger.grpo.generation_batch_size = slots;
    const TrainingPlan candidate = plan_for(larger, model, target, 0);
    if (!candidate.fits() || candidate.recompute.summary != plan.recompute.summary) continue;
    return fmt::format("grpo.generation_batch_size: {} also fits (the step's {} completions in {} wave{} of rollouts "
                       "instead of {}; predicted peak {}): faster where the memory is free",
                       slots, completions, waves(slots), waves(slots) == 1 ? "" : "s", waves(kGrpoRolloutSlots),
                       format_memory_size(candidate.memory.peak()));
  }
  return {};
}

// The dry run's line about the vision tower: the patch count it is planned for and where it comes from.
std::string describe_vision_plan(const Config& config, const VisionRowImages& images, int64_t plan_patches) {
  size_t count = 0;
  for (const auto& row : images.rows) count += row.size();
  return fmt::format("vision tower planned for {} patches: per_device_train_batch_size {} × {}, the most patches one "
                     "packed row of the training data holds ({} images in {} rows, resized under max_pixels {}; the "
                     "tower's activations grow with max_pixels)",
                     plan_patches, config.schedule.per_device_train_batch_size, images.row_patches, count,
                     images.rows.size(), images.processor.max_pixels);
}

}  // namespace

MemoryPrediction predict_training_memory(const Config& config, std::optional<size_t> gpu_memory_bytes) {
  const std::shared_ptr<const VisionStage> vision = vision_stage(config);
  const io::ModelConfig model =
      vision ? vision->text()
             : models::load_model_config(config.model.name_or_path, model_definition(config.model, config.sources));
  const Target target = target_device(gpu_memory_bytes);
  // A vision-language model's tower is planned from the training data's images, as the run plans it.
  std::optional<VisionRowImages> images;
  if (vision) images = read_vision_rows(config);
  const int64_t row_patches = images ? images->row_patches : 0;  // 0: a text model
  const TrainingPlan plan = plan_for(config, model, target, row_patches);
  MemoryPrediction prediction;
  prediction.device = target.memory.name;
  prediction.device_bytes = target.memory.offered_bytes;
  prediction.margin_bytes = plan.margin_bytes;
  prediction.ranks = plan.memory.ranks;
  prediction.gpus = plan.memory.gpus;
  prediction.shard_gradients =
      config.parallel.shard_gradients || config.parallel.zero_level >= 2 || config.parallel.shard_weights;
  prediction.shard_weights = plan.memory.shard_weights;
  prediction.pipeline = plan.pipeline != nullptr;
  const PlanMemory& m = plan.memory.plan;
  prediction.categories = {{prediction.shard_weights ? "weights (this rank's shard)" : "weights", m.weights},
                           {"gathered weights (per-layer buffers)", m.gathered},
                           {"master weights (trainable)", m.masters},
                           {"optimizer state", m.optimizer},
                           {"gradients (one micro-batch)", m.gradients},
                           {"gradient accumulators", m.accumulators},
                           {"offload staging (two GPU slots)", m.staging},
                           {"activations (planned arena)", m.activations},
                           {"batch", m.inputs},
                           {"LM-head workspace", plan.memory.lm_head_workspace}};
  if (plan.memory.attention_workspace > 0) {
    prediction.categories.emplace_back("attention workspace (beyond the LM head's)", plan.memory.attention_workspace);
  }
  prediction.evaluation = evaluates(config);
  if (prediction.evaluation) {
    // On a GPU the evaluator reuses the training's arena and scratch where it fits in them: only
    // what does not is counted (usually nothing but its batch on one GPU).
    prediction.categories.emplace_back("evaluation (outside the training's memory)",
                                       plan.memory.evaluation());
  }
  if ((prediction.shard_weights || config.offload.offload_quants) && m.quantized_base + m.host_quantized > 0) {
    prediction.categories.emplace_back(config.offload.offload_quants    ? "quantized base (offload_quants: on the host)"
                                       : config.offload.persistent_quants ? "quantized base (persistent_quants: whole)"
                                                                  : "quantized base (this rank's share)",
                                       m.quantized_base);
  }
  if (plan.memory.pipeline > 0) {
    prediction.categories.emplace_back("pipeline: forward plan, micro-batches in flight", plan.memory.pipeline);
  }
  if (config.grpo.enabled) add_rollout_prediction(config, model, target, plan.memory, prediction);
  if (plan.memory.context > 0) prediction.categories.emplace_back("CUDA context and libraries", plan.memory.context);
  if (plan.memory.collectives > 0) {
    prediction.categories.emplace_back("NCCL buffers (the sequence group's all-to-alls)", plan.memory.collectives);
  }
  if (plan.memory.weight_copies > 0) {
    prediction.categories.emplace_back("host copies of the weights (one per process)", plan.memory.weight_copies);
  }
  if (config.logging.debug_memory_breakdown)
    prediction.breakdown = format_run_memory_breakdown(plan.plan, plan.pipeline.get(), 0);
  prediction.total_bytes = plan.memory.peak();
  prediction.host_offloaded_bytes = plan.memory.host_offloaded();
  prediction.host_per_process_bytes = m.host_quantized;
  for (const auto& [bytes, option] : {std::pair{m.host_residuals, "offload_residual"}, std::pair{m.host_masters, "offload_master"},
                                      std::pair{m.host_optimizer, "offload_optimizer"},
                                      std::pair{m.host_accumulators, "offload_grads"},
                                      std::pair{m.host_quantized, "offload_quants"}}) {
    if (bytes > 0) prediction.host_offloaded_by += (prediction.host_offloaded_by.empty() ? "" : ", ") + std::string(option);
  }
  prediction.recompute = plan.recompute.summary;
  prediction.fits = plan.fits();
  predict_layouts(config, model, target, row_patches, prediction);
  if (images) {  // the count plan_for's stage was given (VisionStage::set_plan_patches)
    const int64_t planned = std::max(config.schedule.per_device_train_batch_size * images->row_patches,
                                     vision->merge_unit());
    prediction.vision = describe_vision_plan(config, *images, planned);
  }
  if (config.grpo.enabled && prediction.fits) prediction.rollout_hint = larger_generation_batch(config, model, target, plan);
  if (prediction.fits) return prediction;

  if (images) {  // the lever of the images' size first: the tower's activations grow with it
    const auto fits = [&](int64_t patches) { return plan_for(config, model, target, patches).fits(); };
    if (const std::optional<int64_t> max_pixels = max_pixels_that_fits(*images, fits)) {
      prediction.suggestions.push_back(fmt::format(
          "max_pixels: {} (about: the most patches one row holds goes from {} to {} if the rows keep their images; "
          "packing may put more images in a row, so check with --dry-run)",
          *max_pixels, images->row_patches, row_patches_under(*images, *max_pixels)));
    } else {
      prediction.vision += fmt::format("; not even max_pixels: {} (min_pixels) makes it fit", images->processor.min_pixels);
    }
  }

  // Each lever alone, then the levers together in order until the plan fits.
  const std::vector<Lever> all = levers(target.sm, target.backend == TrainingBackend::Cuda);
  for (const Lever& lever : all) {
    Config changed = config;
    if (lever.apply(changed) && plan_for(changed, model, target, row_patches).fits()) {
      prediction.suggestions.push_back(lever.description);
    }
  }
  if (!prediction.suggestions.empty()) return prediction;
  Config combined = config;
  std::string names;
  for (const Lever& lever : all) {
    if (!lever.apply(combined)) continue;
    names += (names.empty() ? "" : " + ") + lever.description;
    if (plan_for(combined, model, target, row_patches).fits()) {
      prediction.suggestions.push_back(names);
      return prediction;
    }
  }
  return prediction;
}

std::string format_memory_prediction(const MemoryPrediction& p) {
  std::string out = fmt::format("# predicted memory on {}\n", p.device);
  for (const auto& [name, bytes] : p.categories) {
    out += fmt::format("#   {:<44} {:>12}\n", name, format_memory_size(bytes));
  }
  if (p.ranks > 1 && p.pipeline) {
    out += fmt::format("#   ({} rank threads, each running one pipeline stage: the figures are the largest stage's, "
                       "the optimizer state shared out among its data × sequence ranks)\n", p.ranks);
  } else if (p.ranks > 1) {
    // What each rank thread holds on its own: all of the above but the leader's evaluation and the
    // host copies that one process keeps.
    std::string apart = p.evaluation ? " the evaluation" : "";
    if (p.shard_weights) apart += apart.empty() ? " the host copies" : " and the host copies";
    out += fmt::format("#   ({} data-parallel rank threads: each holds the above{}{}, and the optimizer "
                       "state is shared out among them{}{})\n",
                       p.ranks, apart.empty() ? "" : " but", apart,
                       p.shard_gradients ? "; ZeRO-2: each accumulates its shard's gradients, beside one gradient bucket" : "",
                       p.shard_weights ? "; ZeRO-3: each keeps its shard of the weights and gathers a layer at a time" : "");
  }
  if (p.gpus > 1) {
    out += fmt::format("#   (per GPU, each of {} GPUs{}. The optimizer state "
                       "is the largest ZeRO-1 shard: whole tensors per GPU{}{})\n",
                       p.gpus, p.evaluation ? "; GPU 0 also holds the evaluation" : "",
                       p.shard_weights ? "; ZeRO-3 keeps the largest shard of the weights and their masters, and gathers "
                                         "a layer at a time into the per-layer buffers"
                                       : "",
                       p.shard_gradients ? "; ZeRO-2 reduce-scatters every micro-batch's gradients, so the "
                                           "accumulators are the largest shard's and two gradient buckets"
                                         : "");
  }
  out += fmt::format("#   {:<44} {:>12} of {} offered (with {} kept free): {}\n", "predicted peak",
                     format_memory_size(p.total_bytes), format_memory_size(p.device_bytes),
                     format_memory_size(p.margin_bytes), p.fits ? "fits" : "does NOT fit");
  if (p.host_offloaded_bytes > 0) {
    // offload_quants' image is one per process (its GPUs read the same one); the rest is per GPU.
    const size_t per_gpu = p.host_offloaded_bytes - p.host_per_process_bytes;
    std::string scope;
    if (p.gpus > 1 && per_gpu > 0) scope = ", per GPU";
    if (p.gpus > 1 && p.host_per_process_bytes > 0) {
      scope += per_gpu > 0 ? fmt::format(" but offload_quants' {} once per process", format_memory_size(p.host_per_process_bytes))
                           : ", once per process";
    }
    out += fmt::format("#   {:<44} {:>12} (not on the GPU: {}{})\n", "pinned host memory",
                       format_memory_size(p.host_offloaded_bytes), p.host_offloaded_by, scope);
  }
  out += fmt::format("# {}\n", p.recompute);
  if (!p.vision.empty()) out += fmt::format("# {}\n", p.vision);
  if (!p.breakdown.empty()) {  // debug_memory_breakdown: what the activation arena holds
    size_t begin = 0;
    while (begin < p.breakdown.size()) {
      const size_t end = std::min(p.breakdown.find('\n', begin), p.breakdown.size());
      out += "#   " + p.breakdown.substr(begin, end - begin) + "\n";
      begin = end + 1;
    }
  }
  if (!p.layouts.empty()) {
    out += fmt::format("# layouts of {} ranks (data × sequence × pipeline), predicted peak {}:\n", p.layout_ranks,
                       p.gpus > 1 ? "per GPU" : "of the host (every rank)");
    for (const LayoutPrediction& layout : p.layouts) {
      const std::string verdict = !layout.refusal.empty() ? "cannot: " + layout.refusal
                                  : fmt::format("{:>12}  {}", format_memory_size(layout.peak_bytes),
                                                layout.fits ? "fits" : "does NOT fit");
      out += fmt::format("#   {:<12} {}{}\n", layout_name(layout), verdict, layout.configured ? "   <- configured" : "");
    }
    if (p.picked_layout) {
      const LayoutPrediction& picked = p.layouts[*p.picked_layout];
      out += fmt::format("# the engine would pick {} ({}){}\n", layout_name(picked), layout_settings(picked),
                         picked.configured ? ", which the configuration sets" : "");
    } else {
      out += "# no layout of these ranks fits; see the options above, or more ranks\n";
    }
  }
  if (!p.rollout.empty()) {
    out += fmt::format("# {}\n", p.rollout);
    if (!p.rollout_hint.empty()) out += fmt::format("# {}\n", p.rollout_hint);
    if (!p.fits) {
      out += "# the rollout KV cache shrinks with grpo.max_completion_length (and max_prompt_length) and with "
             "per_device_train_batch_size (fewer completions at once)\n";
    }
  }
  if (!p.fits) {
    if (p.suggestions.empty()) {
      out += "# nothing this build offers makes it fit: use a GPU with more memory, more GPUs with zero_level: 3, "
             "a shorter sequence_len or a smaller model\n";
    } else {
      out += "# options that make it fit (each line is enough; a line with + needs all of them):\n";
      for (const std::string& suggestion : p.suggestions) out += fmt::format("#   - {}\n", suggestion);
    }
  }
  return out;
}

}  // namespace surogate::train
