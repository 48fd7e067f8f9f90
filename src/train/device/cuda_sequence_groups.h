// Sequence parallelism on GPU ranks (docs/architecture.md, "Sequence parallel"), for the
// data-parallel and the pipeline ranks alike: each of this process's ranks binds its backend from a
// kernel table of its own whose exchange ops (distributed/sequence_exchange_cuda.h) read the rank's
// sequence group from a slot; the group's NCCL communicator enqueues on the stream of the backend
// that runs those ops, so it is connected once that backend exists (connect), and the slot set.
// A pipeline stage runs two plans on two streams (parallel/cuda_rank_plans.h): it has two of these, the
// training backend's and the forward backend's groups, named apart. Compiled only with CUDA.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/parallel_layout.h"
#include "distributed/process_world.h"
#include "distributed/rank_threads.h"
#include "distributed/sequence_exchange_cuda.h"
#include "runtime/cuda_op_table.h"

namespace surogate::train {

class CudaSequenceGroups {
public:
  // Nothing when the layout has no sequence parallelism (every table() is null).
  explicit CudaSequenceGroups(const distributed::ParallelLayout& layout);

  // The kernel table local rank `local` binds its backend from (null: the built-in one).
  const runtime::CudaOpTable* table(int local) const;
  // Each local rank's group communicator on `streams[l]` (the backends bound from table(l)), named
  // `kind` (sequence_groups.h). Every process calls it, on the threads of its ranks.
  void connect(distributed::RankThreads& threads, distributed::ProcessWorld& world,
               const distributed::ParallelLayout& layout, std::span<void* const> streams, std::string_view kind);
  // Local rank `local`'s communicator released (on the rank's thread, its device current).
  void release(int local);

private:
  std::vector<std::unique_ptr<distributed::SequenceGroupSlot>> slots_;
  std::vector<std::unique_ptr<runtime::CudaOpTable>> tables_;
  std::vector<std::unique_ptr<distributed::Communicator>> communicators_;
};

}  // namespace surogate::train
