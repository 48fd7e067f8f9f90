// The training backend choice; see backend_selection.h.
#include "train/device/backend_selection.h"


#include <fmt/format.h>

#include "config/config_rules.h"
#include "config/feature_support.h"
#include "core/error.h"
#include "cuda/device_info.h"
#include "distributed/parallel_layout.h"

namespace surogate::train {

namespace {

SupportBackend support_backend(TrainingBackend backend) {
  return backend == TrainingBackend::Cuda ? SupportBackend::Cuda : SupportBackend::Cpu;
}

}  // namespace

RunShape run_shape(TrainingBackend backend, const distributed::ParallelLayout& layout) {
  RunShape shape;
  shape.backend = support_backend(backend);
  shape.world_size = layout.world_size;
  shape.sequence_size = layout.sequence_size;
  shape.pipeline_size = layout.pipeline_size;
  shape.processes = layout.processes;
  shape.layout_description = layout.describe();
  return shape;
}

void check_cpu_backend_options(const Config& config) {
  RunShape shape;
  shape.backend = SupportBackend::Cpu;
  refuse_unsupported(config, SupportStage::Backend, shape);
}

void check_device_support(const Config& config, TrainingBackend backend, const distributed::ParallelLayout& layout,
                          bool data_parallel_device, const std::string& backend_line) {
  RunShape shape = run_shape(backend, layout);
  // The device the factories build (train/device/training_device.h): the pipeline device for
  // stages, else the data-parallel one for several ranks, when asked for, or for offload_quants.
  shape.data_parallel_device =
      layout.pipeline_size == 1 && (layout.several_ranks() || data_parallel_device || config.offload.offload_quants);
  shape.backend_line = backend_line;
  refuse_unsupported(config, SupportStage::Device, shape);
  // A caller may force the CPU backend on a machine with a GPU: its rows were not judged yet.
  if (backend == TrainingBackend::Cpu) refuse_unsupported(config, SupportStage::Backend, shape);
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
    refuse_unsupported(config, SupportStage::Backend, run_shape(TrainingBackend::Cpu, layout));
    if (layout.several_ranks()) {
      why += layout.spans_processes()
                 ? fmt::format("; {} on CPU threads", layout.describe())
                 : fmt::format("; gpus: {} runs {} on CPU threads", config.parallel.gpus, layout.describe());
    }
    const char* precision = fp16_training(config)
                                ? "fp16 emulated in fp32: fp16-rounded weight copies, activations and gradients, fp32 "
                                  "masters and accumulators, dynamic loss scaling"
                                : "fp32";
    return {TrainingBackend::Cpu, fmt::format("training on the CPU backend ({}): {}", precision, why)};
  }
  const bool per_node = config.distributed.num_nodes > 1 && config.distributed.gpus_per_node > 0;
  const int64_t requested = per_node ? config.distributed.gpus_per_node : config.parallel.gpus;
  if (requested > machine.visible_gpus) {
    const char* key = per_node ? "distributed.gpus_per_node" : "gpus";
    fail_user("{}: {}: {} asks for {} GPUs, but {} {} visible; set {} to at most {} (0 uses every visible GPU)",
              config.sources.of(key), key, requested, requested, machine.visible_gpus,
              machine.visible_gpus == 1 ? "is" : "are", key, machine.visible_gpus);
  }
  const distributed::ParallelLayout layout = distributed::gpu_parallel_layout(config, machine.visible_gpus, placement);
  refuse_unsupported(config, SupportStage::Backend, run_shape(TrainingBackend::Cuda, layout));
  // qlora_fp8 (and the FP8 / FP4 modes) need SM89+ / SM100+; an unknown SM (0) is not checked.
  if (machine.gpu_sm > 0) validate_for_hardware(config, machine.gpu_sm);
  const bool fp8 = config.precision.recipe == Recipe::Fp8Hybrid;
  const bool fp16 = fp16_training(config);
  const bool bf16_master = config.precision.master_dtype == MasterDtype::Bf16;
  const bool bf16_gradients = config.precision.gradient_dtype == GradientDtype::Bf16;
  const std::string ranks =
      !layout.several_ranks() ? std::string()
      : layout.spans_processes()
          ? fmt::format("; {} processes run {}, this one on GPUs {}-{} (NCCL)", layout.processes, layout.describe(),
                        layout.first_device, layout.first_device + layout.local_ranks - 1)
          : fmt::format("; gpus: {} runs {} on GPUs 0-{} (threads of this process, NCCL)", config.parallel.gpus,
                        layout.describe(), layout.world_size - 1);
  return {TrainingBackend::Cuda,
          fmt::format("training on the CUDA backend ({}): {}, {}, {} gradient accumulation and {} state{}",
                      machine.gpu_name,
                      fp8    ? "fp8_hybrid recipe (FP8 projections, bf16 elsewhere)"
                      : fp16 ? "fp16 weights and activations with dynamic loss scaling"
                             : "bf16 weights and activations",
                      bf16_master ? "bf16 master weights (stochastic rounding, no fp32 copy)" : "fp32 master weights",
                      bf16_gradients ? "bf16" : "fp32", to_string(config.optimizer.algorithm), ranks)};
}

// The CUDA kernels' matrix products are bf16 tensor-core instructions, SM80+ (a build for SM75
// compiles them as traps: cuda/kernels/attention_tiles.cuh).
bool cuda_backend_usable(const MachineOffer& machine) {
  return machine.cuda_built && machine.visible_gpus > 0 && (machine.gpu_sm == 0 || machine.gpu_sm >= kCudaBackendMinimumSm);
}

bool fp16_training(const Config& config) { return config.model.torch_dtype == TorchDtype::Float16; }

void check_fp16_cuda_model(const Config& config, const io::ModelConfig& model, bool vision_language) {
  RunShape shape;
  shape.backend = SupportBackend::Cuda;
  shape.vision_language = vision_language;  // `model` is then the folder's text decoder
  shape.moe = model.moe.has_value();
  shape.model_type = io::architecture_model_type(model.architecture);
  refuse_unsupported(config, SupportStage::Model, shape);
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
