// The sequence groups of GPU ranks; see cuda_sequence_groups.h.
#include "train/device/cuda_sequence_groups.h"

#include "distributed/nccl_communicator.h"
#include "train/device/sequence_groups.h"

namespace surogate::train {

CudaSequenceGroups::CudaSequenceGroups(const distributed::ParallelLayout& layout) {
  for (int r = 0; layout.sequence_size > 1 && r < layout.local_ranks; ++r) {
    slots_.push_back(std::make_unique<distributed::SequenceGroupSlot>());
    tables_.push_back(std::make_unique<runtime::CudaOpTable>(runtime::builtin_cuda_ops()));
    distributed::add_sequence_exchange_cuda_ops(*tables_.back(), slots_.back().get());
  }
}

const runtime::CudaOpTable* CudaSequenceGroups::table(int local) const {
  return tables_.empty() ? nullptr : tables_[static_cast<size_t>(local)].get();
}

void CudaSequenceGroups::connect(distributed::RankThreads& threads, distributed::ProcessWorld& world,
                                 const distributed::ParallelLayout& layout, std::span<void* const> streams,
                                 std::string_view kind) {
  if (slots_.empty()) return;
  communicators_ = distributed::connect_nccl_groups(threads, world, layout.first_rank, layout.world_size,
                                                    layout.first_device, streams,
                                                    [&](int rank) { return sequence_group(layout, rank, kind); });
  for (size_t r = 0; r < slots_.size(); ++r) slots_[r]->communicator = communicators_[r].get();
}

void CudaSequenceGroups::release(int local) {
  if (static_cast<size_t>(local) >= communicators_.size()) return;
  slots_[static_cast<size_t>(local)]->communicator = nullptr;
  communicators_[static_cast<size_t>(local)].reset();
}

}  // namespace surogate::train
