// The nearest of 256 sorted code values (8-bit AdamW's quantiser) in one table look-up, the exact
// twin of the binary search it replaces (`nearest_code_by_search`, which is train::nearest_code):
// index of the first code ≥ x (std::lower_bound), then the lower neighbour when
// x − lower ≤ upper − x (fp32, round to nearest), code 0 below the first code and for NaN, 255
// above the last.
//
// Why a table works: that result is a non-decreasing function of x (both roundings are
// monotonic), so it is fixed by 255 thresholds, the least float giving each code ≥ 1. The floats
// are cut into buckets by their sign, exponent and top kCodeTableMantissaBits mantissa bits; the
// layout is fine enough that no bucket holds two thresholds (the builder checks it), so an entry
// is {the code at the bucket's smallest float, where in the bucket the code goes up by one}:
//   entry = code << 24 | threshold,  code(x) = (entry >> 24) + (key(x) >= (entry & 0xffffff))
// where key(x) is x's position in its bucket, ascending with x (the low mantissa bits, reversed
// for negative x) and threshold = 1 << kCodeTableShift where the code does not change. Binades
// below 2^-23 (zero and subnormals included) and from 1.0 up (infinities included) are one
// bucket per sign each, where the code must be constant.
//
// Host and device share the look-up; the tables are built on the host from the code book
// (build_nearest_code_table) and checked against train::nearest_code in tests/train.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>

#ifndef SUROGATE_HOST_DEVICE
#if defined(__CUDACC__)
#define SUROGATE_HOST_DEVICE __host__ __device__
#else
#define SUROGATE_HOST_DEVICE
#endif
#endif

namespace surogate::cuda {

constexpr int kCodeTableMantissaBits = 7;  // 6 leaves two thresholds in one bucket of [0.5, 1)
constexpr int kCodeTableShift = 23 - kCodeTableMantissaBits;
constexpr uint32_t kCodeTableLowBinade = 127 - 23;  // biased exponent of [2^-23, 2^-22)
constexpr int kCodeTableBinades = 23;               // [2^-23, 2^-22) .. [0.5, 1)
constexpr int kCodeTableFine = kCodeTableBinades << kCodeTableMantissaBits;
constexpr int kCodeTableMagnitudes = kCodeTableFine + 2;  // below the binades, the binades, from 1.0 up
constexpr int kCodeTableSize = 2 * kCodeTableMagnitudes;  // negative magnitudes descending, then positive

SUROGATE_HOST_DEVICE inline uint32_t code_table_float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
#endif
}

// The bucket of a float's bit pattern (NaN: the bucket of ±inf).
SUROGATE_HOST_DEVICE inline int code_table_bucket(uint32_t bits) {
  const int magnitude = static_cast<int>(bits & 0x7fffffffu);
  int index = magnitude - static_cast<int>(kCodeTableLowBinade << 23) + (1 << kCodeTableShift);
  index = index < 0 ? 0 : index >> kCodeTableShift;
  index = index > kCodeTableFine + 1 ? kCodeTableFine + 1 : index;
  return (bits >> 31) ? kCodeTableMagnitudes - 1 - index : kCodeTableMagnitudes + index;
}

// x's position in its bucket, ascending with x.
SUROGATE_HOST_DEVICE inline uint32_t code_table_key(uint32_t bits) {
  constexpr uint32_t kMask = (1u << kCodeTableShift) - 1;
  return (bits >> 31) ? kMask - (bits & kMask) : bits & kMask;
}

SUROGATE_HOST_DEVICE inline uint8_t nearest_code_from_table(const uint32_t* table, float x) {
  const uint32_t bits = code_table_float_bits(x);
  const uint32_t entry = table[code_table_bucket(bits)];
  const uint32_t code = (entry >> 24) + (code_table_key(bits) >= (entry & 0xffffffu) ? 1u : 0u);
  return (bits & 0x7fffffffu) > 0x7f800000u ? 0 : static_cast<uint8_t>(code);  // NaN: code 0
}

// The binary search over the 256 sorted codes, as train::nearest_code (std::lower_bound) computes
// it: what the table encodes.
SUROGATE_HOST_DEVICE inline uint8_t nearest_code_by_search(const float* code, float x) {
  int low = 0, high = 256;
  while (low < high) {
    const int middle = (low + high) >> 1;
    if (code[middle] < x) low = middle + 1; else high = middle;
  }
  if (low == 0) return 0;
  if (low == 256) return 255;
  const float upper = code[low], lower = code[low - 1];
#if defined(__CUDA_ARCH__)
  const bool take_lower = __fsub_rn(x, lower) <= __fsub_rn(upper, x);
#else
  const bool take_lower = x - lower <= upper - x;
#endif
  return static_cast<uint8_t>(take_lower ? low - 1 : low);
}

// Fills table[kCodeTableSize] for the 256 sorted code values; false where some bucket would need
// two thresholds (a code book denser than this layout resolves).
inline bool build_nearest_code_table(const float* code, uint32_t* table) {
  const auto to_float = [](uint32_t bits) {
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    return x;
  };
  constexpr uint32_t kLow = kCodeTableLowBinade << 23, kSpan = 1u << kCodeTableShift;
  for (int index = 0; index < kCodeTableMagnitudes; ++index) {
    // The magnitudes (bit patterns without the sign) of this bucket, NaN left out.
    const uint32_t first = index == 0 ? 0u : kLow + static_cast<uint32_t>(index - 1) * kSpan;
    const uint32_t last = index == 0 ? kLow - 1
                          : index <= kCodeTableFine ? first + kSpan - 1
                                                    : 0x7f800000u;
    for (const uint32_t sign : {0u, 0x80000000u}) {
      // The bit pattern at key k of a fine bucket: magnitudes ascend with k for x ≥ 0, descend
      // for x < 0 (code_table_key).
      const auto at = [&](uint32_t k) { return sign ? sign | (last - k) : first + k; };
      const uint32_t smallest = sign ? sign | last : first, largest = sign ? sign | first : last;
      const uint8_t low_code = nearest_code_by_search(code, to_float(smallest));
      const uint8_t high_code = nearest_code_by_search(code, to_float(largest));
      const int bucket = code_table_bucket(smallest);
      uint32_t threshold = kSpan;
      if (high_code != low_code) {
        if (high_code != low_code + 1 || index == 0 || index > kCodeTableFine) return false;
        // The least key whose code is high_code (key kSpan − 1 is largest, whose code it is).
        uint32_t below = 0, above = kSpan - 1;
        while (below < above) {
          const uint32_t middle = (below + above) / 2;
          if (nearest_code_by_search(code, to_float(at(middle))) == high_code) above = middle; else below = middle + 1;
        }
        threshold = below;
      }
      table[bucket] = static_cast<uint32_t>(low_code) << 24 | threshold;
    }
  }
  return true;
}

}  // namespace surogate::cuda
