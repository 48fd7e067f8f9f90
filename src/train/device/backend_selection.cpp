// The training backend choice; see backend_selection.h.
#include "train/device/backend_selection.h"

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/device_info.h"

namespace surogate::train {

BackendChoice choose_training_backend(const Config& config, const MachineOffer& machine) {
  if (config.gpus > 1 || (config.gpus == 0 && machine.visible_gpus > 1)) {
    fail_user("{}: gpus: {} asks for multi-GPU training, which is not implemented yet ({} GPU(s) visible); set "
              "gpus: 1", config.source_of("gpus"), config.gpus, machine.visible_gpus);
  }
  if (!machine.cuda_built || machine.visible_gpus == 0) {
    std::string why = machine.cuda_built ? machine.why_no_gpu : std::string("this surogate was built without CUDA");
    return {TrainingBackend::Cpu, fmt::format("training on the CPU backend (fp32): {}", why)};
  }
  if (config.recipe != Recipe::Bf16) {
    fail_user("{}: recipe: {} is not implemented yet on the CUDA backend; use recipe: bf16",
              config.source_of("recipe"), to_string(config.recipe));
  }
  if (config.master_dtype && *config.master_dtype != MasterDtype::Fp32) {
    fail_user("{}: master_dtype: {} is not implemented yet on the CUDA backend; the master weights are fp32",
              config.source_of("master_dtype"), to_string(*config.master_dtype));
  }
  if (config.gradient_dtype && *config.gradient_dtype != GradientDtype::Fp32) {
    fail_user("{}: gradient_dtype: {} is not implemented yet on the CUDA backend; gradients accumulate in fp32",
              config.source_of("gradient_dtype"), to_string(*config.gradient_dtype));
  }
  return {TrainingBackend::Cuda,
          fmt::format("training on the CUDA backend ({}): bf16 weights and activations, fp32 master weights, "
                      "gradient accumulation and {} state", machine.gpu_name, to_string(config.optimizer))};
}

MachineOffer probe_machine() {
  cuda::CudaEnvironment environment = cuda::query_cuda_environment();
  MachineOffer offer;
  offer.cuda_built = environment.built_with_cuda;
  offer.visible_gpus = static_cast<int>(environment.gpus.size());
  if (!environment.gpus.empty()) offer.gpu_name = environment.gpus.front().name;
  offer.why_no_gpu = environment.status;
  return offer;
}

}  // namespace surogate::train
