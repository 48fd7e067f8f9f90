// The quantized base of a ZeRO-3 world's GPU ranks in this process (quantized_base_shards.h says
// what persistent_quants / offload_quants keep where). Sharded: each GPU keeps its pieces' bytes
// in device memory and its gatherer (cuda_weight_gatherer.h) copies them into a layer's byte
// buffer and all-gathers the others' on the side stream, one use ahead, as the bf16 weights;
// Offloaded: one pinned host image of the whole base per process (portable: every local GPU
// reads it) and each GPU's gatherer copies a layer's pieces host → device on its side stream, one
// use ahead, as the ZeRO-3 evaluator fills its groups. The evaluator (rank 0's) gathers the
// quantized base from the host too (host_piece): the image when Offloaded, a host copy kept at
// load when Sharded.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "cuda/device_buffer.h"
#include "cuda/host_buffer.h"
#include "distributed/communicator.h"
#include "train/device/cuda_weight_gatherer.h"
#include "train/device/quantized_base_shards.h"

namespace surogate::train {

class CudaQuantizedBase {
public:
  // Schedules the quantized base of `plan` (its bf16 weights' gathering already applied) for the
  // world's ranks first_rank .. first_rank + local_ranks - 1 of `world_size`, and applies it.
  CudaQuantizedBase(compiler::ExecutionPlan& plan, QuantizedBaseKeeping keeping, int world_size, int first_rank,
                    int local_ranks);

  // false: the GPUs keep the whole base in their parameters (write_quantized, as without ZeRO-3).
  bool gathered() const { return !gathering_.empty(); }
  const compiler::WeightGathering& gathering() const { return gathering_; }
  // On local rank `local`'s thread (its GPU current): its share in device memory (Sharded), zeroed;
  // local rank 0 allocates the pinned image (Offloaded).
  void allocate(int local);
  // store_quantized, on local rank `local`'s thread: its pieces of `weight` to its GPU (Sharded; local
  // rank 0 also keeps the host copy the evaluator reads), or into the image (Offloaded, local 0).
  void keep(int local, const models::QuantizedWeight& weight, const QuantizedPieces& pieces);
  // How local rank `local`'s gatherer fills a group on the side stream (`communicator`: its side one).
  CudaWeightGatherer::Fill fill(int local, distributed::Communicator& communicator) const;
  // The whole base's piece `name` in host memory (the evaluator's source).
  std::span<const std::byte> host_piece(const std::string& name) const;
  // On local rank `local`'s thread: its device memory back.
  void release(int local);

private:
  const compiler::ExecutionPlan& plan_;
  QuantizedBaseKeeping keeping_;
  compiler::WeightGathering gathering_;
  std::vector<QuantizedBaseShard> shards_;             // per local rank
  std::vector<cuda::DeviceBuffer<std::byte>> owned_;   // Sharded: per local rank
  cuda::PinnedHostBuffer<std::byte> image_;            // Offloaded
  std::map<std::string, std::vector<std::byte>> host_copies_;  // Sharded: the evaluator's source
};

}  // namespace surogate::train
