// What a training run does differently when it is one process of several (a launcher, Ray:
// distributed/process_world.h), kept out of the step loop (train/run/step_loop.cpp):
//   - the token cache is built once per machine: with distributed.num_nodes > 1 each process is
//     one node and keeps its own cache under <worker_output_dir>/node-<rank>/ (default
//     /tmp/surogate-<run_name>/node-<rank>/), as the reference places worker-local data; otherwise
//     (processes sharing machines, perhaps a filesystem) rank 0 builds it in output_dir first, then
//     the first process of each machine, then the rest only read it;
//   - the world is connected once distributed.num_nodes is known to agree with it;
//   - on resume only rank 0 reads the checkpoint folder (it need not be shared): the others
//     take part in moving the optimizer shards and receive its training state from it;
//   - rank 0 alone evaluates and writes checkpoints and outputs; the others wait for it in a
//     barrier without the collectives' timeout, and at the end they exit together.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "config/config.h"
#include "data/pipeline.h"
#include "distributed/launcher_environment.h"
#include "distributed/process_world.h"
#include "train/checkpoint_store.h"
#include "train/device/training_device.h"
#include "train/training_state.h"

namespace surogate::train {

// This process alone (no spec), or the world the launcher variables describe, after checking
// distributed.num_nodes (`nodes`) against it (before waiting for anyone).
std::unique_ptr<distributed::ProcessWorld> connect_processes(const DistributedConfig& nodes,
                                                             const ConfigSources& sources,
                                                             const std::optional<distributed::ProcessWorldSpec>& spec);

// The token cache of this process, built or reused as above (`log` prints the cache's lines).
// Multi-node runs (`nodes`: the `distributed` options) keep a cache per node, under worker_output_dir.
std::shared_ptr<data::TokenCache> load_process_token_cache(const DistributedConfig& nodes,
                                                           const std::string& run_name,
                                                           data::DataSettings settings,
                                                           distributed::ProcessWorld& world,
                                                           const std::function<void(const std::string&)>& log);

// resume_from_checkpoint: rank 0 restores the latest checkpoint of `store` that verifies (sizes
// and checksums; newer damaged or half-written ones are skipped, each reported through `warn`)
// into the device's host views (the trainable weights, every process's optimizer shards), upload()
// sends them to every rank, and every process receives the training state. Every process calls it;
// nullopt when there is no checkpoint that verifies. `folder` is set in rank 0's process.
struct ResumedRun {
  TrainingState state;
  std::optional<std::filesystem::path> folder;
};
std::optional<ResumedRun> resume_latest_checkpoint(distributed::ProcessWorld& world, const CheckpointStore& store,
                                                   TrainingDevice& device,
                                                   const std::function<void(const std::string&)>& warn);

// Returns when every process has reached it: the others wait here while rank 0 evaluates, writes
// a checkpoint or the outputs, with no timeout worth the name (that may take long), where the
// next collective's timeout would fail them; a process that stopped still fails it at once.
void wait_for_rank_zero(distributed::ProcessWorld& world);

}  // namespace surogate::train
