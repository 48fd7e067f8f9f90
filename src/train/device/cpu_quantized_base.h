// The quantized base of a ZeRO-3 world's CPU ranks in this process (quantized_base_shards.h says
// what each of persistent_quants / offload_quants keeps where): Sharded, each rank thread keeps
// its pieces' bytes and gloo's all-gather brings the others' into the layer's gather buffer;
// Offloaded, the process keeps one image of the whole base (host memory is the CPU ranks' only
// memory: this is what a GPU's pinned image is, so the schedule and the bytes are checked exactly)
// and each rank copies a layer's pieces from it. The fills run when the schedule issues them, one
// use ahead, as CpuWeightGatherer's do.
#pragma once

#include <memory>
#include <vector>

#include "distributed/communicator.h"
#include "runtime/cpu_backend.h"
#include "runtime/step_observer.h"
#include "train/device/quantized_base_shards.h"

namespace surogate::train {

class CpuQuantizedBase {
public:
  // Schedules the quantized base of `plan` (its other weights' gathering already applied) for the
  // world's ranks first_rank .. first_rank + local_ranks - 1 of `world_size`, and applies it.
  CpuQuantizedBase(compiler::ExecutionPlan& plan, QuantizedBaseKeeping keeping, int world_size, int first_rank,
                   int local_ranks);

  // false: the ranks keep the whole base in their parameters (write_quantized, as without ZeRO-3).
  bool gathered() const { return !gathering_.empty(); }
  // store_quantized: `weight`'s pieces into each local rank's share, or into the image.
  void keep(const compiler::ExecutionPlan& plan, const models::QuantizedWeight& weight, const QuantizedPieces& pieces);
  // The observer filling local rank `local`'s gather buffers of the quantized base.
  std::unique_ptr<runtime::StepObserver> gatherer(int local, runtime::CpuBackend& backend,
                                                  distributed::Communicator& communicator) const;

private:
  compiler::WeightGathering gathering_;
  std::vector<QuantizedBaseShard> shards_;      // per local rank (Offloaded: each the image)
  std::vector<std::vector<std::byte>> owned_;   // per local rank, or the one image
};

}  // namespace surogate::train
