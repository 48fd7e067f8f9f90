// What a training run does differently when it is one process of several (a launcher, Ray:
// distributed/process_world.h), kept out of the step loop (trainer.cpp):
//   - the token cache is built once per machine: with distributed.num_nodes > 1 each process is
//     one node and keeps its own cache under <worker_output_dir>/node-<rank>/ (default
//     /tmp/surogate-<run_name>/node-<rank>/), as the reference places worker-local data; otherwise
//     (processes sharing machines, perhaps a filesystem) rank 0 builds it in output_dir first, then
//     the first process of each machine, then the rest only read it;
//   - on resume only rank 0 reads the checkpoint folder (it need not be shared): the others
//     receive its training state (step, loader position) from it;
//   - at the end every process waits for rank 0 to write the outputs, so they exit together.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "config/config.h"
#include "data/pipeline.h"
#include "distributed/process_world.h"
#include "train/training_state.h"

namespace surogate::train {

// The token cache of this process, built or reused as above (`log` prints the cache's lines).
std::shared_ptr<data::TokenCache> load_process_token_cache(const Config& config, const std::string& run_name,
                                                           data::DataSettings settings,
                                                           distributed::ProcessWorld& world,
                                                           const std::function<void(const std::string&)>& log);

// Rank 0 passes what it restored (nullopt: nothing to resume); every process gets the same back.
std::optional<TrainingState> share_resumed_state(distributed::ProcessWorld& world,
                                                 const std::optional<TrainingState>& restored_on_leader);

// Returns when every process has reached it; no timeout worth the name (rank 0 may be writing a
// large model), but a process that stopped still fails it at once.
void finish_together(distributed::ProcessWorld& world);

}  // namespace surogate::train
