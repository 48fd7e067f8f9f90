// The per-tensor FP8 weight format; see fp8_tensor.h.
#include "ops/fp8_tensor.h"

#include <algorithm>
#include <bit>
#include <vector>

#include "ops/parallel_for.h"
#include "quant/fp8.h"

namespace surogate::ops {

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
  // The transpose in 64 × 64 tiles (a tile's reads and writes stay in cache).
  constexpr int64_t kTile = 64;
  const int64_t row_tiles = (rows + kTile - 1) / kTile, column_tiles = (columns + kTile - 1) / kTile;
  parallel_for(row_tiles * column_tiles, [&](int64_t tile) {
    const int64_t row0 = tile / column_tiles * kTile, column0 = tile % column_tiles * kTile;
    for (int64_t row = row0; row < std::min(rows, row0 + kTile); ++row) {
      for (int64_t column = column0; column < std::min(columns, column0 + kTile); ++column) {
        transposed[column * rows + row] = codes[row * columns + column];
      }
    }
  });
  return 1.0f / scale;
}

}  // namespace surogate::ops
