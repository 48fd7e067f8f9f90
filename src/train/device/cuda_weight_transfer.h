// ZeRO-3 on GPUs: the host copies of the weights (the trainer's weights(): fp32, rank 0's process
// loads and checkpoints them) to and from the ranks that keep them, over the ranks' communicator
// a chunk at a time (scratch_transfer.h, the CPU ranks' algorithm), so no GPU ever holds more than
// its pieces and one chunk. Each rank calls these on its own thread, all ranks together (they are
// collective), in the same order.
//   upload: every weight broadcast from global rank 0's host copy; its owner rounds it to bf16
//     into its own copy (round to nearest even, as the optimizer writes it) and keeps the fp32
//     master of a trainable one;
//   download: each trainable weight's fp32 master broadcast from its owner; the first rank of
//     each process writes its host copy (frozen weights never change: their copies stay as loaded).
#pragma once

#include <span>

#include "distributed/communicator.h"
#include "train/device/cuda_rank_state.h"
#include "train/device/cuda_weight_gatherer.h"

namespace surogate::train {

// 16 MiB of fp32: the scratch each rank holds on its GPU under ZeRO-3.
inline constexpr size_t kTransferChunkElements = size_t{4} << 20;

struct CudaShardTransfer {
  CudaRankState& state;
  distributed::Communicator& communicator;  // enqueues on state.stream()
  const CudaWeightShard& shard;
  float* scratch = nullptr;  // kTransferChunkElements on the rank's GPU
  bool writes_host = false;  // this process's first rank
};

// `layout`'s ids and entries in spec order; `weights` the host copies in the same order.
void upload_weight_shards(const CudaShardTransfer& rank, const CudaTrainableLayout& layout,
                          std::span<const WeightView> weights);
void download_weight_shards(const CudaShardTransfer& rank, const CudaTrainableLayout& layout,
                            std::span<const WeightView> weights);

}  // namespace surogate::train
