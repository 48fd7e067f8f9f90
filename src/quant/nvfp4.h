// NVFP4: NVIDIA's 4-bit float format with two-level scaling (the storage of qlora_fp4, and the
// quantizer of the nvfp4 recipe, emulated exactly on the CPU). A tensor [rows, cols] is stored as
//   - E2M1 codes, one per value: sign, 2 exponent bits (bias 1), 1 mantissa bit; magnitudes
//     0, 0.5, 1, 1.5, 2, 3, 4, 6; two per byte along a row, the even column in the low nibble
//     (the order of PTX's cvt.rn.satfinite.e2m1x2.f32 and of NVFP4 checkpoints), an odd column
//     count padding each row's last high nibble with +0: [rows, ceil(cols / 2)] bytes;
//   - one E4M3 block scale per 16 consecutive values of a row: [rows, ceil(cols / 16)] (a short
//     last block when cols is not a multiple of 16);
//   - one fp32 tensor scale `decode` for the whole tensor.
// The value a code stands for is (e2m1(code) · e4m3(block scale)) · decode in fp32 (the first
// product is exact), then rounded to the weight's dtype.
//
// Quantization, all in fp32 with every operation rounded on its own (no fused multiply-add), so the
// CPU, the GPU and tests/python/test_nvfp4_reference.py's numpy oracle agree bit for bit:
//   amax    = max |x| over the tensor;
//   encode  = (6 · M) / amax, M = 448 (the E4M3 maximum) — or 1 when amax is 0 or not finite,
//             at most FLT_MAX; decode = 1 / encode;
//   per block: bmax = max |x| over its values, t = bmax · encode,
//             scale = e4m3(t / L) (quant/fp8.h: round to nearest even, saturating), L = 6;
//             factor = encode / scale (0 when the scale is 0: every code +0);
//             code_i = e2m1(x_i · factor): round to nearest even, saturating at ±6, |x| ≤ 0.25 to
//             a zero that keeps the sign, NaN to +6 — what cvt.rn.satfinite.e2m1x2.f32 does.
// Four Over Six (qlora_four_over_six; Cook et al., "Four Over Six: More Accurate NVFP4 Quantization
// with Adaptive Block Scaling", 2025): the tensor maps amax to 6 · 256 instead of 6 · 448 (M = 256,
// so a block scale raised by 1.5 stays below 448), and each block is quantized twice, with L = 6
// (its largest value on 6) and L = 4 (on 4, where E2M1's grid is finer: 3 and 4 instead of 4 and
// 6). The block keeps the candidate whose dequantized values have the smaller sum of squared errors
// Σ (value_i − x_i)² (fp32, summed in column order); a tie keeps L = 6. Dequantization is the same
// for both: the choice lives in the block scale.
#pragma once

#include <array>
#include <cstdint>

namespace surogate::quant {

// E2M1's 16 values, code order (codes 8–15 are the negatives of 0–7; 8 is −0).
extern const std::array<float, 16> kE2m1Values;

// The 4-bit code of x (cvt.rn.satfinite.e2m1x2.f32's rounding, see the file comment).
uint8_t e2m1_encode(float x);

inline constexpr int64_t kNvfp4Block = 16;

struct Nvfp4Shape {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t numel() const { return rows * cols; }
  int64_t packed_cols() const { return (cols + 1) / 2; }
  int64_t scale_cols() const { return (cols + kNvfp4Block - 1) / kNvfp4Block; }
  int64_t packed_bytes() const { return rows * packed_cols(); }
  int64_t block_scales() const { return rows * scale_cols(); }
};

enum class Nvfp4ScaleRule : uint8_t {
  Six,          // every block's largest value on 6 (NVIDIA's NVFP4)
  FourOverSix,  // per block 4 or 6, the smaller squared error (qlora_four_over_six)
};

struct Nvfp4TensorScale {
  float encode = 1.0f;
  float decode = 1.0f;  // what is stored
};

// The tensor scale of a tensor whose largest magnitude is `amax`.
Nvfp4TensorScale nvfp4_tensor_scale(float amax, Nvfp4ScaleRule rule);

// Quantizes the rows [first_row, end_row) of `values` (rows × cols floats): their bytes of `packed`
// and their E4M3 codes of `block_scales`. Rows are independent (callers split the work over threads).
void quantize_nvfp4_rows(const float* values, const Nvfp4Shape& shape, const Nvfp4TensorScale& scale,
                         Nvfp4ScaleRule rule, int64_t first_row, int64_t end_row, uint8_t* packed,
                         uint8_t* block_scales);

// The fp32 values of the rows [first_row, end_row) into `out` (rows × cols floats in all).
void dequantize_nvfp4_rows(const uint8_t* packed, const uint8_t* block_scales, float decode, const Nvfp4Shape& shape,
                           int64_t first_row, int64_t end_row, float* out);

}  // namespace surogate::quant
