// Which of a GPU rank's per-parameter buffers live in pinned host memory instead of on the GPU,
// and how the kernels reach them (the offload_* options). Plain C++ with no CUDA, so the memory
// prediction (memory_budget.h, --dry-run) and the CUDA device (cuda_rank_state.h) share one plan.
//
//   offload_master     the fp32 master weights;
//   offload_optimizer  the optimizer state;
//   offload_grads      the gradient accumulators. They are written by every micro-batch's
//                      accumulate kernel, so they are always reached through the mapping
//                      (zero-copy): 8 bytes (fp32) per trainable parameter cross the host link
//                      per micro-batch.
// Masters and optimizer state are read and written once per optimizer step, by the optimizer:
//   use_zero_copy: true   the optimizer kernels address the host memory through the mapping;
//   use_zero_copy: false  (default) the step is staged: the trainable tensors are cut into chunks
//                         of consecutive whole tensors, and each chunk's masters and state are
//                         copied into one of two GPU slots, stepped there and copied back, the
//                         copies of the neighbouring chunks overlapping its kernels
//                         (staged_optimizer.h). A slot holds the largest chunk, at least the
//                         largest tensor (the embeddings in full fine-tuning).
// use_write_combined allocates the host memory write-combined (PinnedHostBuffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "config/config_enums.h"
#include "config/sections/offload.h"

namespace surogate::train {

// One trainable tensor in the rank's flat master / accumulator layout (cuda_rank/trainable_layout.h).
struct TrainableExtent {
  int64_t offset = 0;  // first element in the flat buffers
  int64_t padded = 0;  // elements it spans there (its count rounded up for alignment)
  int64_t count = 0;   // its elements
};

struct HostOffloadPlan {
  bool masters = false;
  bool optimizer = false;
  bool gradients = false;
  bool staged = false;          // masters and/or optimizer state staged through two GPU slots
  bool write_combined = false;

  struct Chunk {
    size_t first = 0, end = 0;  // the tensors [first, end) of the extents the plan was made from
    int64_t master_offset = 0;  // their span of the flat buffers
    int64_t master_count = 0;
    size_t state_bytes = 0;     // their optimizer state as the staged optimizers lay it out
  };
  std::vector<Chunk> chunks;    // staged only
  size_t slot_master_bytes = 0; // one slot's room for a chunk's masters (0: masters stay on the GPU)
  size_t slot_state_bytes = 0;  // and for its optimizer state (0: the state stays on the GPU)

  bool any() const { return masters || optimizer || gradients; }
  // GPU bytes of the two slots.
  size_t staging_bytes() const { return staged ? 2 * (slot_master_bytes + slot_state_bytes) : 0; }
};

// A chunk's masters and state stay under this many bytes unless one tensor alone is larger.
inline constexpr size_t kOffloadChunkBytes = size_t{256} << 20;

// The plan for the trainable tensors `trainable` (in flat-layout order) of one rank, whose optimizer
// is `algorithm`, with chunks of at most `chunk_bytes` (tests make them small).
HostOffloadPlan plan_host_offload(const config::Offload& offload, surogate::Optimizer algorithm,
                                  std::span<const TrainableExtent> trainable, size_t chunk_bytes = kOffloadChunkBytes);

// GPU bytes a staged optimizer's state for one tensor of `count` elements takes in a slot
// (adamw, adamw_8bit: MirroredState's 16-byte rounding per tensor, device_optimizer.h).
size_t staged_state_bytes(surogate::Optimizer algorithm, int64_t count);

}  // namespace surogate::train
