// FP8 block quantization of a 2-D weight [rows, cols] (QLoRA's qlora_fp8 base, and the format of
// Hugging Face FP8 releases: config.json's quantization_config {quant_method: "fp8", fmt: "e4m3",
// weight_block_size: [block_rows, block_cols]}, tensors `<name>.weight` F8_E4M3 [rows, cols] and
// `<name>.weight_scale_inv` F32 [row_blocks, col_blocks]):
//   - the weight is cut into blocks of block_rows × block_cols (the last block row / column is
//     shorter when rows / cols are not multiples of the block);
//   - per block amax = max |x|, scale = fp8_scale(amax, E4M3) (448 / amax in fp32; 1 for a block
//     of zeros), each code = fp8_encode(x · scale) (the product rounded to fp32 first; quant/fp8.h:
//     round to nearest even, saturating), and scale_inv = 1 / scale (fp32) is what is stored;
//   - the value a code stands for is fp8_decode(code) · scale_inv in fp32, then rounded to the
//     weight's dtype (the CUDA kernel, cuda/kernels/dequantize_fp8_blocks.h, bit for bit).
// Codes are stored row-major like the weight, scale_inv row-major over the blocks.
#pragma once

#include <cstdint>

namespace surogate::quant {

struct Fp8BlockShape {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t block_rows = 128;
  int64_t block_cols = 128;
  int64_t numel() const { return rows * cols; }
  int64_t row_blocks() const { return (rows + block_rows - 1) / block_rows; }
  int64_t col_blocks() const { return (cols + block_cols - 1) / block_cols; }
  int64_t blocks() const { return row_blocks() * col_blocks(); }
};

// Quantizes the block rows [first, end) of `values` (rows × cols floats): their rows of `codes`
// and their entries of `scale_inv`. Block rows are independent (callers split the work over threads).
void quantize_fp8_blocks(const float* values, const Fp8BlockShape& shape, int64_t first_block_row,
                         int64_t end_block_row, uint8_t* codes, float* scale_inv);

// One block (block_row, block_col) of the same: its codes and its scale_inv entry. Blocks are
// independent (a weight with few block rows still spreads over every core).
void quantize_fp8_block(const float* values, const Fp8BlockShape& shape, int64_t block_row, int64_t block_col,
                        uint8_t* codes, float* scale_inv);

// The fp32 values of the block rows [first, end) into `out` (rows × cols floats in all).
void dequantize_fp8_blocks(const uint8_t* codes, const float* scale_inv, const Fp8BlockShape& shape,
                           int64_t first_block_row, int64_t end_block_row, float* out);

}  // namespace surogate::quant
