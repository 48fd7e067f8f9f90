// ZeRO-3's host copies of the weights to and from the ranks that keep them, written once for CPU
// and GPU ranks (parallel/cpu_rank_host.cpp, cuda_weight_transfer.h). The host copies are what
// the trainer loads, checkpoints and evaluates; each rank keeps only its pieces of the weights. A
// weight travels through each rank's scratch buffer a chunk at a time, one broadcast per chunk over
// the ranks' communicator; the backend says how a chunk moves between the scratch and its own
// memory. Collective: every rank calls these on its own thread, all together, in the same order.
//   upload: each weight's chunks broadcast from rank 0, which first loads them from its host copy;
//     every rank then keeps what it owns of them;
//   download: each trainable weight's chunks broadcast from its owner, which first fetches them
//     from its own copy; the rank that writes the host copies stores them there.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "distributed/communicator.h"

namespace surogate::train {

struct ScratchTransfer {
  distributed::Communicator& communicator;
  float* scratch = nullptr;  // `chunk` fp32 elements (on the rank's device)
  size_t chunk = 0;
  bool writes_host = false;  // download: this rank writes the host copies
};

// Chunk [first, first + count) of weight `index` between the scratch buffer and the rank's memory.
using ChunkCopy = std::function<void(size_t index, size_t first, size_t count)>;

// `counts`: each weight's elements. `load` (rank 0 only) fills the scratch from the host copy;
// `keep` (every rank) takes what it owns from it.
void upload_through_scratch(const ScratchTransfer& transfer, std::span<const size_t> counts, const ChunkCopy& load,
                            const ChunkCopy& keep);
// `counts` and `owners`: each trainable weight's elements and owning rank. `fetch` (the owner)
// fills the scratch from its copy; `store` (the host writer) copies the scratch to the host.
void download_through_scratch(const ScratchTransfer& transfer, std::span<const size_t> counts,
                              std::span<const int> owners, const ChunkCopy& fetch, const ChunkCopy& store);

}  // namespace surogate::train
