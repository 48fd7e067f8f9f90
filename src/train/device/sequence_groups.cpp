// The sequence groups of a parallel device's ranks; see sequence_groups.h.
#include "train/device/sequence_groups.h"

#include <fmt/format.h>

#include "distributed/gloo_communicator.h"
#include "train/training_plan.h"

namespace surogate::train {

distributed::RankGroup sequence_group(const distributed::ParallelLayout& layout, int rank, std::string_view kind) {
  const distributed::RankPlace place = layout.place(rank);
  return {fmt::format("{}-{}-{}", kind, place.stage, place.replica), place.sequence, layout.sequence_size};
}

SequenceGroups connect_cpu_sequence_groups(distributed::RankThreads& threads, distributed::ProcessWorld& world,
                                           const distributed::ParallelLayout& layout) {
  SequenceGroups groups;
  if (layout.sequence_size == 1) return groups;
  groups.communicators = distributed::connect_gloo_groups(threads, world, layout.first_rank,
                                                         [&](int rank) { return sequence_group(layout, rank); });
  for (const auto& communicator : groups.communicators) {
    groups.registries.push_back(std::make_unique<graph::OpRegistry>(make_training_registry(communicator.get())));
  }
  return groups;
}

}  // namespace surogate::train
