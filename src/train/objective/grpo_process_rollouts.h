// `surogate grpo` over several processes (a launcher or Ray): each process samples its own ranks'
// completions (grpo_rank_models.h), then every process gets every process's, in process order —
// which is rank order (process p holds the global ranks [p·L, (p + 1)·L)), so the list is the one
// a single process with all the ranks samples. From there each process computes the same rewards,
// advantages and loss weights over the whole step, as TRL gathers its processes' rewards before the
// group statistics, and keeps its own ranks' micro-batches of the window.
#pragma once

#include <vector>

#include "distributed/process_world.h"
#include "generate/generator.h"
#include "rl/group_sampling.h"

namespace surogate::train {

// Every process's `mine` in process order, on every process (the world's control channel: a
// gather to the leader, then a broadcast); `mine` itself when the world is this process alone.
// `stats` (this process's) becomes the sum over the processes, in process order.
std::vector<rl::Rollout> gather_process_rollouts(distributed::ProcessWorld& world, std::vector<rl::Rollout> mine,
                                                 generate::GenerationStats& stats);

}  // namespace surogate::train
