// The per-tensor FP8 weight format; see fp8_tensor.h.
#include "ops/fp8_tensor.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "ops/parallel_for.h"
#include "quant/fp8.h"

namespace surogate::ops {
namespace {

// out[j * out_stride + k] = in[k * in_stride + j] for j, k < 8: each row of 8 codes read as one
// little-endian word, each output row assembled as one.
void transpose_8x8(const uint8_t* in, int64_t in_stride, uint8_t* out, int64_t out_stride) {
  static_assert(std::endian::native == std::endian::little, "the words hold the codes in memory order");
  uint64_t rows[8];
  for (int k = 0; k < 8; ++k) std::memcpy(&rows[k], in + k * in_stride, 8);
  for (int j = 0; j < 8; ++j) {
    uint64_t column = 0;
    for (int k = 0; k < 8; ++k) column |= ((rows[k] >> (8 * j)) & 0xFFu) << (8 * k);
    std::memcpy(out + j * out_stride, &column, 8);
  }
}

}  // namespace

float quantize_fp8_tensor(const float* values, int64_t rows, int64_t columns, uint8_t* codes, uint8_t* transposed) {
  // max |w| per row on all cores, then over rows (amaxes compare as bit patterns, quant/fp8_scaling.h).
  std::vector<uint32_t> row_amax(static_cast<size_t>(rows), 0u);
  parallel_for(rows, [&](int64_t row) {
    uint32_t largest = 0;
    for (int64_t column = 0; column < columns; ++column) {
      largest = std::max(largest, std::bit_cast<uint32_t>(values[row * columns + column]) & 0x7FFFFFFFu);
    }
    row_amax[static_cast<size_t>(row)] = largest;
  });
  uint32_t amax = 0;
  for (uint32_t value : row_amax) amax = std::max(amax, value);
  const float scale = quant::fp8_scale(std::bit_cast<float>(amax), quant::Fp8Format::E4M3);
  parallel_for(rows, [&](int64_t row) {
    quant::fp8_encode_scaled(values + row * columns, columns, scale, codes + row * columns, quant::Fp8Format::E4M3);
  });
  // The transpose in 64 × 64 tiles (a tile's reads and writes stay in cache), 8 × 8 codes at a
  // time through 64-bit words where the tile has them (6× the speed of a byte at a time: the
  // start-up transposes an 8B model's 7.6 G codes), byte by byte at its ragged edges.
  constexpr int64_t kTile = 64;
  const int64_t row_tiles = (rows + kTile - 1) / kTile, column_tiles = (columns + kTile - 1) / kTile;
  parallel_for(row_tiles * column_tiles, [&](int64_t tile) {
    const int64_t row0 = tile / column_tiles * kTile, column0 = tile % column_tiles * kTile;
    const int64_t row_end = std::min(rows, row0 + kTile), column_end = std::min(columns, column0 + kTile);
    const int64_t row_end8 = row0 + (row_end - row0) / 8 * 8, column_end8 = column0 + (column_end - column0) / 8 * 8;
    for (int64_t row = row0; row < row_end8; row += 8) {
      for (int64_t column = column0; column < column_end8; column += 8) {
        transpose_8x8(codes + row * columns + column, columns, transposed + column * rows + row, rows);
      }
    }
    for (int64_t row = row0; row < row_end; ++row) {
      for (int64_t column = row < row_end8 ? column_end8 : column0; column < column_end; ++column) {
        transposed[column * rows + row] = codes[row * columns + column];
      }
    }
  });
  return 1.0f / scale;
}

}  // namespace surogate::ops
