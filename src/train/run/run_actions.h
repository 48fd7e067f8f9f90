// What a run does besides training steps, each an action on the RunContext (run_context.h):
// evaluate, checkpoint, write the outputs, stop early, report. The step loop (step_loop.h) calls
// them at their cadence and at the end.
#pragma once

#include <optional>

#include "train/checkpoint_writer.h"
#include "train/run/run_context.h"
#include "train/step_guard.h"

namespace surogate::train {

// Rank 0's process evaluates (the others have no evaluator and wait for it).
void evaluate(RunContext& run, bool final_eval);

// The step's state is copied off the device (on the CPU, copied in memory) and written by the
// writer thread while training goes on; a previous write still in flight is waited for first.
// Every process takes part in the download (rank 0 gathers every process's optimizer shards);
// rank 0's process writes.
void save_checkpoint(RunContext& run);

// Logs a checkpoint the writer thread finished (nothing when none).
void log_saved(RunContext& run, const std::optional<SavedCheckpoint>& saved);

// Full fine-tuning / pt: the HF model folder. LoRA: the PEFT adapter, and with merge_adapter the
// merged HF model folder in output_dir/merged.
void write_outputs(RunContext& run);

// The caller asked to stop (TrainerOptions::stop_requested): a checkpoint of this step, so
// resume_from_checkpoint continues exactly here, and no final evaluation or outputs.
void stop_early(RunContext& run);

// The mean per-op time of one micro-batch over the run's steps (train/observe/time_breakdown.h).
void report_time_breakdown(RunContext& run);

// Too many consecutive non-finite steps: finishes the checkpoint in flight, logs, throws
// TrainingDiverged naming the last checkpoint.
[[noreturn]] void fail_diverged(RunContext& run, const StepVerdict& verdict);

// The end of a run that trained every step: the final evaluation and checkpoint, then on rank 0's
// process the outputs, the HTML report, the summary and the trackers' upload. `started`: when the
// step loop began (TrainingResult::seconds counts from there).
void finish_run(RunContext& run, RunClock::time_point started);

}  // namespace surogate::train
