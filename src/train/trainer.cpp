// The training job; see trainer.h. Setup (model, plan, data, optimizer, schedule, resume) is done
// once in Run's constructor; run() is the step loop.
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "compiler/execution_plan.h"
#include "core/error.h"
#include "data/data_loader.h"
#include "data/pipeline.h"
#include "distributed/parallel_layout.h"
#include "distributed/rank_failure.h"
#include "io/model_config.h"
#include "models/model_spec.h"
#include "train/base_weights.h"
#include "train/batch_inputs.h"
#include "train/checkpoint_io.h"
#include "train/checkpoint_store.h"
#include "train/checkpoint_writer.h"
#include "train/device/backend_selection.h"
#include "train/device/training_device.h"
#include "train/evaluator.h"
#include "train/observe/gpu_utilization.h"
#include "train/observe/html_report.h"
#include "train/lora_targets.h"
#include "train/lr_schedule.h"
#include "models/lora.h"
#include "train/observe/metrics_log.h"
#include "train/model_outputs.h"
#include "train/model_weights.h"
#include "train/process_run.h"
#include "train/observe/progress_display.h"
#include "train/run_folder_lock.h"
#include "train/observe/run_records.h"
#include "train/observe/run_summary.h"
#include "train/step_guard.h"
#include "train/observe/time_breakdown.h"
#include "train/quantized_weights.h"
#include "train/memory_prediction.h"
#include "train/observe/tracker_feed.h"
#include "train/training_plan.h"

namespace surogate::train {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

class Run {
public:
  Run(const Config& config, const TrainerOptions& options);
  TrainingResult run();

private:
  void evaluate(bool final_eval);
  void save_checkpoint();
  // Logs a checkpoint the writer thread finished (nothing when none).
  void log_saved(const std::optional<SavedCheckpoint>& saved);
  void resume();
  void log(const std::string& type, nlohmann::json record) {
    if (log_) log_->write(type, std::move(record));
  }
  void write_outputs();
  const models::QuantizedWeight* quantized_weight(const std::string& name) const {
    return find_quantized(quantized_, name);
  }
  void stop_early();
  void report_time_breakdown();
  [[noreturn]] void fail_diverged(const StepVerdict& verdict);

