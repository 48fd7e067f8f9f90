// Which backend `surogate sft` / `surogate pt` train on, decided from the configuration and what
// the machine offers, separately from probing the machine so CI (no GPU) can test every case:
//   - no CUDA or no visible GPU: the CPU backend (below); `gpus: N` (N > 1) then trains N
//     data-parallel CPU ranks per process (distributed/parallel_layout.h), which the line says;
//   - on the CUDA backend, `gpus: N` (N > 1) or `gpus: 0` with several GPUs visible trains that
//     many data-parallel GPUs (distributed/parallel_layout.h, ZeRO-1 or ZeRO-2), which the line
//     says; more GPUs than are visible is a UserError naming `gpus`, and so is `master_dtype: bf16`
//     with several GPUs (naming `master_dtype`);
//   - a CUDA build with a visible GPU: the CUDA backend with the bf16 recipe (master_dtype and
//     gradient_dtype bf16 or fp32); a `recipe` other than bf16, or an fp8 gradient_dtype, is a
//     UserError naming the option;
//   - otherwise the CPU backend (fp32), with one line saying why; master_dtype or gradient_dtype
//     other than fp32, or an offload_* option, is then a UserError naming the option
//     (check_cpu_backend_options).
//   - torch_dtype: float16 asks for fp16 training with dynamic loss scaling: on the CPU backend
//     its emulation (models/fp16_emulation.h), which the line says; on the CUDA backend the bf16
//     recipe's graph in F16 (fp16 kernels), for the dense model on one GPU with fp32 masters and
//     accumulators, adamw / adamw_8bit, no offloading and no QLoRA: any other combination is a
//     UserError naming torch_dtype's partner option (the feature-support table's rows,
//     config/feature_support.h; check_fp16_cuda_model for the model), raised before the weights load.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"
#include "config/feature_support.h"
#include "io/model_config.h"
#include "distributed/parallel_layout.h"

namespace surogate::train {

enum class TrainingBackend { Cpu, Cuda };

struct MachineOffer {
  bool cuda_built = false;
  int visible_gpus = 0;
  std::string gpu_name;        // of device 0, for the log line
  std::string why_no_gpu;      // when visible_gpus == 0
  uint64_t gpu_total_bytes = 0;  // of device 0
  int gpu_sm = 0;                // of device 0: compute capability major · 10 + minor
};

// The oldest GPU the CUDA backend trains on (compute capability · 10): its kernels are bf16
// tensor-core code. An older GPU (SM75) trains on the CPU backend, and the first line says why.
inline constexpr int kCudaBackendMinimumSm = 80;

// A CUDA build with a visible GPU the backend trains on (an unknown SM, 0, counts as usable).
bool cuda_backend_usable(const MachineOffer& machine);

struct BackendChoice {
  TrainingBackend backend = TrainingBackend::Cpu;
  std::string message;         // the line the trainer prints
};

// `placement`: this process among the processes of the run (distributed/process_world.h); the
// layout and the line then count the ranks of every process.
BackendChoice choose_training_backend(const Config& config, const MachineOffer& machine,
                                      const distributed::ProcessPlacement& placement = {});

// torch_dtype: float16 — fp16 compute copies and activations, fp32 masters, dynamic loss scaling.
bool fp16_training(const Config& config);

// The refusals below are rows of the feature-support table (config/feature_support.h); these
// functions judge the rows of one stage with what the train layer knows.

// The layout of ranks on a backend, as the feature-support table sees it.
RunShape run_shape(TrainingBackend backend, const distributed::ParallelLayout& layout);

// fp16 training on the CUDA backend with a mixture-of-experts model (its CUDA kernels are bf16
// only): a UserError naming torch_dtype. `vision_language`: `model` is a vision-language folder's text
// decoder (the Model stage's rows for such folders apply, not those for text models).
void check_fp16_cuda_model(const Config& config, const io::ModelConfig& model, bool vision_language = false);

// The CPU backend is the fp32 oracle: master_dtype / gradient_dtype other than fp32 and the
// offload_* options (they move GPU memory to the host) are a UserError naming the option (they
// are implemented on the CUDA backend).
void check_cpu_backend_options(const Config& config);

// Once the trainer knows its backend (the choice, or the caller's) and layout, before anything
// loads: the table's rows for the device the factories build (`data_parallel_device`:
// TrainerOptions::data_parallel_device; `backend_line`: why this backend, for the messages), and,
// on the CPU backend (which a caller may force), that backend's rows.
void check_device_support(const Config& config, TrainingBackend backend, const distributed::ParallelLayout& layout,
                          bool data_parallel_device, const std::string& backend_line);

// What this process can use (cuda::query_cuda_environment; safe without a driver).
MachineOffer probe_machine();

}  // namespace surogate::train
