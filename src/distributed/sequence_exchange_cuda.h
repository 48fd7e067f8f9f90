// The CUDA binders of sequence parallelism's exchange ops (distributed/sequence_exchange_ops.h) for
// one GPU rank: two strided copies (cudaMemcpy2DAsync) around the group's NCCL all-to-all, all on
// the step's stream, through two buffers of the backend's shared scratch. The rank's table is made
// before its backend loads the plan, and its group communicator after the backend's stream exists
// (NCCL enqueues on that stream), so the binders read the communicator from a slot the device fills
// in between; a kernel runs only once it is set. BF16 or F32 tensors. Compiled only with CUDA.
#pragma once

#include "distributed/communicator.h"
#include "runtime/cuda_op_table.h"

namespace surogate::distributed {

struct SequenceGroupSlot {
  Communicator* communicator = nullptr;  // this rank's sequence group, on the backend's stream
};

// Adds sequence_to_heads and heads_to_sequence to `table` (a copy of the built-in table, one per
// rank); `slot` must outlive every backend bound from it.
void add_sequence_exchange_cuda_ops(runtime::CudaOpTable& table, const SequenceGroupSlot* slot);

}  // namespace surogate::distributed