  // First, so released last: the folders stay locked until every write is done.
  std::vector<io::FolderLock> folder_locks_;
  const Config& config_;
  TrainerOptions options_;
  // The processes of the run (one unless a launcher or Ray started several): rank 0's process
  // writes the log, checkpoints and outputs and evaluates; the others only train.
  std::unique_ptr<distributed::ProcessWorld> world_;
  ProgressDisplay display_;
  io::ModelConfig model_config_;
  std::vector<models::ParameterSpec> specs_;  // the base model's parameters
  std::optional<models::LoraSetup> lora_;
  std::optional<models::QloraOptions> qlora_;             // qlora_bnb, qlora_fp8, qlora_fp4
  std::optional<models::Fp8Options> fp8_;                 // recipe fp8_hybrid
  std::vector<models::QuantizedWeight> quantized_;        // the base weights the plan stores quantized
  graph::TensorId dropout_seed_ = graph::kNoTensor;
  int32_t dropout_seed_value_ = 0;
  graph::OpRegistry registry_;
  compiler::ExecutionPlan plan_;
  std::shared_ptr<const PipelinePlan> pipeline_;  // pipeline_parallel_size > 1: the stages' plans
  TrainingBackend backend_kind_ = TrainingBackend::Cpu;
  std::unique_ptr<TrainingDevice> device_;   // backend, parameters, gradients, optimizer
  std::shared_ptr<data::TokenCache> cache_;
  std::unique_ptr<data::DataLoader> loader_;
  std::unique_ptr<Evaluator> evaluator_;
  std::unique_ptr<BatchInputs> inputs_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<CheckpointStore> store_;
  std::unique_ptr<MetricsLog> log_;
  std::unique_ptr<TrackerFeed> trackers_;         // report_to
  std::unique_ptr<GpuUtilizationLog> gpu_log_;    // log_gpu_util
  TrainingState state_;
  TrainingResult result_;
  int64_t batches_per_epoch_ = 0;
  int64_t last_saved_step_ = -1;
  std::string run_name_;
  // The window's micro-batches this process trains, and each one's index in the window.
  std::vector<data::PackedBatch> window_;
  std::vector<int64_t> window_indices_;
  TimeBreakdown time_breakdown_;  // debug_time_breakdown
  // Start-up: seconds per phase from the constructor's start to the first step (logged as
  // "startup" and printed in one line; bench/ reports it).
  Clock::time_point constructed_ = Clock::now();
  std::vector<std::pair<std::string, double>> startup_seconds_;
  Clock::time_point phase_start_ = Clock::now();
  void end_phase(const std::string& name) {
    startup_seconds_.emplace_back(name, seconds_since(phase_start_));
    phase_start_ = Clock::now();
  }
  std::unique_ptr<StepGuard> guard_;  // skipped steps, fp16 loss scaling
  std::vector<std::string> resume_warnings_;  // checkpoints skipped on resume, logged once the log is open
  // Last: destroyed first, so a write in flight finishes while the store and device still exist.
  std::unique_ptr<CheckpointWriter> writer_;
};

Run::Run(const Config& config, const TrainerOptions& options)
    : config_(config),
      options_(options),
      world_(connect_processes(config, options.processes)),
      display_(options.live_progress.value_or(ProgressDisplay::stdout_is_terminal()), !world_->leads()),
      registry_(make_training_registry()) {
  run_name_ = config.run_name.value_or(options.default_run_name);
  if (world_->leads() && !options.output_folders_locked) folder_locks_ = lock_run_folders(config);
  const distributed::ProcessPlacement placement = distributed::process_placement(world_.get());
  const MachineOffer machine = probe_machine();
  BackendChoice choice = choose_training_backend(config, machine, placement);
  backend_kind_ = options.backend.value_or(choice.backend);
  if (config.debug_time_breakdown && backend_kind_ != TrainingBackend::Cuda) {
    // Per-op times come from CUDA events around each kernel step; the CPU backend has none, and a
    // debug option that silently prints nothing would look like it worked.
    fail_user("{}: debug_time_breakdown needs the CUDA backend (it times each op's kernels with CUDA events), but "
              "this run would train on the CPU backend ({}). Remove the option, or run on a machine with a GPU",
              config.source_of("debug_time_breakdown"),
              backend_kind_ == choice.backend ? choice.message : std::string("chosen by the caller"));
  }
  display_.message(backend_kind_ == choice.backend
                       ? choice.message
                       : fmt::format("training on the {} backend (chosen by the caller)",
                                     backend_kind_ == TrainingBackend::Cuda ? "CUDA" : "CPU"));
  // Every process drives the same number of ranks (the global rank of each follows from it).
  const distributed::ParallelLayout ranks =
      backend_kind_ == TrainingBackend::Cuda ? distributed::gpu_parallel_layout(config, machine.visible_gpus, placement)
                                             : distributed::cpu_parallel_layout(config, placement);
  world_->check_same("the data-parallel ranks each process drives (gpus, or distributed.gpus_per_node)",
                     ranks.local_ranks);
  model_config_ = io::load_model_config(config.model);
  specs_ = models::parameter_specs(model_config_);
  if (config.lora) lora_ = lora_setup(config, model_config_, backend_kind_);

  // Data: tokenized and packed once into the token cache, memory-mapped here.
  data::DataSettings data_settings = data::data_settings_from_config(config);
  end_phase("model config");
  cache_ = load_process_token_cache(config, run_name_, data_settings, *world_,
                                   [this](const std::string& line) { display_.message(line); });
  end_phase("data");
  const auto pad_id = cache_->report().value("pad_id", 0);
  const int64_t batch = config.per_device_train_batch_size, sequence = static_cast<int64_t>(data_settings.sequence_len);
  if (cache_->train().rows() == 0) {
    fail_user("{}: the training datasets produced no rows after formatting and length checks; see the data report "
              "above", config.source_of("datasets"));
  }
  loader_ = std::make_unique<data::DataLoader>(cache_, cache_->train(), batch, static_cast<uint64_t>(config.train_seed),
                                               pad_id);
  batches_per_epoch_ = static_cast<int64_t>(loader_->batches_per_epoch());

  // Model: graph → plan → backend; the parameters and gradients live in the backend's regions.
  const int first_gpu = ranks.first_device;
  TrainingPlan planned = plan_training(config, model_config_, registry_, lora_ ? &*lora_ : nullptr, backend_kind_, batch,
                                       sequence, device_memory(backend_kind_, machine, std::nullopt, first_gpu),
                                       options.recompute, &ranks);
  if (!planned.fits()) {
    // Before any weight is loaded or device memory taken: what it needs, and what would fit.
    fail_user("the run does not fit {}; nothing was loaded. The prediction (as `--dry-run` prints it):\n{}",
              planned.device.name, format_memory_prediction(predict_training_memory(config, std::nullopt)));
  }
  plan_ = std::move(planned.plan);
  pipeline_ = std::move(planned.pipeline);
  display_.message(planned.message);
  end_phase("plan");
  inputs_ = std::make_unique<BatchInputs>(plan_);
  if (auto seed = plan_.graph.find_tensor(models::kDropoutSeed)) dropout_seed_ = *seed;
  // QLoRA: the weights the plan stores quantized reach the device through store_quantized().
  qlora_ = qlora_options(config);
  fp8_ = fp8_options(config, model_config_);
  quantized_ = models::quantized_weights(plan_.graph);
  TrainingDeviceSetup device_setup{&plan_, &registry_, {}, &config, options.data_parallel_device, world_.get()};
  if (options.offload_chunk_bytes) device_setup.offload_chunk_bytes = *options.offload_chunk_bytes;
  if (options.gradient_bucket_bytes) device_setup.gradient_bucket_bytes = *options.gradient_bucket_bytes;
  device_setup.pipeline = pipeline_.get();
  for (const models::ParameterSpec& spec : specs_) {
    if (quantized_weight(spec.name) == nullptr) device_setup.specs.push_back(spec);
  }
  if (lora_) {
    for (const models::LoraAdapter& adapter : lora_->adapters) {
      device_setup.specs.push_back(adapter.a);
      device_setup.specs.push_back(adapter.b);
    }
  }
  if (backend_kind_ == TrainingBackend::Cuda) {
#if SUROGATE_WITH_CUDA
    device_ = make_cuda_training_device(device_setup);
#else
    fail_user("the CUDA backend was asked for, but this surogate was built without CUDA");
#endif
  } else {
    device_ = make_cpu_training_device(device_setup);
  }
  end_phase("device");
  result_.gradient_accumulator_bytes = device_->gradient_accumulator_bytes();
  const std::span<const WeightView> weights = device_->weights();
  // Every base weight is loaded (or initialised) into the device's host copy, or, when the plan
  // stores it quantized, into one scratch buffer that is quantized onto the device at once.
  std::vector<WeightView> base_weights;
  std::vector<float> scratch;
  for (const models::QuantizedWeight& weight : quantized_) {
    scratch.resize(std::max(scratch.size(), static_cast<size_t>(weight.numel())));
  }
  size_t next_device_weight = 0;
  for (const models::ParameterSpec& spec : specs_) {
    if (quantized_weight(spec.name) != nullptr) {
      base_weights.push_back({spec.name, spec.shape, std::span<float>(scratch).first(graph::shape_numel(spec.shape))});
    } else {
      base_weights.push_back(weights[next_device_weight++]);
    }
  }
  for (const std::string& line : load_base_weights({&config, &model_config_, specs_, quantized_, qlora_ ? &*qlora_ : nullptr,
                                                     backend_kind_ == TrainingBackend::Cuda},
                                                    base_weights, *device_)) {
    display_.message(line);
  }
  if (fp8_) {
    const auto state = models::fp8_scaling_state(plan_.graph);
    const char* weights_in_fp8 = !models::fp8_trained_weights(plan_.graph).empty()
                                     ? "E4M3 copies of the trained weights made once per step, E4M3 inputs"
                                 : qlora_ ? "the dequantized base and the inputs in E4M3"
                                          : "E4M3 weights and inputs";
    display_.message(fmt::format(
        "fp8_hybrid: {} projections in FP8 ({}, {} gradients; layers {}–{} of {}), delayed scaling over {} steps "
        "at {} sites",
        models::fp8_projection_count(plan_.graph), weights_in_fp8, fp8_->gradient_format == quant::Fp8Format::E4M3 ? "E4M3" : "E5M2",
        fp8_->skip_first_layers, fp8_->layers - fp8_->skip_last_layers - 1, fp8_->layers, fp8_->amax_history,
        state ? state->sites : 0));
  }
  if (lora_) {
    initialize_lora(*lora_, weights, static_cast<uint64_t>(config.train_seed));
    int64_t adapter_parameters = 0;
    for (const WeightView& weight : device_->trainable()) adapter_parameters += static_cast<int64_t>(weight.values.size());
    display_.message(fmt::format("LoRA: rank {}, alpha {}, dropout {} on {} ({} projections, {} trainable parameters)",
                                 config.lora_rank, config.lora_alpha, config.lora_dropout,
                                 fmt::join(lora_->options.target_modules, ", "), lora_->adapters.size(), adapter_parameters));
  }
  end_phase("weights");
  device_->upload();
  end_phase("upload");
  if (config.debug_memory_breakdown) {
    size_t optimizer_bytes = 0;
    for (const StateTensor& tensor : device_->optimizer_state()) optimizer_bytes += tensor.size_bytes;
    display_.message(format_run_memory_breakdown(plan_, pipeline_.get(), optimizer_bytes));
  }

  // Steps and schedule.
  const int64_t accumulation = std::max<int64_t>(1, config.gradient_accumulation_steps);
  // One step reads accumulation micro-batches per data-parallel rank (effective batch = batch × accumulation × ranks).
  const int64_t steps_per_epoch = std::max<int64_t>(1, batches_per_epoch_ / (accumulation * device_->data_parallel_ranks()));
  state_.total_steps = config.max_steps > 0 ? config.max_steps : config.num_epochs * steps_per_epoch;
  if (state_.total_steps <= 0) fail_user("{}: the run has no steps; set num_epochs or max_steps", config.source_of("num_epochs"));
  const LrScheduleSettings schedule = lr_schedule_settings(config, state_.total_steps);
  schedule_ = std::make_unique<LrSchedule>(schedule);
  state_.train_seed = static_cast<uint64_t>(config.train_seed);
  state_.schedule = {{"type", std::string(to_string(config.lr_scheduler_type))}, {"peak", schedule.peak_learning_rate},
                     {"total_steps", schedule.total_steps}, {"warmup_steps", schedule.warmup_steps},
                     {"cooldown_steps", schedule.cooldown_steps}, {"final_lr_fraction", schedule.final_lr_fraction}};

  if (cache_->eval().rows() > 0 && world_->leads()) {
    evaluator_ = device_->make_evaluator({&model_config_, &registry_, batch, sequence, config.lmhead_chunks, cache_,
                                          static_cast<uint64_t>(config.eval_seed), pad_id, lora_ ? &*lora_ : nullptr,
                                          qlora_ ? &*qlora_ : nullptr, fp8_ ? &*fp8_ : nullptr, fp16_training(config),
                                          config.use_fused_rope, model_definition(config)});
  }
  guard_ = std::make_unique<StepGuard>(config, fp16_training(config), state_);
  store_ = std::make_unique<CheckpointStore>(config.checkpoint_dir.value_or(config.output_dir),
                                             static_cast<int>(config.save_total_limit));
  writer_ = std::make_unique<CheckpointWriter>(*store_, options.faults.checkpoint_write_delay);
  if (config.resume_from_checkpoint) resume();
  result_.first_step = state_.step;
  if (world_->leads()) {
    RunRecords records = open_run_records(
        config, run_name_, state_.step > 0, options.on_record,
        backend_kind_ == TrainingBackend::Cuda ? static_cast<int>(device_->data_parallel_ranks()) : 0,
        [this](const std::string& line) { display_.message(line); });
    log_ = std::move(records.log);
    trackers_ = std::move(records.trackers);
    gpu_log_ = std::move(records.gpu_log);
    result_.log_file = log_->path();
  }
  log("config", {{"run_name", run_name_}, {"command", options.pretraining ? "pt" : "sft"},
                  {"model", config.model}, {"total_steps", state_.total_steps}, {"start_step", state_.step},
                  {"batch_size", batch}, {"sequence_len", sequence}, {"gradient_accumulation_steps", accumulation},
                  {"data_parallel_ranks", device_->data_parallel_ranks()},
                  {"batches_per_epoch", batches_per_epoch_}, {"parameters", models::parameter_count(specs_)}});
  for (const std::string& warning : resume_warnings_) log("warning", {{"what", warning}});
  for (const RestartRecord& restart : options.restarts) {
    display_.message(fmt::format("restart {} of at most {} after the previous attempt ended: {}; {}", restart.attempt,
                                 config.max_restarts, restart.reason,
                                 result_.first_step > 0 ? fmt::format("resumed at step {}", result_.first_step)
                                                        : std::string("started again from step 0")));
  }
}

// The newest checkpoint whose files match their manifest; damaged or half-written ones are skipped
// with a warning naming them.
void Run::resume() {
  std::optional<ResumedRun> resumed =
      resume_latest_checkpoint(*world_, *store_, *device_, [this](const std::string& warning) {
        display_.message("warning: " + warning);
        resume_warnings_.push_back(warning);
      });
  if (!resumed) {
    display_.message("resume_from_checkpoint: no checkpoint that verifies yet; starting from step 0");
    return;
  }
  resumed->state.total_steps = state_.total_steps;
  resumed->state.schedule = state_.schedule;
  state_ = std::move(resumed->state);
  guard_->resume(state_);
  loader_->seek(state_.loader);
  last_saved_step_ = state_.step;
  if (resumed->folder) result_.checkpoint = *resumed->folder;
  if (resumed->folder) display_.message(fmt::format("resumed from {} (step {})", resumed->folder->string(), state_.step));
}

void Run::fail_diverged(const StepVerdict& verdict) {
  display_.finish();
  log_saved(writer_->wait());  // the checkpoint in flight is good: finish it before naming the last one
  std::string last = store_->latest() ? store_->latest()->string() : std::string("none written yet");
  log("error", {{"step", state_.step}, {"what", verdict.nonfinite.value_or("loss")},
                {"consecutive_nonfinite_steps", state_.consecutive_nonfinite_steps}});
  throw TrainingDiverged(guard_->divergence(verdict, state_, last));
}

// Rank 0's process evaluates (the others have no evaluator and wait for it).
void Run::evaluate(bool final_eval) {
  if (cache_->eval().rows() > 0) device_->before_evaluation();  // every process: it may be collective
  if (evaluator_) {
    EvalResult eval = evaluator_->run();
    nlohmann::json record{{"step", state_.step}, {"eval_loss", eval.loss}, {"eval_accuracy", eval.accuracy},
                          {"eval_tokens", eval.tokens}, {"final", final_eval}};
    state_.eval_history.push_back(record);
    log("eval", record);
    if (!result_.initial_eval_loss) result_.initial_eval_loss = eval.loss;
    result_.eval_loss = eval.loss;
    result_.eval_accuracy = eval.accuracy;
    display_.message(fmt::format("eval @ step {}: loss {:.4f} | token accuracy {:.1f}% ({} tokens)", state_.step,
                                 eval.loss, 100.0 * eval.accuracy, eval.tokens));
  }
  wait_for_rank_zero(*world_);
}

// The step's state is copied off the device (on the CPU, copied in memory) and written by the
// writer thread while training goes on; a previous write still in flight is waited for first.
// Every process takes part in the download (rank 0 gathers every process's optimizer shards);
// rank 0's process writes.
void Run::save_checkpoint() {
  const Clock::time_point start = Clock::now();
  log_saved(writer_->wait());
  CheckpointSnapshot snapshot = take_checkpoint_snapshot(*device_, state_, world_->leads());
  snapshot.blocked_seconds = seconds_since(start);
  if (world_->leads()) writer_->start(std::move(snapshot));
  last_saved_step_ = state_.step;
  wait_for_rank_zero(*world_);
}

void Run::log_saved(const std::optional<SavedCheckpoint>& saved) {
  if (!saved) return;
  result_.checkpoint = saved->path;
  log("checkpoint", {{"step", saved->step}, {"path", saved->path.string()}, {"bytes", saved->bytes},
                     {"blocked_seconds", saved->blocked_seconds}, {"write_seconds", saved->write_seconds}});
}

// Full fine-tuning / pt: the HF model folder. LoRA: the PEFT adapter, and with merge_adapter the
// merged HF model folder in output_dir/merged (a separate folder: transformers treats a folder
// holding adapter_config.json as an adapter).
void Run::write_outputs() {
  log_saved(writer_->wait());  // download() writes the host copies a checkpoint in flight reads
  device_->download();
  const std::span<const WeightView> weights = device_->weights();
  if (!lora_) {
    save_hf_model(config_.output_dir, model_config_, config_.model, specs_, weights.first(specs_.size()));
    return;
  }
  LoraSettings settings{static_cast<int>(config_.lora_rank), static_cast<int>(config_.lora_alpha), config_.lora_dropout,
                        lora_->options.target_modules};
  save_peft_output(config_.output_dir, config_.model, lora_->adapters, weights,
                   peft_adapter_config(settings, config_.model));
  if (config_.merge_adapter) {
    const fs::path merged = merged_model_dir(config_.output_dir);
    std::vector<WeightView> merged_views;
    std::vector<std::vector<float>> merged_values =
        merge_into_base(config_, specs_, *lora_, weights, device_->trainable(), !quantized_.empty());
    for (size_t i = 0; i < specs_.size(); ++i) merged_views.push_back({specs_[i].name, specs_[i].shape, merged_values[i]});
    save_hf_model(merged, model_config_, config_.model, specs_, merged_views);
    display_.message(fmt::format("merged model written to {}", merged.string()));
  }
}

TrainingResult Run::run() {
  const Clock::time_point start = Clock::now();
  const int64_t accumulation = std::max<int64_t>(1, config_.gradient_accumulation_steps);
  end_phase("setup");
  if (state_.step == 0) {
    evaluate(false);
    end_phase("first eval");
  }
  StartupSummary startup = startup_summary(startup_seconds_, seconds_since(constructed_));
  log("startup", std::move(startup.record));
  display_.message(startup.line);
  const int64_t window_size = accumulation * device_->data_parallel_ranks();
  for (int64_t index = 0; index < window_size; ++index) {
    if (device_->takes_micro_batch(index)) window_indices_.push_back(index);
  }
  window_.resize(window_indices_.size());
  std::vector<MicroBatchTotals> taken(window_.size());
  double step_seconds_total = 0.0;
  int64_t steps_timed = 0;
  while (state_.step < state_.total_steps) {
    const Clock::time_point step_start = Clock::now();
    // This process reads its ranks' micro-batches of the window and skips the others'.
    for (int64_t index = 0, next = 0; index < window_size; ++index) {
      if (next == static_cast<int64_t>(window_indices_.size()) || window_indices_[static_cast<size_t>(next)] != index) {
        loader_->skip();
        continue;
      }
      data::PackedBatch& batch = window_[static_cast<size_t>(next)];
      batch = loader_->next();
      taken[static_cast<size_t>(next++)] = {batch.loss_weight_sum, batch.num_loss_tokens, batch.num_tokens};
    }
    // Σ token weights of the whole window (= loss tokens unless loss_scale weighs tokens).
    const MicroBatchTotals totals = device_->window_totals(taken);
    const int64_t loss_tokens = totals.loss_tokens, tokens = totals.tokens;
    // The loss is the window's weighted mean Σ w·ce / Σ w (the plain token mean when unweighted);
    // fp16: times the loss scale, so every gradient is that much larger (undone by the update).
    const float scale =
        totals.loss_weight > 0.0 ? static_cast<float>(guard_->loss_scale() / totals.loss_weight) : 0.0f;
    for (size_t micro = 0; micro < window_.size(); ++micro) {
      std::vector<runtime::InputBinding> bindings = inputs_->bind(window_[micro], scale);
      if (dropout_seed_ != graph::kNoTensor) {
        dropout_seed_value_ = dropout_seed(state_.train_seed, state_.step, window_indices_[micro]);
        bindings.push_back({dropout_seed_, std::as_bytes(std::span<const int32_t>(&dropout_seed_value_, 1))});
      }
      device_->accumulate(bindings);
    }
    const StepMetrics metrics = device_->measure();
    if (config_.debug_time_breakdown) time_breakdown_.add(device_->time_breakdown());  // measure() waited
    const double learning_rate = schedule_->learning_rate(state_.step);
    nlohmann::json record;
    const StepVerdict verdict =
        guard_->judge(injected_loss(options_.faults, state_.step + 1, metrics.loss), metrics.grad_norm, state_, record);
    const double loss = verdict.loss, grad_norm = verdict.grad_norm;
    if (verdict.apply) {
      device_->update({state_.step, learning_rate, config_.weight_decay, verdict.gradient_scale});
    } else {
      device_->skip_update();
    }
    ++state_.step;
    state_.loader = loader_->position();
    if (auto line = guard_->message(verdict, state_)) display_.message(*line);

    const double seconds = seconds_since(step_start);
    step_seconds_total += seconds;
    ++steps_timed;
    const double epoch = static_cast<double>(state_.loader.epoch) +
                         static_cast<double>(state_.loader.index) / static_cast<double>(std::max<int64_t>(1, batches_per_epoch_));
    record.update({{"step", state_.step}, {"epoch", epoch}, {"loss", loss}, {"lr", learning_rate},
                   {"grad_norm", grad_norm}, {"tokens", tokens}, {"loss_tokens", loss_tokens},
                   {"tokens_per_second", tokens / std::max(seconds, 1e-9)}, {"step_seconds", seconds}});
    if (metrics.router_aux_loss) {  // MoE: the mean of the micro-batches' load-balancing losses
      record["router_aux_loss"] = *metrics.router_aux_loss / static_cast<double>(window_size);  // every rank's
    }
    state_.history.push_back(record);
    log("step", record);
    if (guard_->diverged(state_)) fail_diverged(verdict);
    log_saved(writer_->poll());
    if (gpu_log_ && gpu_log_->due(state_.step)) {  // rank 0's process only
      nlohmann::json sample = gpu_log_->sample(state_.step);
      state_.gpu_history.push_back(sample);
      log("gpu", sample);
    }
    result_.step_losses.push_back(loss);
    if (!options_.quiet) {
      display_.step({state_.step, state_.total_steps, epoch, loss, learning_rate, grad_norm,
                     tokens / std::max(seconds, 1e-9),
                     step_seconds_total / static_cast<double>(steps_timed) * static_cast<double>(state_.total_steps - state_.step)});
    }
    if (config_.eval_steps > 0 && state_.step % config_.eval_steps == 0 && state_.step < state_.total_steps) evaluate(false);
    if (config_.save_steps > 0 && state_.step % config_.save_steps == 0) save_checkpoint();
    inject_faults_after_step(options_.faults, state_.step);
    if (options_.stop_after_step && state_.step == *options_.stop_after_step) {
      display_.finish();
      log_saved(writer_->wait());
      report_time_breakdown();
      result_.steps = state_.step;
      result_.seconds = seconds_since(start);
      return result_;
    }
    if (options_.stop_requested && state_.step < state_.total_steps && options_.stop_requested()) {
      stop_early();
      result_.seconds = seconds_since(start);
      return result_;
    }
  }
  display_.finish();
  evaluate(true);
  if (last_saved_step_ != state_.step) save_checkpoint();
  result_.steps = state_.step;
  result_.skipped_steps = state_.skipped_steps;
  if (!world_->leads()) {
    wait_for_rank_zero(*world_);
    result_.seconds = seconds_since(start);
    return result_;
  }
  write_outputs();
  log_saved(writer_->wait());
  result_.seconds = seconds_since(start);
  const SummaryRows rows = run_summary_rows({&config_, &state_, &result_, guard_->summary_rows(state_), options_.restarts,
                                             model_config_.vocab_size, lora_.has_value(), run_name_});
  result_.report_file = fs::path(config_.output_dir) / fmt::format("report-{}.html", run_name_);
  write_html_report(result_.report_file, fmt::format("Surogate {} run '{}'", options_.pretraining ? "pt" : "sft", run_name_),
                    state_.history, state_.eval_history, rows, gpu_plot_series(state_.gpu_history));
  nlohmann::json summary = nlohmann::json::object();
  for (const auto& [key, value] : rows) summary[key] = value;
  log("summary", summary);
  display_.message(format_summary_table("training summary", rows));
  report_time_breakdown();
  if (trackers_) {
    // The trackers upload what they hold (wandb online); the run itself is complete.
    trackers_->finish(std::chrono::seconds(300), [this](const std::string& line) { display_.message(line); });
  }
  wait_for_rank_zero(*world_);
  return result_;
}

// The caller asked to stop (TrainerOptions::stop_requested): a checkpoint of this step, so
// resume_from_checkpoint continues exactly here, and no final evaluation or outputs.
void Run::stop_early() {
  display_.finish();
  if (last_saved_step_ != state_.step) save_checkpoint();
  log_saved(writer_->wait());  // the stop names a complete checkpoint
  log("stopped", {{"step", state_.step}, {"checkpoint", result_.checkpoint.string()}});
  display_.message(fmt::format("stopped at step {} of {}: checkpoint {} (resume_from_checkpoint: true continues from it)",
                               state_.step, state_.total_steps, result_.checkpoint.string()));
  report_time_breakdown();
  if (trackers_) trackers_->finish(std::chrono::seconds(300), [this](const std::string& line) { display_.message(line); });
  result_.steps = state_.step;
  result_.stopped = true;
}

// The mean per-op time of one micro-batch over the run's steps (train/observe/time_breakdown.h).
void Run::report_time_breakdown() {
  if (!config_.debug_time_breakdown || time_breakdown_.empty()) return;
  log("time_breakdown", time_breakdown_.record());
  display_.message(time_breakdown_.table());
}

}  // namespace

TrainingResult run_training(const Config& config, const TrainerOptions& options) {
  Run run(config, options);
  try {
    return run.run();
  } catch (const distributed::RankFailure& failure) {
    // Another rank stopped: the checkpoints written so far are complete and resumable.
    const CheckpointStore store(config.checkpoint_dir.value_or(config.output_dir), 0);
    const std::optional<fs::path> latest = store.latest();
    throw distributed::RankFailure(fmt::format(
        "{}. The run stopped; {}", failure.what(),
        latest ? fmt::format("the last complete checkpoint is {} (resume_from_checkpoint: true continues from it)",
                             latest->string())
               : std::string("no checkpoint was written yet")));
  }
}

}  // namespace surogate::train
