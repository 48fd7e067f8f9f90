// FP8 block quantization; see fp8_blocks.h.
#include "quant/fp8_blocks.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "quant/fp8.h"

namespace surogate::quant {
namespace {

constexpr Fp8Format kFormat = Fp8Format::E4M3;

// The element range [begin, end) of block row `block_row` or block column `block_col`.
struct Range {
  int64_t begin;
  int64_t end;
};
Range block_range(int64_t index, int64_t block, int64_t size) {
  return {index * block, std::min(size, (index + 1) * block)};
}

}  // namespace

void quantize_fp8_block(const float* values, const Fp8BlockShape& shape, int64_t block_row, int64_t block_col,
                        uint8_t* codes, float* scale_inv) {
  const Range rows = block_range(block_row, shape.block_rows, shape.rows);
  const Range cols = block_range(block_col, shape.block_cols, shape.cols);
  float amax = 0.0f;
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    for (int64_t c = cols.begin; c < cols.end; ++c) amax = std::max(amax, std::fabs(values[r * shape.cols + c]));
  }
  const float scale = fp8_scale(amax, kFormat);
  scale_inv[block_row * shape.col_blocks() + block_col] = 1.0f / scale;
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    fp8_encode_scaled(values + r * shape.cols + cols.begin, cols.end - cols.begin, scale,
                      codes + r * shape.cols + cols.begin, kFormat);
  }
}

void quantize_fp8_blocks(const float* values, const Fp8BlockShape& shape, int64_t first_block_row,
                         int64_t end_block_row, uint8_t* codes, float* scale_inv) {
  for (int64_t block_row = first_block_row; block_row < end_block_row; ++block_row) {
    for (int64_t block_col = 0; block_col < shape.col_blocks(); ++block_col) {
      quantize_fp8_block(values, shape, block_row, block_col, codes, scale_inv);
    }
  }
}

void dequantize_fp8_blocks(const uint8_t* codes, const float* scale_inv, const Fp8BlockShape& shape,
                           int64_t first_block_row, int64_t end_block_row, float* out) {
  const std::array<float, 256>& decoded = fp8_decoded(kFormat);
  for (int64_t block_row = first_block_row; block_row < end_block_row; ++block_row) {
    const Range rows = block_range(block_row, shape.block_rows, shape.rows);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
      for (int64_t c = 0; c < shape.cols; ++c) {
        const float factor = scale_inv[block_row * shape.col_blocks() + c / shape.block_cols];
        out[r * shape.cols + c] = decoded[codes[r * shape.cols + c]] * factor;
      }
    }
  }
}

}  // namespace surogate::quant
