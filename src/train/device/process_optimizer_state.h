// The optimizer state of ranks spread over processes, moved to and from the leader (rank 0's
// process, which writes checkpoints and reads them on resume). Under ZeRO each rank holds the
// state of its own shard; the shards in rank order are exactly one rank's optimizer state, which
// is what a checkpoint holds, so the leader needs every process's shards to save and hands them
// back after a resume:
//   gather(local): every process sends its ranks' state tensors (names, dtypes, shapes, bytes);
//     the leader returns its own views followed by copies of the others', in rank order. The
//     copies are held here, so restore_checkpoint can fill them;
//   scatter(local): the leader sends each process the bytes of its copies (as a restore left
//     them), which land in that process's own views; then the copies are released. With no
//     copies held (a fresh start) nothing moves.
// Both are collective: every process calls them at the same point. One process: gather returns
// `local` and scatter does nothing.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "distributed/process_world.h"
#include "train/optim/optimizer.h"

namespace surogate::train {

class ProcessOptimizerState {
public:
  explicit ProcessOptimizerState(distributed::ProcessWorld* world) : world_(world) {}

  std::vector<StateTensor> gather(std::vector<StateTensor> local);
  void scatter(std::span<const StateTensor> local);

private:
  struct Held {
    std::vector<StateTensor> tensors;  // views into bytes
    std::vector<std::byte> bytes;
  };
  distributed::ProcessWorld* world_;
  std::vector<Held> held_;  // the leader's copies, one per other process (index 0: process 1)
};

}  // namespace surogate::train
