// A training run's start-up as named steps, each filling its part of the RunContext
// (run_context.h); start_run calls them in order:
//   connect (RunContext's constructor) → choose_backend → read_model → load_data → plan_model →
//   build_device → load_weights → schedule_steps → make_evaluator → open_checkpoints →
//   open_records.
// Each step refuses what it finds wrong (a UserError) before the next one loads or allocates.
#pragma once

#include <memory>

#include "config/config.h"
#include "distributed/parallel_layout.h"
#include "train/device/backend_selection.h"
#include "train/run/run_context.h"
#include "train/trainer.h"

namespace surogate::train {

// What choose_backend learnt that later steps need: the machine, and the ranks of every process.
struct ChosenBackend {
  MachineOffer machine;
  distributed::ParallelLayout ranks;
};

// The backend (the choice, or the caller's), checked against the feature-support table; the
// layout of ranks, the same in every process.
ChosenBackend choose_backend(RunContext& run);
// The model's config.json, its parameters, and the LoRA adapters to train.
void read_model(RunContext& run);
// The token cache (tokenized and packed once, memory-mapped here) and the training batches' loader.
void load_data(RunContext& run);
// surogate grpo's load_data (start_prompts.cpp): the prompt token cache and a loader of one prompt
// per batch; rows of max_prompt_length + max_completion_length tokens.
void load_prompts(RunContext& run);
// The graph compiled into the plan (the stages' plans for a pipeline), refused before anything
// loads when it does not fit; the plan's inputs, QLoRA and FP8 options.
void plan_model(RunContext& run, const ChosenBackend& chosen);
// The backend's TrainingDevice: parameters, gradients and optimizer state.
void build_device(RunContext& run);
// The base weights (loaded, or quantized onto the device), the LoRA adapters initialised, all
// uploaded to the device.
void load_weights(RunContext& run);
// The number of steps and the learning-rate schedule.
void schedule_steps(RunContext& run);
// The evaluator, on rank 0's process when there are evaluation rows.
void make_evaluator(RunContext& run);
// The step guard, the checkpoint store and its writer thread; resume_from_checkpoint resumes here.
void open_checkpoints(RunContext& run);
// The run's records on rank 0's process (the JSONL log, trackers, GPU sampling) and their first
// lines; the restarts so far.
void open_records(RunContext& run);
// surogate dpo: the training objective (train/objective/) and its one-time work (the reference
// log-probabilities), once the weights, the data and a resumed state are there.
void prepare_objective(RunContext& run);

// Every step above, in order.
std::unique_ptr<RunContext> start_run(const Config& config, const TrainerOptions& options);

}  // namespace surogate::train
