// Large test weights made on the host cheaply (a 1.2 GB LM head in about a second) and the output
// columns a CPU reference checks of a wide product (the full product would cost billions of
// products): shared by the decode linear tests (test_small_m_linear.cpp, runtime_cuda/test_decode_gemv_cuda.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "test_helpers.h"

namespace surogate::cuda::testing {

// A bf16 value in [-1, 1) from the index: splitmix64's finaliser, the top 16 bits as the fraction.
inline Bf16 hashed_bf16(uint64_t index) {
  uint64_t z = index + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return float_to_bf16(static_cast<float>(z >> 48) / 32768.0f - 1.0f);
}

// The sampled output columns of a product with `out` columns: every 61st and the last 20.
inline std::vector<int64_t> sampled_columns(int64_t out) {
  std::vector<int64_t> columns;
  for (int64_t column = 0; column < out; column += 61) columns.push_back(column);
  for (int64_t column = std::max<int64_t>(0, out - 20); column < out; ++column) columns.push_back(column);
  return columns;
}

}  // namespace surogate::cuda::testing
