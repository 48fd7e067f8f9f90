// The GPU ranks' communicator: NCCL (from the CUDA toolkit), one rank per GPU. Buffers are device
// memory; collectives are enqueued on the rank's stream and return at once (barrier() waits for
// the stream). A world is named by an NCCL unique id that rank 0 makes and every other rank
// receives: through memory (threads of one process), or broadcast over the control channel of a
// world of processes (process_world.h; its address comes from the launcher, or from Ray). Waiting
// for the stream (synchronize) polls it with NCCL's asynchronous error and a timeout, which NCCL
// itself does not have. Compiled only with CUDA.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/gloo_communicator.h"
#include "distributed/process_world.h"
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
// `timeout` bounds synchronize(). `process_failed` (rank threads of one process: set by the
// failure hook of any of them, RankThreads::on_failure): once set, synchronize() aborts the
// communicator and throws RankFailure at once, and the destructor aborts instead of waiting for
// the stream, so a peer thread that failed mid-step does not leave the others waiting for the
// timeout.
std::unique_ptr<Communicator> connect_nccl(const NcclUniqueId& id, int rank, int world_size, int device, void* stream,
                                           std::chrono::milliseconds timeout = std::chrono::minutes(10),
                                           std::shared_ptr<std::atomic<bool>> process_failed = nullptr);

// A world of `threads`' ranks, rank r on device r with streams[r].
std::vector<std::unique_ptr<Communicator>> connect_in_process_nccl(RankThreads& threads, std::span<void* const> streams);

// This process's rank threads as the global ranks [first_rank, first_rank + threads.world_size())
// of a world of `world_size` ranks spread over `world`'s processes, local rank l on CUDA device
// first_device + l with streams[l]. Rank 0's process makes the unique id and broadcasts it over
// the world's control channel. Every process calls it.
std::vector<std::unique_ptr<Communicator>> connect_nccl_world(RankThreads& threads, ProcessWorld& world, int first_rank,
                                                              int world_size, int first_device,
                                                              std::span<void* const> streams);

// Each of this process's rank threads joined to the group `group_of(global rank)` names (as
// connect_gloo_groups), local rank l on device first_device + l with streams[l]. Rank 0's process
// makes one unique id per group of the world's `world_size` ranks and broadcasts them.
std::vector<std::unique_ptr<Communicator>> connect_nccl_groups(RankThreads& threads, ProcessWorld& world, int first_rank,
                                                               int world_size, int first_device,
                                                               std::span<void* const> streams,
                                                               const std::function<RankGroup(int)>& group_of);

}  // namespace surogate::distributed
