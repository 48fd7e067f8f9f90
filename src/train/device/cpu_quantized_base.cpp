// The quantized base of CPU ZeRO-3 ranks; see cpu_quantized_base.h.
#include "train/device/cpu_quantized_base.h"

#include <cstring>

#include "core/error.h"

namespace surogate::train {
namespace {

// Fills a byte group's buffer before the uses the schedule issues: the keeper's piece copied in,
// then (several ranks) the all-gather of every rank's piece.
class CpuQuantizedBaseGatherer final : public runtime::StepObserver {
public:
  CpuQuantizedBaseGatherer(QuantizedBaseShard shard, runtime::CpuBackend& backend, distributed::Communicator& communicator)
      : shard_(shard), backend_(backend), communicator_(communicator) {
    for (const compiler::GatherGroup& group : shard.gathering->groups) piece_counts_.push_back(byte_group_piece_counts(group));
  }
  void before_step(size_t step) override {
    const compiler::WeightGathering& gathering = *shard_.gathering;
    for (size_t use : gathering.issue_before[step]) {
      const size_t g = gathering.uses[use].group;
      const compiler::GatherGroup& group = gathering.groups[g];
      std::byte* buffer = backend_.arena_data() + gathering.region_offset + group.offset;
      std::memcpy(buffer + group.piece_offsets[static_cast<size_t>(shard_.keeper)], shard_.piece(g), shard_.piece_bytes(g));
      if (gathering.world_size > 1) communicator_.all_gather(buffer, piece_counts_[g], DType::BF16);
    }
  }
  void after_step(size_t) override {}

private:
  QuantizedBaseShard shard_;
  runtime::CpuBackend& backend_;
  distributed::Communicator& communicator_;
  std::vector<std::vector<size_t>> piece_counts_;
};

}  // namespace

CpuQuantizedBase::CpuQuantizedBase(compiler::ExecutionPlan& plan, QuantizedBaseKeeping keeping, int world_size,
                                   int first_rank, int local_ranks)
    : gathering_(quantized_base_gathering(plan, keeping, world_size)) {
  if (gathering_.empty()) return;
  compiler::apply_weight_gathering(plan, gathering_);
  const bool offloaded = keeping == QuantizedBaseKeeping::Offloaded;
  owned_.resize(offloaded ? 1 : static_cast<size_t>(local_ranks));
  for (int local = 0; local < local_ranks; ++local) {
    const int keeper = offloaded ? 0 : first_rank + local;
    std::vector<std::byte>& bytes = owned_[offloaded ? 0 : static_cast<size_t>(local)];
    bytes.assign(gathering_.owned_elements[static_cast<size_t>(keeper)], std::byte{0});
    shards_.push_back({&gathering_, keeper, bytes.data()});
  }
}

void CpuQuantizedBase::keep(const compiler::ExecutionPlan& plan, const models::QuantizedWeight& weight,
                            const QuantizedPieces& pieces) {
  // One image serves every local rank when Offloaded: write it once.
  for (size_t local = 0; local < owned_.size(); ++local) {
    const QuantizedBaseShard& shard = shards_[local];
    shard.keep(plan, weight, pieces, [&](size_t offset, std::span<const std::byte> bytes) {
      std::memcpy(shard.owned + offset, bytes.data(), bytes.size());
    });
  }
}

std::unique_ptr<runtime::StepObserver> CpuQuantizedBase::gatherer(int local, runtime::CpuBackend& backend,
                                                                  distributed::Communicator& communicator) const {
  return std::make_unique<CpuQuantizedBaseGatherer>(shards_[static_cast<size_t>(local)], backend, communicator);
}

}  // namespace surogate::train
