// One-launch concat / split copies; see piece_copy.h.
#include "cuda/kernels/piece_copy.h"

#include <algorithm>

#include "cuda/cuda_check.h"

namespace surogate::cuda {
namespace {

template <int kBytes>
struct Unit;
template <>
struct Unit<16> { using type = uint4; };
template <>
struct Unit<8> { using type = uint2; };
template <>
struct Unit<4> { using type = uint32_t; };
template <>
struct Unit<2> { using type = uint16_t; };
template <>
struct Unit<1> { using type = uint8_t; };

// Thread i moves unit i of the pieces' bytes (row-major over rows, then the pieces' span of the row).
template <int kBytes>
__global__ void copy_pieces_kernel(PieceCopy copy, bool into_joined) {
  using T = typename Unit<kBytes>::type;
  const int64_t span = copy.offsets[copy.pieces] - copy.offsets[0];
  const int64_t row_units = span / kBytes;
  const int64_t total = copy.outer * row_units;
  for (int64_t index = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; index < total;
       index += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = index / row_units;
    const int64_t within = copy.offsets[0] + (index - row * row_units) * kBytes;  // byte in the joined row
    int piece = 0;
    while (piece + 1 < copy.pieces && copy.offsets[piece + 1] <= within) ++piece;
    const int64_t width = copy.offsets[piece + 1] - copy.offsets[piece];
    auto* joined_row = static_cast<unsigned char*>(copy.joined) + row * copy.joined_row;
    auto* piece_row = static_cast<unsigned char*>(copy.piece_data[piece]) + row * width;
    T* joined = reinterpret_cast<T*>(joined_row + within);
    T* part = reinterpret_cast<T*>(piece_row + (within - copy.offsets[piece]));
    if (into_joined) {
      *joined = *part;
    } else {
      *part = *joined;
    }
  }
}

// The widest unit that divides every offset (hence every width), the row and every address.
int unit_bytes(const PieceCopy& copy) {
  uint64_t bits = reinterpret_cast<uintptr_t>(copy.joined) | static_cast<uint64_t>(copy.joined_row) |
                  static_cast<uint64_t>(copy.offsets[0]);
  for (int p = 0; p < copy.pieces; ++p) {
    bits |= reinterpret_cast<uintptr_t>(copy.piece_data[p]) | static_cast<uint64_t>(copy.offsets[p + 1]);
  }
  for (int unit = 16; unit > 1; unit /= 2) {
    if (bits % unit == 0) return unit;
  }
  return 1;
}

template <int kBytes>
void launch(const PieceCopy& copy, bool into_joined, cudaStream_t stream) {
  const int64_t units = copy.outer * ((copy.offsets[copy.pieces] - copy.offsets[0]) / kBytes);
  const unsigned blocks = static_cast<unsigned>(std::clamp<int64_t>((units + 255) / 256, 1, 4096));
  copy_pieces_kernel<kBytes><<<blocks, 256, 0, stream>>>(copy, into_joined);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void copy_pieces(const PieceCopy& copy, bool into_joined, cudaStream_t stream) {
  CUDA_REQUIRE(copy.pieces > 0 && copy.pieces <= PieceCopy::kMaxPieces && copy.offsets[copy.pieces] <= copy.joined_row,
               "copy_pieces: 1 to 8 pieces inside the joined row");
  if (copy.outer == 0 || copy.offsets[copy.pieces] == copy.offsets[0]) return;
  switch (unit_bytes(copy)) {
    case 16: launch<16>(copy, into_joined, stream); break;
    case 8: launch<8>(copy, into_joined, stream); break;
    case 4: launch<4>(copy, into_joined, stream); break;
    case 2: launch<2>(copy, into_joined, stream); break;
    default: launch<1>(copy, into_joined, stream); break;
  }
}

}  // namespace surogate::cuda
