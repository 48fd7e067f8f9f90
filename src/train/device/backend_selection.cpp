// The training backend choice; see backend_selection.h.
#include "train/device/backend_selection.h"


#include <utility>

#include <fmt/format.h>

#include "config/config_rules.h"
#include "core/error.h"
#include "cuda/device_info.h"
#include "distributed/parallel_layout.h"

namespace surogate::train {

void check_cpu_backend_options(const Config& config) {
  if (config.master_dtype && *config.master_dtype != MasterDtype::Fp32) {
    fail_user("{}: master_dtype: {} is implemented on the CUDA backend only; the CPU backend is the fp32 reference "
              "and keeps fp32 master weights. Remove the option or train on a machine with a GPU",
              config.source_of("master_dtype"), to_string(*config.master_dtype));
  }
  const bool fp8_gradients = config.recipe == Recipe::Fp8Hybrid && config.gradient_dtype &&
                             (*config.gradient_dtype == GradientDtype::Fp8E4M3 ||
                              *config.gradient_dtype == GradientDtype::Fp8E5M2);
  if (config.gradient_dtype && *config.gradient_dtype != GradientDtype::Fp32 && !fp8_gradients) {
    fail_user("{}: gradient_dtype: {} is implemented on the CUDA backend only; the CPU backend is the fp32 reference "
              "and accumulates gradients in fp32. Remove the option or train on a machine with a GPU",
              config.source_of("gradient_dtype"), to_string(*config.gradient_dtype));
  }
  for (const auto& [key, set] : {std::pair{"offload_master", config.offload_master},
                                 std::pair{"offload_optimizer", config.offload_optimizer},
                                 std::pair{"offload_grads", config.offload_grads}}) {
    if (!set) continue;
    fail_user("{}: {} moves GPU memory to pinned host memory; it applies to the CUDA backend only, and this run "
              "trains on the CPU backend. Remove the option or train on a machine with a GPU",
              config.source_of(key), key);
  }
}

BackendChoice choose_training_backend(const Config& config, const MachineOffer& machine,
                                      const distributed::ProcessPlacement& placement) {
  const bool gpu_without_bf16 = machine.cuda_built && machine.visible_gpus > 0 && !cuda_backend_usable(machine);
  if (!cuda_backend_usable(machine)) {
    std::string why = !machine.cuda_built ? std::string("this surogate was built without CUDA")
                      : gpu_without_bf16
                          ? fmt::format("the GPU ({}, SM{}) has no bf16 tensor cores, which the CUDA backend needs "
                                        "(SM{}+: Ampere or newer; its fp16 kernels use the same SM80 instructions)",
                                        machine.gpu_name, machine.gpu_sm, kCudaBackendMinimumSm)
                          : machine.why_no_gpu;
    check_cpu_backend_options(config);
    const distributed::ParallelLayout layout = distributed::cpu_parallel_layout(config, placement);
    if (layout.several_ranks()) {
      why += layout.spans_processes() ? fmt::format("; {} on CPU threads", layout.describe())
                                      : fmt::format("; gpus: {} runs {} on CPU threads", config.gpus, layout.describe());
    }
    const char* precision = fp16_training(config)
                                ? "fp16 emulated in fp32: fp16-rounded weight copies, activations and gradients, fp32 "
                                  "masters and accumulators, dynamic loss scaling"
                                : "fp32";
    return {TrainingBackend::Cpu, fmt::format("training on the CPU backend ({}): {}", precision, why)};
  }
  const bool per_node = config.distributed.num_nodes > 1 && config.distributed.gpus_per_node > 0;
  const int64_t requested = per_node ? config.distributed.gpus_per_node : config.gpus;
  if (requested > machine.visible_gpus) {
    const char* key = per_node ? "distributed.gpus_per_node" : "gpus";
    fail_user("{}: {}: {} asks for {} GPUs, but {} {} visible; set {} to at most {} (0 uses every visible GPU)",
              config.source_of(key), key, requested, requested, machine.visible_gpus,
              machine.visible_gpus == 1 ? "is" : "are", key, machine.visible_gpus);
  }
  const distributed::ParallelLayout layout = distributed::gpu_parallel_layout(config, machine.visible_gpus, placement);
  if (const std::string why = cuda_layout_refusal(layout); !why.empty()) {
    fail_user("{}: {}", config.source_of("pipeline_parallel_size"), why);
  }
  if (fp16_training(config)) check_fp16_cuda_options(config, layout);
  if (layout.several_ranks() && config.master_dtype == MasterDtype::Bf16) {
    fail_user("{}: master_dtype: bf16 is implemented on one GPU only; with gpus: {} ({} data-parallel GPUs) keep "
              "fp32 master weights (remove the option), or train on one GPU",
              config.source_of("master_dtype"), config.gpus, layout.world_size);
  }
  for (const auto& [key, set] : {std::pair{"offload_master", config.offload_master},
                                 std::pair{"offload_grads", config.offload_grads}}) {
    if (!set || !layout.several_ranks()) continue;
    fail_user("{}: {} is implemented on one GPU only (the data-parallel GPUs exchange masters and gradients in GPU "
              "memory); with gpus: {} ({} data-parallel GPUs) remove it — offload_optimizer works with several GPUs "
              "— or train on one GPU",
              config.source_of(key), key, config.gpus, layout.world_size);
  }
  if (config.recipe == Recipe::Nvfp4) {
    fail_user("{}: recipe: nvfp4 is not implemented yet on the CUDA backend; use recipe: bf16 or fp8_hybrid",
              config.source_of("recipe"));
  }
  // qlora_fp8 (and the FP8 / FP4 modes) need SM89+ / SM100+; an unknown SM (0) is not checked.
  if (machine.gpu_sm > 0) validate_for_hardware(config, machine.gpu_sm);
  const bool fp8 = config.recipe == Recipe::Fp8Hybrid;
  const bool fp16 = fp16_training(config);
  const bool bf16_master = config.master_dtype == MasterDtype::Bf16;
  const bool bf16_gradients = config.gradient_dtype == GradientDtype::Bf16;
  const std::string ranks =
      !layout.several_ranks() ? std::string()
      : layout.spans_processes()
          ? fmt::format("; {} processes run {}, this one on GPUs {}-{} (NCCL)", layout.processes, layout.describe(),
                        layout.first_device, layout.first_device + layout.local_ranks - 1)
          : fmt::format("; gpus: {} runs {} on GPUs 0-{} (threads of this process, NCCL)", config.gpus,
                        layout.describe(), layout.world_size - 1);
  return {TrainingBackend::Cuda,
          fmt::format("training on the CUDA backend ({}): {}, {}, {} gradient accumulation and {} state{}",
                      machine.gpu_name,
                      fp8    ? "fp8_hybrid recipe (FP8 projections, bf16 elsewhere)"
                      : fp16 ? "fp16 weights and activations with dynamic loss scaling"
                             : "bf16 weights and activations",
                      bf16_master ? "bf16 master weights (stochastic rounding, no fp32 copy)" : "fp32 master weights",
                      bf16_gradients ? "bf16" : "fp32", to_string(config.optimizer), ranks)};
}

// The CUDA kernels' matrix products are bf16 tensor-core instructions, SM80+ (a build for SM75
// compiles them as traps: cuda/kernels/attention_tiles.cuh).
bool cuda_backend_usable(const MachineOffer& machine) {
  return machine.cuda_built && machine.visible_gpus > 0 && (machine.gpu_sm == 0 || machine.gpu_sm >= kCudaBackendMinimumSm);
}

bool fp16_training(const Config& config) { return config.torch_dtype == TorchDtype::Float16; }

namespace {

[[noreturn]] void refuse_fp16_cuda(const Config& config, const char* key, const std::string& what,
                                   const std::string& remedy) {
  fail_user("{}: torch_dtype: float16 with {} is not implemented on the CUDA backend (its fp16 training is the dense "
            "model on one GPU: fp32 master weights and gradient accumulators, optimizer adamw or adamw_8bit, no "
            "offloading, LoRA or full fine-tuning without QLoRA); {}, or set torch_dtype: bfloat16 to train in bf16",
            config.source_of(key), what, remedy);
}

}  // namespace

void check_fp16_cuda_options(const Config& config, const distributed::ParallelLayout& layout) {
  if (!fp16_training(config)) return;
  if (layout.several_ranks()) {
    refuse_fp16_cuda(config, "gpus", fmt::format("gpus: {} ({})", config.gpus, layout.describe()), "train on one GPU");
  }
  if (config.master_dtype && *config.master_dtype != MasterDtype::Fp32) {
    refuse_fp16_cuda(config, "master_dtype", fmt::format("master_dtype: {}", to_string(*config.master_dtype)),
                     "remove master_dtype");
  }
  if (config.gradient_dtype && *config.gradient_dtype != GradientDtype::Fp32) {
    refuse_fp16_cuda(config, "gradient_dtype", fmt::format("gradient_dtype: {}", to_string(*config.gradient_dtype)),
                     "remove gradient_dtype");
  }
  if (config.optimizer == surogate::Optimizer::NorMuon) {
    refuse_fp16_cuda(config, "optimizer", "optimizer: normuon", "use optimizer: adamw or adamw_8bit");
  }
  for (const auto& [key, set] : {std::pair{"offload_master", config.offload_master},
                                 std::pair{"offload_grads", config.offload_grads},
                                 std::pair{"offload_optimizer", config.offload_optimizer},
                                 std::pair{"offload_residual", config.offload_residual},
                                 std::pair{"offload_quants", config.offload_quants}}) {
    if (set) refuse_fp16_cuda(config, key, fmt::format("{}: true", key), fmt::format("remove {}", key));
  }
  for (const auto& [key, set] : {std::pair{"qlora_fp8", config.qlora_fp8}, std::pair{"qlora_fp4", config.qlora_fp4},
                                 std::pair{"qlora_bnb", config.qlora_bnb}}) {
    if (set) refuse_fp16_cuda(config, key, fmt::format("{}: true (QLoRA)", key), "train LoRA without quantization");
  }
  if (config.recipe != Recipe::Bf16) {
    refuse_fp16_cuda(config, "recipe", fmt::format("recipe: {}", to_string(config.recipe)), "remove recipe");
  }
}

void check_fp16_cuda_model(const Config& config, const io::ModelConfig& model) {
  if (!fp16_training(config) || !model.moe) return;
  refuse_fp16_cuda(config, "torch_dtype",
                   fmt::format("a mixture-of-experts model ({})", io::architecture_model_type(model.architecture)),
                   "train a dense model in fp16");
}

std::string cuda_layout_refusal(const distributed::ParallelLayout& layout) {
  if (layout.sequence_size == 1 || layout.pipeline_size == 1) return {};
  return fmt::format("pipeline_parallel_size: {} with sequence_parallel_size: {} (3D parallelism) runs on CPU ranks "
                     "only in this version; the CUDA pipeline device does not split its stages over sequence groups. "
                     "On GPUs choose one of the two (gpus = data × sequence or data × pipeline)",
                     layout.pipeline_size, layout.sequence_size);
}

MachineOffer probe_machine() {
  cuda::CudaEnvironment environment = cuda::query_cuda_environment();
  MachineOffer offer;
  offer.cuda_built = environment.built_with_cuda;
  offer.visible_gpus = static_cast<int>(environment.gpus.size());
  if (!environment.gpus.empty()) {
    offer.gpu_name = environment.gpus.front().name;
    offer.gpu_total_bytes = environment.gpus.front().memory_total_bytes;
    offer.gpu_sm = environment.gpus.front().sm_major * 10 + environment.gpus.front().sm_minor;
  }
  offer.why_no_gpu = environment.status;
  return offer;
}

}  // namespace surogate::train
