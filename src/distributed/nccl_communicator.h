// The GPU ranks' communicator: NCCL (from the CUDA toolkit), one rank per GPU. Buffers are device
// memory; collectives are enqueued on the rank's stream and return at once (barrier() waits for
// the stream). A world is named by an NCCL unique id that rank 0 makes and every other rank
// receives: here through memory (threads of this process), later through Ray or the launcher's
// store (processes). Compiled only with CUDA.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/rank_threads.h"

namespace surogate::distributed {

// ncclUniqueId's 128 bytes, so that callers need not include nccl.h.
struct NcclUniqueId {
  std::array<std::byte, 128> bytes{};
};
NcclUniqueId make_nccl_unique_id();

// Joins the world `id` names as `rank` of `world_size`, on CUDA device `device`, enqueuing on
// `stream` (a cudaStream_t of that device; nullptr: the default stream). Blocks until every rank
// has joined, so each rank calls it from its own thread or process.
std::unique_ptr<Communicator> connect_nccl(const NcclUniqueId& id, int rank, int world_size, int device, void* stream);

// A world of `threads`' ranks, rank r on device r with streams[r].
std::vector<std::unique_ptr<Communicator>> connect_in_process_nccl(RankThreads& threads, std::span<void* const> streams);

}  // namespace surogate::distributed
