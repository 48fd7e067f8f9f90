// The k-quant reference algorithms of ggml (Q4_K, Q5_K: asymmetric 32-value sub-blocks whose scale
// and minimum are fitted by a weighted least-squares search, then stored as 6-bit multiples of two
// fp16 super-block scales; Q6_K: symmetric 16-value sub-blocks with int8 scales). Every float
// operation mirrors the reference's order so the bytes match llama-quantize's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/bfloat16.h"
#include "gguf/quantize_k.h"

namespace surogate::gguf::detail {
namespace {

constexpr int kSuper = 256;
constexpr float kGroupMaxEpsilon = 1e-15f;

void store_f16(uint8_t* at, float value) {
  const uint16_t bits = float_to_f16(value);
  std::memcpy(at, &bits, sizeof(bits));
}
float load_f16(const uint8_t* at) {
  uint16_t bits;
  std::memcpy(&bits, at, sizeof(bits));
  return f16_to_float(bits);
}

// Fits x ≈ scale · L + min (min ≤ 0) with L in [0, nmax], weighting squared errors by `weights`:
// starts from the min/max grid, then tries nstep + 1 stretched grids and keeps the least-squares
// scale and minimum of the best one. Returns the scale; *negated_min receives -min.
float fit_scale_and_min(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* negated_min,
                        float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, uint8_t{0});
    *negated_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = diff * diff;
    best_error += weights[i] * diff;
  }
  uint8_t trial[32];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
      trial[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * static_cast<float>(l);
      sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
      sum_xl += w * static_cast<float>(l) * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * trial[i] + this_min - x[i];
        diff = diff * diff;
        error += weights[i] * diff;
      }
      if (error < best_error) {
        std::copy(trial, trial + n, L);
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *negated_min = -min;
  return scale;
}

// Symmetric fit of 16 values to L - nmax with L in [0, 2·nmax), weights x² (ggml's make_qx_quants
// with rmse_type 1): the grid of the value of largest magnitude, then 18 neighbouring grids.
float fit_symmetric_scale(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEpsilon) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// The 12 bytes of eight 6-bit scales and eight 6-bit minimums (Q4_K, Q5_K): entries 0-3 in the low
// six bits of bytes 0-3 / 4-7, entries 4-7 as nibbles in bytes 8-11 with their top two bits in
// the top bits of bytes 0-7.
void pack_scales(const uint8_t* scales, const uint8_t* mins, uint8_t* packed) {
  std::memset(packed, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      packed[j] = scales[j];
      packed[j + 4] = mins[j];
    } else {
      packed[j + 4] = static_cast<uint8_t>((scales[j] & 0xF) | ((mins[j] & 0xF) << 4));
      packed[j - 4] |= static_cast<uint8_t>((scales[j] >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((mins[j] >> 4) << 6);
    }
  }
}

void unpack_scale(int j, const uint8_t* packed, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
  }
}

// Q4_K and Q5_K share everything but the code range (15 / 31) and the search grid.
// Block: d (fp16), dmin (fp16), 12 scale bytes; returns the codes L (256) for the caller to pack.
void quantize_asymmetric_k(const float* x, uint8_t* block, int nmax, float rmin, float rdelta, int nstep,
                           uint8_t* L) {
  float weights[32], mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = fit_scale_and_min(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], rmin, rdelta, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t quantized_scales[8], quantized_mins[8];
  for (int j = 0; j < 8; ++j) {
    quantized_scales[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    quantized_mins[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  store_f16(block, max_scale / 63.f);
  store_f16(block + 2, max_min / 63.f);
  pack_scales(quantized_scales, quantized_mins, block + 4);
  const float d_all = load_f16(block), dmin_all = load_f16(block + 2);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    unpack_scale(j, block + 4, &sc, &m);
    const float d = d_all * sc;
    if (d == 0.0f) continue;
    const float dm = dmin_all * m;
    for (int i = 0; i < 32; ++i) {
      const int l = nearest_int((x[32 * j + i] + dm) / d);
      L[32 * j + i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

void dequantize_asymmetric_k(const uint8_t* block, float* y, const uint8_t* high_bits, const uint8_t* low) {
  const float d = load_f16(block), min = load_f16(block + 2);
  uint8_t mask_first = 1, mask_second = 2;
  for (int j = 0, sub = 0; j < kSuper; j += 64, sub += 2) {
    uint8_t sc, m;
    unpack_scale(sub, block + 4, &sc, &m);
    const float d1 = d * sc, m1 = min * m;
    unpack_scale(sub + 1, block + 4, &sc, &m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) {
      const int high = high_bits != nullptr && (high_bits[l] & mask_first) ? 16 : 0;
      *y++ = d1 * static_cast<float>((low[l] & 0xF) + high) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int high = high_bits != nullptr && (high_bits[l] & mask_second) ? 16 : 0;
      *y++ = d2 * static_cast<float>((low[l] >> 4) + high) - m2;
    }
    low += 32;
    mask_first = static_cast<uint8_t>(mask_first << 2);
    mask_second = static_cast<uint8_t>(mask_second << 2);
  }
}

}  // namespace

int nearest_int(float value) {
  const float shifted = value + 12582912.f;
  int bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

// Q4_K: d, dmin, scales (12), then 128 bytes of nibbles: each 64 values share 32 bytes, the first
// 32 in the low nibbles.
void quantize_q4_k_block(const float* x, uint8_t* block) {
  uint8_t L[kSuper];
  quantize_asymmetric_k(x, block, 15, -1.f, 0.1f, 20, L);
  uint8_t* q = block + 16;
  for (int j = 0; j < kSuper; j += 64) {
    for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    q += 32;
  }
}

// Q5_K: as Q4_K plus 32 bytes of fifth bits (bit 2k / 2k+1 of byte l: value l of the k-th 64-value
// group's first / second half) before the nibbles.
void quantize_q5_k_block(const float* x, uint8_t* block) {
  uint8_t L[kSuper];
  quantize_asymmetric_k(x, block, 31, -0.5f, 0.1f, 15, L);
  uint8_t* high = block + 16;
  uint8_t* low = block + 48;
  std::memset(high, 0, 32);
  uint8_t mask_first = 1, mask_second = 2;
  for (int n = 0; n < kSuper; n += 64) {
    for (int j = 0; j < 32; ++j) {
      int first = L[n + j], second = L[n + j + 32];
      if (first > 15) {
        first -= 16;
        high[j] |= mask_first;
      }
      if (second > 15) {
        second -= 16;
        high[j] |= mask_second;
      }
      low[j] = static_cast<uint8_t>(first | (second << 4));
    }
    mask_first = static_cast<uint8_t>(mask_first << 2);
    mask_second = static_cast<uint8_t>(mask_second << 2);
    low += 32;
  }
}

// Q6_K: ql (128: low nibbles), qh (64: high two bits), 16 int8 scales, d (fp16). Codes are
// value / (d · scale) + 32 in [0, 63].
void quantize_q6_k_block(const float* x, uint8_t* block) {
  int8_t L[kSuper];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int sub = 0; sub < 16; ++sub) {
    scales[sub] = fit_symmetric_scale(16, 32, x + 16 * sub, L + 16 * sub);
    const float abs_scale = std::fabs(scales[sub]);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scales[sub];
    }
  }
  uint8_t* ql = block;
  uint8_t* qh = block + 128;
  auto* quantized_scales = reinterpret_cast<int8_t*>(block + 192);
  if (max_abs_scale < kGroupMaxEpsilon) {
    std::memset(block, 0, 210);
    return;
  }
  const float iscale = -128.f / max_scale;
  store_f16(block + 208, 1 / iscale);
  for (int sub = 0; sub < 16; ++sub) {
    quantized_scales[sub] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[sub])));
  }
  const float d_all = load_f16(block + 208);
  for (int sub = 0; sub < 16; ++sub) {
    const float d = d_all * quantized_scales[sub];
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i) {
      const int l = std::max(-32, std::min(31, nearest_int(x[16 * sub + i] / d)));
      L[16 * sub + i] = static_cast<int8_t>(l + 32);
    }
  }
  for (int j = 0; j < kSuper; j += 128) {
    for (int l = 0; l < 32; ++l) {
      const auto code = [&](int offset) { return static_cast<uint8_t>(L[j + l + offset]); };
      ql[l] = static_cast<uint8_t>((code(0) & 0xF) | ((code(64) & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((code(32) & 0xF) | ((code(96) & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((code(0) >> 4) | ((code(32) >> 4) << 2) | ((code(64) >> 4) << 4) |
                                   ((code(96) >> 4) << 6));
    }
    ql += 64;
    qh += 32;
  }
}

void dequantize_q4_k_block(const uint8_t* block, float* y) { dequantize_asymmetric_k(block, y, nullptr, block + 16); }

void dequantize_q5_k_block(const uint8_t* block, float* y) {
  dequantize_asymmetric_k(block, y, block + 16, block + 48);
}

void dequantize_q6_k_block(const uint8_t* block, float* y) {
  const float d = load_f16(block + 208);
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(block + 192);
  for (int n = 0; n < kSuper; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * sc[is] * static_cast<float>(q1);
      y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
      y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
      y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace surogate::gguf::detail
