// The two FP8 formats of Hopper's tensor cores (OCP 8-bit floats), as the CUDA conversions
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) produce them, bit for bit:
//   E4M3 ("fn"): bias 7, 3 mantissa bits, no infinities; largest finite 448 (0x7E), NaN 0x7F,
//                subnormals down to 2^-9;
//   E5M2:        bias 15, 2 mantissa bits; largest finite 57344 (0x7B), subnormals down to 2^-16.
// Encoding rounds to nearest, ties to even, and saturates: anything of magnitude ≥ the largest
// finite value (infinity included) becomes ± that value; NaN becomes 0x7F (the sign kept).
//
// Per-tensor scaling (the fp8_hybrid recipe): q = encode(x · scale) with scale = max / amax, the
// product rounded to fp32 first (one multiply, no fused operation), and the value q stands for is
// decode(q) · scale_inv with scale_inv = 1 / scale (fp32 division). fp8_scale() is the one rule for
// both backends: an amax that is zero or not finite gives scale 1.
#pragma once

#include <array>
#include <cstdint>

namespace surogate::quant {

enum class Fp8Format : uint8_t { E4M3, E5M2 };

float fp8_max(Fp8Format format);  // 448 or 57344
uint8_t fp8_encode(float x, Fp8Format format);
// codes[i] = fp8_encode(x[i] · scale) for i < count (the loop beside the encoder, so it inlines:
// the start-up quantizes billions of values this way).
void fp8_encode_scaled(const float* x, int64_t count, float scale, uint8_t* codes, Fp8Format format);
float fp8_decode(uint8_t code, Fp8Format format);
// fp8_decode of each of the 256 codes, as a table (built once per format).
const std::array<float, 256>& fp8_decoded(Fp8Format format);

// max / amax in fp32, or 1 when amax is 0, negative, NaN or infinite.
float fp8_scale(float amax, Fp8Format format);

}  // namespace surogate::quant
