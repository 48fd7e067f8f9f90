// A training objective's per-micro-batch values, of every process, in window order. When a run's
// ranks span several processes (distributed/process_world.h) each process runs only its ranks'
// micro-batches of a window; what the objective computes over the whole window (the preference
// loss's normalisers, its metrics, the reference table) needs every micro-batch's values, added in
// window order so that the sums are the bits one process of all the ranks gets.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "distributed/process_world.h"

namespace surogate::train {

// `mine`: (window index, row) for each micro-batch this process ran, every row of one width, the
// same number of them in every process (data parallelism: each process runs its ranks' share).
// Returns every process's rows ordered by window index (the control channel's all_gather; `mine`
// sorted when `world` is null or alone). Doubles carry floats and counts below 2^53 exactly.
std::vector<std::vector<double>> window_rows(distributed::ProcessWorld* world,
                                             const std::vector<std::pair<int64_t, std::vector<double>>>& mine);

}  // namespace surogate::train
