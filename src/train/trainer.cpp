// The training job; see trainer.h. start_run (train/run/start_run.h) performs the start-up as
// named steps into one RunContext; run_steps (train/run/step_loop.h) is the step loop.
#include "train/trainer.h"

#include <fmt/format.h>

#include "distributed/rank_failure.h"
#include "train/checkpoint_store.h"
#include "train/run/run_actions.h"
#include "train/run/start_run.h"
#include "train/run/step_loop.h"

namespace surogate::train {

TrainingResult run_training(const Config& config, const TrainerOptions& options) {
  std::unique_ptr<RunContext> run = start_run(config, options);
  try {
    return run_steps(*run);
  } catch (const distributed::RankFailure& failure) {
    // Another rank stopped: the checkpoints written so far are complete and resumable. The one the
    // writer thread has in flight was downloaded whole before the failure: finish it first, so the
    // checkpoint named is the last one on disk (resume_from_checkpoint picks that one).
    if (run->writer) log_saved(*run, run->writer->wait());
    const CheckpointStore store(config.checkpoint.checkpoint_dir.value_or(config.run.output_dir), 0);
    const std::optional<std::filesystem::path> latest = store.latest();
    throw distributed::RankFailure(fmt::format(
        "{}. The run stopped; {}", failure.what(),
        latest ? fmt::format("the last complete checkpoint is {} (resume_from_checkpoint: true continues from it)",
                             latest->string())
               : std::string("no checkpoint was written yet")));
  }
}

}  // namespace surogate::train
