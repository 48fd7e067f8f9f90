// The trainer: runs one `surogate sft` / `surogate pt` job on the CUDA backend (bf16 recipe) when
// this build has CUDA and a GPU is visible, else on the CPU backend (train/device/backend_selection.h).
//
// It orchestrates and does not compute: the model is a graph (train/model/decoder_graph.h)
// compiled once with the configured recompute policy; the step loop only moves batches in,
// executes the plan and drives a TrainingDevice (train/device/training_device.h: backend,
// master weights, gradients, optimizer), the same loop on every device. Per optimizer step:
//   gradient_accumulation_steps micro-batches (loss scaled by 1 / loss tokens of the window, so
//   gradients accumulate to the window's mean) → global grad norm → clip to max_grad_norm
//   (0 disables) → optimizer step at the schedule's LR → zero gradients → log, eval, checkpoint.
// A step with a non-finite loss or gradient is skipped (nothing applied, logged); more than
// max_nonfinite_steps in a row stop the run with TrainingDiverged naming the step. Checkpoints are
// written by a writer thread while training goes on (train/checkpoint_writer.h). At the end: final
// eval, final checkpoint, the HF model folder in output_dir, the HTML report and a summary table.
// Several processes (TrainerOptions::processes) run this same loop, each over its ranks'
// micro-batches (train/process_run.h: what else differs).
// Where: the start-up as named steps into one RunContext (train/run/start_run.h), the step loop
// (train/run/step_loop.h), evaluation / checkpoints / outputs (train/run/run_actions.h); the run's
// records, report and GPU sampling in train/observe/, the restart supervisor in train/supervise/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/recompute.h"
#include "config/config.h"
#include "core/error.h"
#include "distributed/launcher_environment.h"
#include "train/device/backend_selection.h"
#include "train/injected_faults.h"

namespace surogate::train {

// A restart of a supervised run (train/supervise/restart_supervisor.h): which attempt it started, and why
// the one before it ended.
struct RestartRecord {
  int attempt = 0;              // 1 for the first restart
  std::string reason;           // "killed by signal 9 (Killed)", "exit code 1 (internal or CUDA error)", ...
};

// Too many consecutive non-finite steps (max_nonfinite_steps): the CLI exits with code 3, which a
// supervised run (max_restarts) restarts from its latest good checkpoint.
class TrainingDiverged : public UserError {
public:
  using UserError::UserError;
};

struct TrainerOptions {
  bool pretraining = false;             // `surogate pt`
  std::string default_run_name = "run";  // used when run_name is unset (the config file's stem)
  std::optional<bool> live_progress;     // default: stdout is a terminal
  bool quiet = false;                    // no per-step lines (tests)
  // Stop right after this optimizer step (its checkpoint, if due, is written) without the final
  // eval / outputs, exactly as if the process had been killed there: what resume tests need.
  std::optional<int64_t> stop_after_step;
  // Overrides the backend choice (tests compare the CPU and CUDA runs of one job in one process).
  std::optional<TrainingBackend> backend;
  // The data-parallel device even for one rank (tests run the gloo / NCCL path with a world of one).
  bool data_parallel_device = false;
  // Tests: the staged offload step's chunk size (train/device/host_offload_plan.h), small enough
  // that a tiny model's step runs in several chunks through both slots.
  std::optional<size_t> offload_chunk_bytes;
  // Tests: the data-parallel gradient buckets' size (train/device/gradient_buckets.h), small
  // enough that a tiny model's gradients travel in several buckets during the backward.
  std::optional<size_t> gradient_bucket_bytes;
  // This process is one of several (the CLI reads the launcher variables: RANK, WORLD_SIZE, ...):
  // their ranks train together, rank 0's process writes the log, checkpoints and outputs.
  std::optional<distributed::ProcessWorldSpec> processes;
  // Tests: compile with exactly this recompute policy instead of the memory-driven choice (a tiny
  // model fits without recompute, but offload_residual is meant to run with recompute_block).
  std::optional<compiler::RecomputePolicy> recompute;
  // Sees every record of the run's log (train/observe/metrics_log.h: "config", "step", "eval",
  // "checkpoint", "summary", ...) as it is written: the Python package's step callback. An
  // exception it throws ends the run there (no checkpoint, no outputs) and reaches the caller.
  std::function<void(const std::string& type, const nlohmann::json& record)> on_record;
  // Asked after every optimizer step, once its log line, evaluation and checkpoint are done: true
  // stops the run at that step boundary with a checkpoint of it (written unless that step already
  // saved one), skipping the final evaluation and outputs; TrainingResult::stopped says so. The
  // Python package answers true on Ctrl-C (KeyboardInterrupt).
  std::function<bool()> stop_requested;
  InjectedFaults faults;
  // Set by a supervised run's restarts: the restarts so far (logged at start and in the report).
  std::vector<RestartRecord> restarts;
  // The caller (the restart supervisor) holds the locks of output_dir and checkpoint_dir
  // (train/run_folder_lock.h) for this run; otherwise the run takes them itself.
  bool output_folders_locked = false;
};

struct TrainingResult {
  int64_t steps = 0;                     // optimizer steps completed (total, including resumed ones)
  int64_t first_step = 0;                // step the run started from (0 unless resumed)
  std::vector<double> step_losses;       // this process's steps, in order (NaN for a skipped step)
  int64_t skipped_steps = 0;             // steps not applied, in the whole run
  std::optional<double> eval_loss;       // final evaluation
  std::optional<double> eval_accuracy;
  std::optional<double> initial_eval_loss;
  double seconds = 0.0;
  std::filesystem::path log_file;
  std::filesystem::path report_file;  // empty when stopped early
  std::filesystem::path checkpoint;   // the last checkpoint this run wrote or resumed from (empty: none)
  bool stopped = false;               // stop_requested ended the run before its last step
  size_t gradient_accumulator_bytes = 0;  // per rank (TrainingDevice::gradient_accumulator_bytes)
};

TrainingResult run_training(const Config& config, const TrainerOptions& options);

}  // namespace surogate::train
