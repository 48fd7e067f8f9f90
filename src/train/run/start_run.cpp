// The first start-up steps (connect, backend, model, data, plan) and start_run; see start_run.h.
#include "train/run/start_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "data/packing.h"
#include "data/prompt_sharing.h"
#include "distributed/process_world.h"
#include "models/defined_weights.h"
#include "models/model_spec.h"
#include "runtime/attention_settings.h"
#include "train/memory_prediction.h"
#include "train/process_run.h"
#include "train/run_folder_lock.h"
#include "train/training_plan.h"

namespace surogate::train {

RunContext::RunContext(const Config& config, const TrainerOptions& options)
    : config(config),
      options(options),
      world(connect_processes(config.distributed, config.sources, options.processes)),
      display(options.live_progress.value_or(ProgressDisplay::stdout_is_terminal()), !world->leads()),
      registry(make_training_registry()) {
  run_name = config.run.run_name.value_or(options.default_run_name);
  if (world->leads() && !options.output_folders_locked) folder_locks = lock_run_folders(config.run, config.checkpoint);
}

ChosenBackend choose_backend(RunContext& run) {
  const Config& config = run.config;
  const distributed::ProcessPlacement placement = distributed::process_placement(run.world.get());
  ChosenBackend chosen{probe_machine(), {}};
  const BackendChoice choice = choose_training_backend(config, chosen.machine, placement);
  run.backend = run.options.backend.value_or(choice.backend);
  const bool chosen_by_caller = run.backend != choice.backend;
  // Every process drives the same number of ranks (the global rank of each follows from it).
  chosen.ranks = run.backend == TrainingBackend::Cuda
                     ? distributed::gpu_parallel_layout(config, chosen.machine.visible_gpus, placement)
                     : distributed::cpu_parallel_layout(config, placement);
  run.world->check_same("the data-parallel ranks each process drives (gpus, or distributed.gpus_per_node)",
                        chosen.ranks.local_ranks);
  // After check_same: every process is connected, so each one refuses with the message.
  check_device_support(config, run.backend, chosen.ranks, run.options.data_parallel_device,
                       chosen_by_caller ? std::string("chosen by the caller") : choice.message);
  run.message(chosen_by_caller ? fmt::format("training on the {} backend (chosen by the caller)",
                                             run.backend == TrainingBackend::Cuda ? "CUDA" : "CPU")
                               : choice.message);
  return chosen;
}

void read_model(RunContext& run) {
  run.vision = vision_stage(run.config);
  if (run.vision) {
    run.model_config = run.vision->text();
    run.specs = run.vision->specs();
  } else {
    run.model_config =
        models::load_model_config(run.config.model.name_or_path, model_definition(run.config.model, run.config.sources));
    run.specs = models::parameter_specs(run.model_config);
  }
  if (run.config.lora.enabled) {
    run.lora = lora_setup(run.config.lora, run.config.sources, run.model_config, run.backend, run.vision.get());
  }
}

namespace {

// surogate dpo with loss.share_prompts: the plan's rows are the longest pair of the data with its
// prompt once (data/prompt_sharing.h), rounded up so that a micro-batch holds a multiple of 16
// tokens (FP8 products take 16-row tiles).
void share_pair_prompts(RunContext& run) {
  const int64_t longest = std::max<int64_t>(
      {int64_t{1}, data::longest_shared_row(run.cache->train()), data::longest_shared_row(run.cache->eval())});
  const int64_t multiple = 16 / std::gcd<int64_t>(run.batch, 16);
  const int64_t shared = std::min(run.sequence, (longest + multiple - 1) / multiple * multiple);
  run.message(fmt::format("preference pairs share their prompts: rows of {} tokens instead of {} (loss.share_prompts)",
                          shared, run.sequence));
  run.sequence = shared;
  run.loader->share_prompts(shared);
}

}  // namespace

void load_data(RunContext& run) {
  const Config& config = run.config;
  if (config.grpo.enabled) return load_prompts(run);  // surogate grpo: prompts, not documents
  data::DataSettings data_settings = data::data_settings_from_config(config);
  run.startup.end_phase("model config");
  run.cache = load_process_token_cache(config.distributed, run.run_name, data_settings, *run.world,
                                       [&run](const std::string& line) { run.message(line); });
  run.startup.end_phase("data");
  run.pad_id = run.cache->report().value("pad_id", 0);
  // cuDNN's packed-documents attention is laid out before any batch is seen: for at most this many
  // segments per row (runtime/cuda_attention_path.h); the evaluator's rows count too.
  runtime::AttentionSettings attention = runtime::attention_settings();
  attention.segments_per_row = std::max<int64_t>({int64_t{1}, data::most_segments_per_row(run.cache->train()),
                                                  data::most_segments_per_row(run.cache->eval())});
  runtime::set_attention_settings(attention);
  run.attention_span = data::attention_span(run.cache->train());
  run.batch = config.schedule.per_device_train_batch_size;
  run.sequence = static_cast<int64_t>(data_settings.sequence_len);
  if (run.cache->train().rows() == 0) {
    fail_user("{}: the training datasets produced no rows after formatting and length checks; see the data report "
              "above", config.sources.of("datasets"));
  }
  // KTO keeps its rows in order: each micro-batch is the chunk its KL completions were built in (data/kto_rows.h).
  const bool kto = config.loss.preference && config.loss.type == "kto";
  run.loader = std::make_unique<data::DataLoader>(run.cache, run.cache->train(), run.batch,
                                                  static_cast<uint64_t>(config.data.train_seed), run.pad_id, !kto);
  run.batches_per_epoch = static_cast<int64_t>(run.loader->batches_per_epoch());
  if (config.loss.preference && config.loss.share_prompts) share_pair_prompts(run);
  if (run.vision) run.vision->set_plan_patches(run.cache->train(), run.cache->eval(), run.batch);
}

// Graph → plan → backend; the parameters and gradients live in the backend's regions.
void plan_model(RunContext& run, const ChosenBackend& chosen) {
  const Config& config = run.config;
  const int first_gpu = chosen.ranks.first_device;
  TrainingPlan planned = plan_training(config, run.model_config, run.registry, run.lora ? &*run.lora : nullptr,
                                       run.backend, run.batch, run.sequence,
                                       device_memory(run.backend, chosen.machine, std::nullopt, first_gpu),
                                       run.options.recompute, &chosen.ranks, run.vision.get(), run.attention_span);
  if (!planned.fits()) {
    // Before any weight is loaded or device memory taken: what it needs, and what would fit.
    fail_user("the run does not fit {}; nothing was loaded. The prediction (as `--dry-run` prints it):\n{}",
              planned.device.name, format_memory_prediction(predict_training_memory(config, std::nullopt)));
  }
  run.plan = std::move(planned.plan);
  run.pipeline = std::move(planned.pipeline);
  run.message(planned.message);
  run.startup.end_phase("plan");
  run.inputs = std::make_unique<BatchInputs>(run.plan);
  if (run.vision) run.inputs->extend(run.vision->batch_inputs(run.plan));
  if (auto seed = run.plan.graph.find_tensor(models::kDropoutSeed)) run.dropout_seed = *seed;
  // QLoRA: the weights the plan stores quantized reach the device through store_quantized().
  run.qlora = qlora_options(config.quant);
  run.fp8 = fp8_options(config, run.model_config);
  run.quantized = models::quantized_weights(run.plan.graph);
}

void prepare_objective(RunContext& run) {
  run.objective = make_training_objective(run.config);
  if (!run.objective) return;
  ObjectiveContext context{&run.plan, run.device.get(), run.inputs.get(), run.cache, run.batch, run.pad_id,
                           run.state.step > 0, [&run](const std::string& line) { run.message(line); },
                           run.state.objective, run.lora ? &*run.lora : nullptr, run.backend == TrainingBackend::Cuda,
                           [&run](const std::string& type, nlohmann::json record) { run.log(type, std::move(record)); },
                           run.world.get()};
  run.objective->prepare(context);
  run.startup.end_phase("reference");
}

std::unique_ptr<RunContext> start_run(const Config& config, const TrainerOptions& options) {
  auto run = std::make_unique<RunContext>(config, options);
  const ChosenBackend chosen = choose_backend(*run);
  read_model(*run);
  load_data(*run);
  plan_model(*run, chosen);
  build_device(*run);
  load_weights(*run);
  schedule_steps(*run);
  make_evaluator(*run);
  open_checkpoints(*run);
  open_records(*run);
  prepare_objective(*run);
  return run;
}

}  // namespace surogate::train
