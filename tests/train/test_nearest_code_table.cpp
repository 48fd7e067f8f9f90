// The 8-bit AdamW kernel's nearest-code look-up (cuda/kernels/nearest_code_table.h, host and
// device code) against the CPU optimizer's train::nearest_code, for both code books: every bucket
// edge, every code value, midpoint and table threshold with their neighbouring floats, the special
// values, 2^24 random floats in [-1.5, 1.5], random bit patterns and a strided sweep over all
// 2^32 bit patterns. The header's binary search (the kernel's previous algorithm) is checked too.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "cuda/kernels/nearest_code_table.h"
#include "train/optim/quantization_map.h"

namespace surogate::train {
namespace {

float from_bits(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t to_bits(float x) { return std::bit_cast<uint32_t>(x); }

// Checks x and the `spread` floats either side of it (by bit pattern, so across ±0 too).
class Checker {
public:
  Checker(const std::array<float, 256>& code, const std::vector<uint32_t>& table) : code_(code), table_(table) {}

  void check(float x, uint32_t spread = 0) {
    const uint32_t bits = to_bits(x);
    for (int64_t d = -static_cast<int64_t>(spread); d <= static_cast<int64_t>(spread); ++d) {
      check_bits(static_cast<uint32_t>(static_cast<int64_t>(bits) + d));
    }
  }
  void check_bits(uint32_t bits) {
    const float x = from_bits(bits);
    const uint8_t want = nearest_code(code_, x);
    const uint8_t by_table = cuda::nearest_code_from_table(table_.data(), x);
    const uint8_t by_search = cuda::nearest_code_by_search(code_.data(), x);
    ++checked_;
    if (by_table == want && by_search == want) return;
    if (++mismatches_ <= 10) {
      ADD_FAILURE() << "x = " << std::hexfloat << x << " (bits 0x" << std::hex << bits << std::dec
                    << "): nearest_code " << int(want) << ", table " << int(by_table) << ", search "
                    << int(by_search);
    }
  }
  uint64_t checked() const { return checked_; }
  uint64_t mismatches() const { return mismatches_; }

private:
  const std::array<float, 256>& code_;
  const std::vector<uint32_t>& table_;
  uint64_t checked_ = 0, mismatches_ = 0;
};

void check_map(bool is_signed) {
  SCOPED_TRACE(is_signed ? "signed map" : "unsigned map");
  const std::array<float, 256>& code = dynamic_quantization_map(is_signed);
  std::vector<uint32_t> table(cuda::kCodeTableSize);
  ASSERT_TRUE(cuda::build_nearest_code_table(code.data(), table.data()));
  Checker checker(code, table);

  // Every bucket's first and last float (both signs), with neighbours: the clamping and the
  // per-bucket keys at their ends.
  constexpr uint32_t kLow = cuda::kCodeTableLowBinade << 23, kSpan = 1u << cuda::kCodeTableShift;
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t edge = kLow; edge <= (127u << 23); edge += kSpan) checker.check(from_bits(sign | edge), 3);
  }
  // Every code value, the midpoints between neighbours (where ties are decided), and each
  // bucket's threshold (where the table's code goes up by one), with neighbours.
  for (int i = 0; i < 256; ++i) {
    checker.check(code[i], 4);
    if (i > 0) {
      checker.check(static_cast<float>(0.5 * (double(code[i - 1]) + double(code[i]))), 4);
      checker.check(0.5f * (code[i - 1] + code[i]), 4);
    }
  }
  for (int bucket = 0; bucket < cuda::kCodeTableSize; ++bucket) {
    const uint32_t threshold = table[static_cast<size_t>(bucket)] & 0xffffffu;
    if (threshold >= kSpan) continue;
    // Find the bucket's floats by scanning its magnitude range (bucket → float is not inverted).
    const bool negative = bucket < cuda::kCodeTableMagnitudes;
    const int index = negative ? cuda::kCodeTableMagnitudes - 1 - bucket : bucket - cuda::kCodeTableMagnitudes;
    ASSERT_GE(index, 1);
    const uint32_t first = kLow + static_cast<uint32_t>(index - 1) * kSpan;
    const uint32_t bits = negative ? 0x80000000u | (first + kSpan - 1 - threshold) : first + threshold;
    ASSERT_EQ(cuda::code_table_bucket(bits), bucket);
    checker.check(from_bits(bits), 2);
  }
  // Special values.
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                  -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN(),
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::min(), -std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(), 1.0f,
                  -1.0f, 1.5f, -1.5f, 2.0f, -2.0f, 1e10f, -1e10f, 1e-30f, -1e-30f, 1e-7f, -1e-7f}) {
    checker.check(x, 8);
  }
  for (uint32_t bits : {0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0x7fffffffu, 0xff800001u, 0xffc00000u,
                        0xffffffffu, 0x00000001u, 0x007fffffu, 0x80000001u, 0x807fffffu}) {
    checker.check_bits(bits);
  }
  // Dense random values where moments land, random bit patterns, and a sweep of all patterns.
  std::mt19937 rng(is_signed ? 11 : 12);
  std::uniform_real_distribution<float> uniform(-1.5f, 1.5f);
  for (int i = 0; i < (1 << 24); ++i) checker.check(uniform(rng));
  for (int i = 0; i < (1 << 22); ++i) checker.check_bits(static_cast<uint32_t>(rng()));
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 251) checker.check_bits(static_cast<uint32_t>(bits));
  std::printf("%s map: %llu floats, %llu mismatches\n", is_signed ? "signed" : "unsigned",
              static_cast<unsigned long long>(checker.checked()),
              static_cast<unsigned long long>(checker.mismatches()));
  EXPECT_EQ(checker.mismatches(), 0u);
}

TEST(NearestCodeTable, SignedMapMatchesNearestCode) { check_map(true); }
TEST(NearestCodeTable, UnsignedMapMatchesNearestCode) { check_map(false); }

// NaN (either sign, any payload) gives code 0 and -0 the code of +0, as the binary search does.
TEST(NearestCodeTable, NanAndSignedZero) {
  for (bool is_signed : {true, false}) {
    const std::array<float, 256>& code = dynamic_quantization_map(is_signed);
    std::vector<uint32_t> table(cuda::kCodeTableSize);
    ASSERT_TRUE(cuda::build_nearest_code_table(code.data(), table.data()));
    EXPECT_EQ(cuda::nearest_code_from_table(table.data(), from_bits(0x7fc00000u)), 0);
    EXPECT_EQ(cuda::nearest_code_from_table(table.data(), from_bits(0xffc00000u)), 0);
    EXPECT_EQ(cuda::nearest_code_from_table(table.data(), -0.0f), cuda::nearest_code_from_table(table.data(), 0.0f));
    EXPECT_EQ(cuda::nearest_code_from_table(table.data(), 1.0f), 255);
    EXPECT_EQ(cuda::nearest_code_from_table(table.data(), 2.0f), 255);
    EXPECT_EQ(cuda::nearest_code_from_table(table.data(), -2.0f), 0);
  }
}

// A code book denser than the layout resolves is refused rather than tabled wrongly.
TEST(NearestCodeTable, RefusesATooDenseCodeBook) {
  std::array<float, 256> dense{};
  for (int i = 0; i < 256; ++i) dense[static_cast<size_t>(i)] = 0.5f + static_cast<float>(i) * 1e-5f;
  std::vector<uint32_t> table(cuda::kCodeTableSize);
  EXPECT_FALSE(cuda::build_nearest_code_table(dense.data(), table.data()));
}

}  // namespace
}  // namespace surogate::train
