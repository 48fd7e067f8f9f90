// ZeRO-3 on a CPU rank (parallel/cpu_rank_host.cpp): the rank's pieces of the gathered weights,
// fp32 — the masters of its trainable weights, which its optimizer updates in place — and the
// step observer that fills its backend's gather buffers (compiler/weight_gathering.h) before the
// steps that read them: the rank copies its piece of the group into the buffer and gloo's
// all-gather brings the other ranks' pieces. On CPU ranks the gather runs at once, when the
// schedule issues it (one use ahead of its first step, as GPUs prefetch), so a buffer placement
// that let a prefetch overwrite weights still being read would change the numbers: the CPU ranks
// check the schedule exactly.
#pragma once

#include <span>
#include <vector>

#include "compiler/weight_gathering.h"
#include "distributed/communicator.h"
#include "runtime/cpu_backend.h"
#include "runtime/step_observer.h"

namespace surogate::train {

class CpuWeightGatherer final : public runtime::StepObserver {
public:
  // `backend` has loaded the plan `gathering` was applied to; `rank` is the global rank.
  CpuWeightGatherer(const compiler::WeightGathering& gathering, int rank, runtime::CpuBackend& backend,
                    distributed::Communicator& communicator);

  // This rank's copy of `tensor`, or an empty span when another rank keeps it.
  std::span<float> owned(graph::TensorId tensor);
  // The rank that keeps `tensor`.
  int owner(graph::TensorId tensor) const;

  void before_step(size_t step) override;
  void after_step(size_t) override {}

private:
  void gather(size_t group);

  const compiler::WeightGathering& gathering_;
  int rank_;
  runtime::CpuBackend& backend_;
  distributed::Communicator& communicator_;
  std::vector<float> owned_;  // this rank's pieces of every group, in group order
  std::vector<std::vector<size_t>> piece_counts_;  // per group
};

}  // namespace surogate::train
