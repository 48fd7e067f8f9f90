// The training backend choice; see backend_selection.h.
#include "train/device/backend_selection.h"

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/device_info.h"
#include "distributed/parallel_layout.h"

namespace surogate::train {

void check_cpu_backend_precision(const Config& config) {
  if (config.master_dtype && *config.master_dtype != MasterDtype::Fp32) {
    fail_user("{}: master_dtype: {} is implemented on the CUDA backend only; the CPU backend is the fp32 reference "
              "and keeps fp32 master weights. Remove the option or train on a machine with a GPU",
              config.source_of("master_dtype"), to_string(*config.master_dtype));
  }
  if (config.gradient_dtype && *config.gradient_dtype != GradientDtype::Fp32) {
    fail_user("{}: gradient_dtype: {} is implemented on the CUDA backend only; the CPU backend is the fp32 reference "
              "and accumulates gradients in fp32. Remove the option or train on a machine with a GPU",
              config.source_of("gradient_dtype"), to_string(*config.gradient_dtype));
  }
}

BackendChoice choose_training_backend(const Config& config, const MachineOffer& machine) {
  if (!machine.cuda_built || machine.visible_gpus == 0) {
    std::string why = machine.cuda_built ? machine.why_no_gpu : std::string("this surogate was built without CUDA");
    check_cpu_backend_precision(config);
    const distributed::ParallelLayout layout = distributed::cpu_parallel_layout(config);
    if (layout.data_parallel()) why += fmt::format("; gpus: {} runs {} on CPU threads", config.gpus, layout.describe());
    return {TrainingBackend::Cpu, fmt::format("training on the CPU backend (fp32): {}", why)};
  }
  if (config.gpus > machine.visible_gpus) {
    fail_user("{}: gpus: {} asks for {} GPUs, but {} {} visible; set gpus to at most {} (0 uses every visible GPU)",
              config.source_of("gpus"), config.gpus, config.gpus, machine.visible_gpus,
              machine.visible_gpus == 1 ? "is" : "are", machine.visible_gpus);
  }
  const distributed::ParallelLayout layout = distributed::gpu_parallel_layout(config, machine.visible_gpus);
  if (layout.data_parallel() && config.master_dtype == MasterDtype::Bf16) {
    fail_user("{}: master_dtype: bf16 is implemented on one GPU only; with gpus: {} ({} data-parallel GPUs) keep "
              "fp32 master weights (remove the option), or train on one GPU",
              config.source_of("master_dtype"), config.gpus, layout.world_size);
  }
  if (config.recipe != Recipe::Bf16) {
    fail_user("{}: recipe: {} is not implemented yet on the CUDA backend; use recipe: bf16",
              config.source_of("recipe"), to_string(config.recipe));
  }
  if (config.gradient_dtype && *config.gradient_dtype != GradientDtype::Fp32 &&
      *config.gradient_dtype != GradientDtype::Bf16) {
    fail_user("{}: gradient_dtype: {} belongs to the fp8 recipes, which are not implemented yet; use gradient_dtype: "
              "bf16 or fp32", config.source_of("gradient_dtype"), to_string(*config.gradient_dtype));
  }
  const bool bf16_master = config.master_dtype == MasterDtype::Bf16;
  const bool bf16_gradients = config.gradient_dtype == GradientDtype::Bf16;
  const std::string ranks =
      layout.data_parallel()
          ? fmt::format("; gpus: {} runs {} on GPUs 0-{} (threads of this process, NCCL)", config.gpus,
                        layout.describe(), layout.world_size - 1)
          : std::string();
  return {TrainingBackend::Cuda,
          fmt::format("training on the CUDA backend ({}): bf16 weights and activations, {}, {} gradient accumulation "
                      "and {} state{}",
                      machine.gpu_name,
                      bf16_master ? "bf16 master weights (stochastic rounding, no fp32 copy)" : "fp32 master weights",
                      bf16_gradients ? "bf16" : "fp32", to_string(config.optimizer), ranks)};
}

MachineOffer probe_machine() {
  cuda::CudaEnvironment environment = cuda::query_cuda_environment();
  MachineOffer offer;
  offer.cuda_built = environment.built_with_cuda;
  offer.visible_gpus = static_cast<int>(environment.gpus.size());
  if (!environment.gpus.empty()) {
    offer.gpu_name = environment.gpus.front().name;
    offer.gpu_total_bytes = environment.gpus.front().memory_total_bytes;
  }
  offer.why_no_gpu = environment.status;
  return offer;
}

}  // namespace surogate::train
