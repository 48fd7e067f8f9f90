// The collectives data, sequence and pipeline parallelism need, behind one interface for every
// transport: gloo for
// CPU ranks (gloo_communicator.h), NCCL for GPUs (nccl_communicator.h). Buffers are contiguous
// F32 or BF16 elements in the memory of the rank's device (host memory for gloo, device memory
// for NCCL, where the calls are enqueued on the communicator's stream).
//
// Every rank of the world calls the same collectives in the same order with the same counts.
// Sums are computed in the buffer's dtype (BF16: each pairwise sum in fp32, rounded to nearest
// even), and every rank receives the same bits. Pieces: a buffer split into world_size
// consecutive pieces, piece r belonging to rank r (shard_placement.h); pieces may differ in
// size and may be empty.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "core/dtype.h"

namespace surogate::distributed {

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual std::string_view name() const = 0;  // "gloo", "nccl"
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // data[0, count) ← the sum over ranks of data[0, count).
  virtual void all_reduce_sum(void* data, size_t count, DType dtype) = 0;
  // data[0, count) ← the elementwise max over ranks of non-negative floats (FP8 amaxes), compared
  // as their bit patterns (so a NaN wins), as quant::amax_max compares them.
  virtual void all_reduce_amax(float* data, size_t count) = 0;
  // This rank's piece ← the sum over ranks of that piece; the other pieces are left undefined.
  virtual void reduce_scatter_sum(void* data, std::span<const size_t> piece_counts, DType dtype) = 0;
  // Every piece ← its owner's piece (in place: each rank's own piece is its input).
  virtual void all_gather(void* data, std::span<const size_t> piece_counts, DType dtype) = 0;
  // data[0, count) ← root's data[0, count).
  virtual void broadcast(void* data, size_t count, DType dtype, int root) = 0;
  // Returns once every rank has entered it.
  virtual void barrier() = 0;
  // Sequence parallelism: `input` holds world_size consecutive chunks of `chunk_count` elements,
  // chunk r for rank r; `output` receives them the other way round, chunk r from rank r (input and
  // output are distinct buffers of world_size · chunk_count elements). A permutation: no arithmetic.
  virtual void all_to_all(const void* input, void* output, size_t chunk_count, DType dtype) = 0;
  // Pipeline parallelism, point to point: send() posts `data` for `peer` and returns; the buffer
  // stays untouched until wait_sends(), which returns once every send posted so far has completed.
  // receive() returns once the data has arrived. A send and a receive match by (peer, tag); a rank
  // posts its sends before it blocks in a receive that depends on a peer's progress, so schedules
  // whose receives follow the sends they need cannot deadlock.
  virtual void send(const void* data, size_t count, DType dtype, int peer, uint32_t tag) = 0;
  virtual void receive(void* data, size_t count, DType dtype, int peer, uint32_t tag) = 0;
  virtual void wait_sends() = 0;
  // Returns once the collectives called so far have completed. gloo's return complete, so it
  // does nothing; NCCL waits for the communicator's stream (and so for whatever else was enqueued
  // on it) by polling it together with NCCL's asynchronous error: a peer that stopped, or nothing
  // completing within the timeout, aborts the communicator and throws RankFailure instead of
  // leaving this rank waiting forever.
  virtual void synchronize() {}
};

// The element size of a collective's dtype (F32 or BF16; anything else is an internal error).
size_t collective_element_bytes(DType dtype);

}  // namespace surogate::distributed
