// The copies of `concat` / `split` on the GPU in one launch: rows of a joined tensor, each row the
// pieces' rows side by side (a piece is a contiguous run of bytes per row). One cudaMemcpy2DAsync
// per piece costs ~5 µs each on narrow pieces (LoRA's batched rank-16 products: 32-byte rows), so
// the kernel moves every piece at once, in the widest unit (16, 8, 4, 2 or 1 bytes) that every
// width, offset and pointer allows. Byte for byte what the CPU kernels of ops/defs/concat_split_def.cpp
// write.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace surogate::runtime::cuda_kernels {

struct PieceCopy {
  static constexpr int kMaxPieces = 8;
  int pieces = 0;
  void* piece_data[kMaxPieces] = {};     // each piece [outer][widths[p]] bytes, contiguous
  int64_t offsets[kMaxPieces + 1] = {};  // byte offset of each piece in a joined row; offsets[pieces] = the row
  int64_t outer = 0;                     // rows
  void* joined = nullptr;                // [outer][offsets[pieces]] bytes
};

// concat (pieces → joined) or split (joined → pieces); `copy.pieces` ≤ kMaxPieces.
void copy_pieces(const PieceCopy& copy, bool into_joined, cudaStream_t stream);

}  // namespace surogate::runtime::cuda_kernels
