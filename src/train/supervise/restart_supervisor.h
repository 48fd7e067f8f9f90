// max_restarts: a run that restarts itself after a failure.
//
// The `surogate sft|pt` process becomes a supervisor: it runs the training as a child process
// (this same program, the same arguments), and when the child fails — killed by a signal (a
// crash, the out-of-memory killer), an internal or CUDA error (exit code 1) or too many
// non-finite steps in a row (exit code 3) — it starts it again with resume_from_checkpoint: true,
// so the new child resumes from the latest checkpoint that verifies, at most max_restarts times.
// A user error (exit code 2: the configuration, the data, the files) is not restarted: it would
// fail again the same way. Every child appends to the one JSONL log (the supervisor passes the
// log_file); before each restart the supervisor writes a "restart" record there, and the child
// learns of the restarts so far (for its messages and its report) from the environment
// (SUROGATE_RESTARTS). SIGINT / SIGTERM sent to the supervisor are passed to the child and end
// the run without a restart; the child is killed if the supervisor dies (PR_SET_PDEATHSIG).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "train/trainer.h"

namespace surogate::train {

struct SupervisedRun {
  std::vector<std::string> arguments;         // the child's argv after the program: "sft", config, overrides...
  int max_restarts = 0;
  std::filesystem::path log_file;             // every attempt's log (passed to the child as --log_file)
  std::filesystem::path checkpoint_dir;       // where the restarts resume from (named in the records)
};

// Runs the training child until it succeeds or max_restarts restarts are spent; returns the exit
// code to leave with (the last child's; 128 + N when it was killed by signal N).
int supervise_training(const SupervisedRun& run);

// In a child: which attempt this is (0: the first) and the restarts before it, from the
// environment the supervisor set; nullopt when this process is not a supervised child.
std::optional<std::vector<RestartRecord>> supervised_restarts();

}  // namespace surogate::train
