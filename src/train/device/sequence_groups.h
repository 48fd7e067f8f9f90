// Sequence parallelism on the data-parallel and pipeline ranks
// (docs/architecture.md, "Sequence parallel"): the sequence group of each of this process's ranks —
// the N ranks of one replica and stage that share each micro-batch's tokens
// (distributed/parallel_layout.h) — joined by a communicator of its own, and the op registry each
// rank binds its backend from: the model ops and the exchange ops bound to that communicator
// (distributed/sequence_exchange_ops.h). The registry a plan is compiled against holds the same ops
// with no communicator (make_training_registry in train/training_plan.h).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/gloo_communicator.h"  // RankGroup
#include "distributed/parallel_layout.h"
#include "distributed/process_world.h"
#include "distributed/rank_threads.h"
#include "graph/op_registry.h"

namespace surogate::train {

struct SequenceGroups {
  std::vector<std::unique_ptr<distributed::Communicator>> communicators;  // one per local rank
  std::vector<std::unique_ptr<graph::OpRegistry>> registries;             // one per local rank
  // The registry local rank `local` binds its backend from: its own with sequence parallelism,
  // `fallback` without.
  const graph::OpRegistry& registry(int local, const graph::OpRegistry& fallback) const {
    return registries.empty() ? fallback : *registries[static_cast<size_t>(local)];
  }
};

// World rank `rank`'s sequence group (the ranks of its stage and replica), named `kind`-stage-replica:
// a rank joined to two groups of the same ranks names them apart (a GPU stage's training and
// forward streams, cuda_sequence_groups.h).
distributed::RankGroup sequence_group(const distributed::ParallelLayout& layout, int rank,
                                      std::string_view kind = "sequence");

// CPU ranks (gloo). Nothing is connected when the layout has no sequence parallelism. Every
// process calls it, on the threads of its ranks.
SequenceGroups connect_cpu_sequence_groups(distributed::RankThreads& threads, distributed::ProcessWorld& world,
                                           const distributed::ParallelLayout& layout);

}  // namespace surogate::train
