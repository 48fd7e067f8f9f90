// What one training run holds from its start to its end: every value the start-up steps
// (start_run.h) produce and the step loop (step_loop.h) and the run's actions (run_actions.h)
// use, gathered in one struct so each step's inputs and outputs are plain to see.
//
// The members' order is their destruction order reversed, and it matters: the folder locks are
// released last (every write is done), the checkpoint writer is destroyed first (a write in flight
// finishes while the store and the device still exist).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/execution_plan.h"
#include "config/config.h"
#include "data/data_loader.h"
#include "data/pipeline.h"
#include "distributed/process_world.h"
#include "graph/op_registry.h"
#include "io/folder_lock.h"
#include "io/model_config.h"
#include "models/lora.h"
#include "models/model_spec.h"
#include "train/base_weights.h"
#include "train/batch_inputs.h"
#include "train/checkpoint_store.h"
#include "train/checkpoint_writer.h"
#include "train/device/backend_selection.h"
#include "train/device/training_device.h"
#include "train/evaluator.h"
#include "train/lr_schedule.h"
#include "train/objective/training_objective.h"
#include "train/observe/gpu_utilization.h"
#include "train/observe/metrics_log.h"
#include "train/observe/progress_display.h"
#include "train/observe/time_breakdown.h"
#include "train/observe/tracker_feed.h"
#include "train/pipeline_plan.h"
#include "train/quantized_weights.h"
#include "train/step_guard.h"
#include "train/trainer.h"
#include "train/training_plan.h"
#include "train/training_state.h"
#include "train/vision_stage.h"

namespace surogate::train {

using RunClock = std::chrono::steady_clock;

inline double seconds_since(RunClock::time_point start) {
  return std::chrono::duration<double>(RunClock::now() - start).count();
}

// Start-up: seconds per phase from the run's start to its first step (logged as "startup" and
// printed in one line; bench/ reports it).
struct StartupTimer {
  RunClock::time_point started = RunClock::now();
  RunClock::time_point phase_start = RunClock::now();
  std::vector<std::pair<std::string, double>> phases;
  void end_phase(const std::string& name) {
    phases.emplace_back(name, seconds_since(phase_start));
    phase_start = RunClock::now();
  }
};

struct RunContext {
  // The "connect" step: this process among the run's processes (one unless a launcher or Ray
  // started several: rank 0's process writes the log, checkpoints and outputs and evaluates; the
  // others only train), its display, its op registry, the locks of its folders.
  RunContext(const Config& config, const TrainerOptions& options);

  // First, so released last: the folders stay locked until every write is done.
  std::vector<io::FolderLock> folder_locks;
  // The run's own copy of the configuration: load_prompts settles grpo.max_prompt_length from the
  // prompts (start_prompts.cpp) before anything is planned.
  Config config;
  TrainerOptions options;
  std::unique_ptr<distributed::ProcessWorld> world;
  ProgressDisplay display;
  // The model (read_model, plan_model).
  io::ModelConfig model_config;
  std::vector<models::ParameterSpec> specs;  // the base model's parameters
  std::optional<models::LoraSetup> lora;
  std::shared_ptr<VisionStage> vision;              // a vision-language folder's graph, weights, images; else null
  std::optional<models::QloraOptions> qlora;        // qlora_bnb, qlora_fp8, qlora_fp4
  std::optional<models::Fp8Options> fp8;            // recipe fp8_hybrid
  std::vector<models::QuantizedWeight> quantized;   // the base weights the plan stores quantized
  graph::TensorId dropout_seed = graph::kNoTensor;
  int32_t dropout_seed_value = 0;
  graph::OpRegistry registry;
  compiler::ExecutionPlan plan;
  std::shared_ptr<const PipelinePlan> pipeline;  // pipeline_parallel_size > 1: the stages' plans
  TrainingBackend backend = TrainingBackend::Cpu;
  std::unique_ptr<TrainingDevice> device;  // backend, parameters, gradients, optimizer
  // The data (load_data).
  std::shared_ptr<data::TokenCache> cache;
  std::unique_ptr<data::DataLoader> loader;
  int64_t batch = 0;      // per_device_train_batch_size
  int64_t sequence = 0;   // the plan's row length: sequence_len, or prompt sharing's shorter rows (start_run.cpp)
  int64_t attention_span = 0;  // the training rows' (data/packing.h), for the recompute choice; 0: not known
  int32_t pad_id = 0;
  std::unique_ptr<Evaluator> evaluator;
  std::unique_ptr<BatchInputs> inputs;
  // surogate dpo: the training mode's loss, inputs and metrics (train/objective/); null for sft / pt.
  std::unique_ptr<TrainingObjective> objective;
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<CheckpointStore> store;
  // The run's records (rank 0's process): the JSONL log, report_to, log_gpu_util.
  std::unique_ptr<MetricsLog> log_file;
  std::unique_ptr<TrackerFeed> trackers;
  std::unique_ptr<GpuUtilizationLog> gpu_log;
  TrainingState state;
  TrainingResult result;
  int64_t batches_per_epoch = 0;
  int64_t last_saved_step = -1;
  std::string run_name;
  TimeBreakdown time_breakdown;  // debug_time_breakdown
  TimeBreakdown host_phases;     // its host side: milliseconds of each step's phases
  TimeBreakdown device_phases;   // the parallel device's first rank: GPU milliseconds of each step's phases
  StartupTimer startup;
  std::unique_ptr<StepGuard> guard;  // skipped steps, fp16 loss scaling
  std::vector<std::string> resume_warnings;  // checkpoints skipped on resume, logged once the log is open
  // Last: destroyed first, so a write in flight finishes while the store and device still exist.
  std::unique_ptr<CheckpointWriter> writer;

  void log(const std::string& type, nlohmann::json record) {
    if (log_file) log_file->write(type, std::move(record));
  }
  void message(const std::string& line) { display.message(line); }
  const models::QuantizedWeight* quantized_weight(const std::string& name) const {
    return find_quantized(quantized, name);
  }
  // Where the base weights are read from: a vision-language folder's stage, or (null) the model
  // folder as read_base_weights reads it.
  BaseWeightReader base_weight_reader() const {
    if (!vision) return {};
    return [stage = vision](std::span<const WeightView> views, const WeightWritten& written) {
      stage->load_weights(views, written);
    };
  }
};

}  // namespace surogate::train
