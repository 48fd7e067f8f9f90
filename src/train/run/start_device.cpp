// The start-up steps that fill the device: build_device and load_weights; see start_run.h.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "models/fp8_recipe.h"
#include "train/lora_targets.h"
#include "train/pipeline_plan.h"
#include "train/run/start_run.h"

namespace surogate::train {

void build_device(RunContext& run) {
  TrainingDeviceSetup setup{&run.plan, &run.registry, {}, &run.config, run.options.data_parallel_device, run.world.get()};
  if (run.options.offload_chunk_bytes) setup.offload_chunk_bytes = *run.options.offload_chunk_bytes;
  if (run.options.gradient_bucket_bytes) setup.gradient_bucket_bytes = *run.options.gradient_bucket_bytes;
  setup.pipeline = run.pipeline.get();
  for (const models::ParameterSpec& spec : run.specs) {
    if (run.quantized_weight(spec.name) == nullptr) setup.specs.push_back(spec);
  }
  if (run.lora) {
    for (const models::LoraAdapter& adapter : run.lora->adapters) {
      setup.specs.push_back(adapter.a);
      setup.specs.push_back(adapter.b);
    }
  }
  if (run.backend == TrainingBackend::Cuda) {
#if SUROGATE_WITH_CUDA
    run.device = make_cuda_training_device(setup);
#else
    fail_user("the CUDA backend was asked for, but this surogate was built without CUDA");
#endif
  } else {
    run.device = make_cpu_training_device(setup);
  }
  run.startup.end_phase("device");
  run.result.gradient_accumulator_bytes = run.device->gradient_accumulator_bytes();
}

namespace {

// The fp8_hybrid line: how many projections run in FP8, in which formats, over which layers.
std::string fp8_line(const RunContext& run) {
  const models::Fp8Options& fp8 = *run.fp8;
  const auto state = models::fp8_scaling_state(run.plan.graph);
  const char* weights_in_fp8 = !models::fp8_trained_weights(run.plan.graph).empty()
                                   ? "E4M3 copies of the trained weights made once per step, E4M3 inputs"
                               : run.qlora ? "the dequantized base and the inputs in E4M3"
                                           : "E4M3 weights and inputs";
  return fmt::format(
      "fp8_hybrid: {} projections in FP8 ({}, {} gradients; layers {}–{} of {}), delayed scaling over {} steps "
      "at {} sites",
      models::fp8_projection_count(run.plan.graph), weights_in_fp8,
      fp8.gradient_format == quant::Fp8Format::E4M3 ? "E4M3" : "E5M2", fp8.skip_first_layers,
      fp8.layers - fp8.skip_last_layers - 1, fp8.layers, fp8.amax_history, state ? state->sites : 0);
}

}  // namespace

void load_weights(RunContext& run) {
  const Config& config = run.config;
  const std::span<const WeightView> weights = run.device->weights();
  // Every base weight is loaded (or initialised) into the device's host copy, or, when the plan
  // stores it quantized, into a scratch buffer of load_base_weights' that is quantized onto the device.
  std::vector<WeightView> base_weights;
  size_t next_device_weight = 0;
  for (const models::ParameterSpec& spec : run.specs) {
    if (run.quantized_weight(spec.name) != nullptr) {
      base_weights.push_back({spec.name, spec.shape, {}});
    } else {
      base_weights.push_back(weights[next_device_weight++]);
    }
  }
  const BaseWeightSetup setup{&config, &run.model_config, run.specs, run.quantized,
                              run.qlora ? &*run.qlora : nullptr, run.backend == TrainingBackend::Cuda,
                              run.base_weight_reader()};
  for (const std::string& line : load_base_weights(setup, base_weights, *run.device)) run.message(line);
  if (run.fp8) run.message(fp8_line(run));
  if (run.lora) {
    initialize_lora(*run.lora, weights, static_cast<uint64_t>(config.data.train_seed));
    int64_t adapter_parameters = 0;
    for (const WeightView& weight : run.device->trainable()) adapter_parameters += static_cast<int64_t>(weight.values.size());
    run.message(fmt::format("LoRA: rank {}, alpha {}, dropout {} on {} ({} projections, {} trainable parameters)",
                            config.lora.lora_rank, config.lora.lora_alpha, config.lora.lora_dropout,
                            fmt::join(run.lora->options.target_modules, ", "), run.lora->adapters.size(),
                            adapter_parameters));
  }
  run.startup.end_phase("weights");
  run.device->upload();
  run.startup.end_phase("upload");
  if (config.logging.debug_memory_breakdown) {
    size_t optimizer_bytes = 0;
    for (const StateTensor& tensor : run.device->optimizer_state()) optimizer_bytes += tensor.size_bytes;
    run.message(format_run_memory_breakdown(run.plan, run.pipeline.get(), optimizer_bytes));
  }
}

}  // namespace surogate::train
