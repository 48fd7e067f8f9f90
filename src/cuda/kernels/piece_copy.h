// The copies of `concat` / `split` on the GPU in one launch: rows of a joined tensor, each row the
// pieces' rows side by side (a piece is a contiguous run of bytes per row). One cudaMemcpy2DAsync
// per piece costs ~5 µs each on narrow pieces (LoRA's batched rank-16 products: 32-byte rows), so
// the kernel moves up to 8 pieces at once (the binders launch it per 8), in the widest unit (16, 8, 4, 2 or 1 bytes) that every
// width, offset and pointer allows. Byte for byte what the CPU kernels of ops/defs/concat_split_def.cpp
// write.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace surogate::cuda {

// Up to kMaxPieces pieces of one launch: piece p is bytes [offsets[p], offsets[p + 1]) of every
// joined row (consecutive pieces, the first need not start the row).
struct PieceCopy {
  static constexpr int kMaxPieces = 8;
  int pieces = 0;
  void* piece_data[kMaxPieces] = {};     // each piece [outer][offsets[p + 1] − offsets[p]] bytes, contiguous
  int64_t offsets[kMaxPieces + 1] = {};
  int64_t outer = 0;                     // rows
  int64_t joined_row = 0;                // bytes of one joined row
  void* joined = nullptr;                // [outer][joined_row] bytes
};

// concat (pieces → joined) or split (joined → pieces) of the pieces `copy` names.
void copy_pieces(const PieceCopy& copy, bool into_joined, cudaStream_t stream);

}  // namespace surogate::cuda
