// ZeRO-3's host copies through the ranks' scratch buffers; see scratch_transfer.h.
#include "train/device/scratch_transfer.h"

#include <algorithm>

namespace surogate::train {

void upload_through_scratch(const ScratchTransfer& transfer, std::span<const size_t> counts, const ChunkCopy& load,
                            const ChunkCopy& keep) {
  const bool source = transfer.communicator.rank() == 0;
  for (size_t index = 0; index < counts.size(); ++index) {
    for (size_t first = 0; first < counts[index]; first += transfer.chunk) {
      const size_t count = std::min(transfer.chunk, counts[index] - first);
      if (source) load(index, first, count);
      transfer.communicator.broadcast(transfer.scratch, count, DType::F32, 0);
      keep(index, first, count);
    }
  }
}

void download_through_scratch(const ScratchTransfer& transfer, std::span<const size_t> counts,
                              std::span<const int> owners, const ChunkCopy& fetch, const ChunkCopy& store) {
  for (size_t index = 0; index < counts.size(); ++index) {
    for (size_t first = 0; first < counts[index]; first += transfer.chunk) {
      const size_t count = std::min(transfer.chunk, counts[index] - first);
      if (owners[index] == transfer.communicator.rank()) fetch(index, first, count);
      transfer.communicator.broadcast(transfer.scratch, count, DType::F32, owners[index]);
      if (transfer.writes_host) store(index, first, count);
    }
  }
}

}  // namespace surogate::train
