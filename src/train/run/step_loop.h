// The step loop of a started run (start_run.h), in named parts: read the window's micro-batches,
// train one optimizer step, record it (log, history, display), then the cadence after it
// (evaluation, checkpoint, the caller's stop). The same loop drives every TrainingDevice.
#pragma once

#include "train/run/run_context.h"
#include "train/trainer.h"

namespace surogate::train {

// The first evaluation (step 0), every step until total_steps, then finish_run (run_actions.h),
// unless the run stops early.
TrainingResult run_steps(RunContext& run);

}  // namespace surogate::train
