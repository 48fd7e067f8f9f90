#include "train/optim/quantization_map.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace surogate::train {
namespace {

// Exponent e (0 ≤ e < kExponents) scales a fraction in (0.1, 1] by 10^(e - kExponents + 1), so
// magnitudes from 1e-7 up to 1 are represented. Larger exponents (values near 1) get more
// fraction steps: the number of fractions doubles with each exponent.
constexpr int kExponents = 7;

std::array<float, 256> build_map(bool is_signed) {
  // The signed map spends one bit on the sign; within each half there are 127 magnitudes.
  const int magnitude_bits = is_signed ? 7 : 8;
  std::vector<double> magnitudes;
  for (int exponent = 0; exponent < kExponents; ++exponent) {
    int fractions = 1 << (exponent + magnitude_bits - kExponents);
    double scale = std::pow(10.0, exponent - kExponents + 1);
    for (int k = 0; k < fractions; ++k) {
      // Midpoints of `fractions` equal steps across [0.1, 1].
      double low = 0.1 + 0.9 * k / fractions;
      double high = 0.1 + 0.9 * (k + 1) / fractions;
      magnitudes.push_back(scale * 0.5 * (low + high));
    }
  }
  std::vector<double> values;
  values.push_back(0.0);
  values.push_back(1.0);
  for (double magnitude : magnitudes) {
    values.push_back(magnitude);
    if (is_signed) values.push_back(-magnitude);
  }
  // 2 * 127 signed magnitudes + 0 + 1 = 256 codes. There is no -1: a block whose largest
  // magnitude is negative stores it as -0.993, 0.7% off.
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  SUROGATE_CHECK(values.size() == 256, "quantization map has {} entries", values.size());
  std::array<float, 256> code{};
  for (size_t i = 0; i < 256; ++i) code[i] = static_cast<float>(values[i]);
  return code;
}

}  // namespace

const std::array<float, 256>& dynamic_quantization_map(bool is_signed) {
  static const std::array<float, 256> signed_map = build_map(true);
  static const std::array<float, 256> unsigned_map = build_map(false);
  return is_signed ? signed_map : unsigned_map;
}

uint8_t nearest_code(const std::array<float, 256>& code, float x) {
  auto upper = std::lower_bound(code.begin(), code.end(), x);
  if (upper == code.begin()) return 0;
  if (upper == code.end()) return 255;
  auto lower = upper - 1;
  return static_cast<uint8_t>((x - *lower <= *upper - x) ? lower - code.begin() : upper - code.begin());
}

void quantize_blockwise(std::span<const float> values, const std::array<float, 256>& code,
                        std::span<uint8_t> codes_out, std::span<float> absmax_out) {
  const int64_t size = static_cast<int64_t>(values.size());
  SUROGATE_CHECK(codes_out.size() == values.size(), "codes size mismatch");
  SUROGATE_CHECK(static_cast<int64_t>(absmax_out.size()) == quantization_blocks(size), "absmax size mismatch");
  for (int64_t block = 0; block < quantization_blocks(size); ++block) {
    int64_t begin = block * kQuantizationBlockSize;
    int64_t end = std::min(size, begin + kQuantizationBlockSize);
    float absmax = 0.0f;
    for (int64_t i = begin; i < end; ++i) absmax = std::max(absmax, std::fabs(values[i]));
    absmax_out[block] = absmax;
    float inverse = absmax > 0.0f ? 1.0f / absmax : 0.0f;
    for (int64_t i = begin; i < end; ++i) codes_out[i] = nearest_code(code, values[i] * inverse);
  }
}

void dequantize_blockwise(std::span<const uint8_t> codes, std::span<const float> absmax,
                          const std::array<float, 256>& code, std::span<float> values_out) {
  const int64_t size = static_cast<int64_t>(codes.size());
  for (int64_t i = 0; i < size; ++i) values_out[i] = code[codes[i]] * absmax[i / kQuantizationBlockSize];
}

}  // namespace surogate::train
