// NaN / Inf found in stored float tensors by their bits, in every float dtype the loaders read.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/bfloat16.h"
#include "io/tensor_finite_check.h"
#include "io_test_helpers.h"

namespace surogate::io {
namespace {

template <typename T>
SafetensorsTensor view(const std::vector<T>& values, DType dtype) {
  return SafetensorsTensor{"w", dtype, {static_cast<int64_t>(values.size())}, std::as_bytes(std::span<const T>(values))};
}

TEST(TensorFiniteCheck, FindsTheFirstNonFiniteValueInEveryFloatDtype) {
  // 10000 values: the bad one sits in the third 4096-element block.
  std::vector<float> f32(10000, 0.5f);
  EXPECT_EQ(find_non_finite(view(f32, DType::F32)), std::nullopt);
  f32[9000] = -std::numeric_limits<float>::infinity();
  f32[9500] = std::nanf("");
  auto bad = find_non_finite(view(f32, DType::F32));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->element, 9000);
  EXPECT_EQ(bad->value, "-inf");

  std::vector<double> f64(5, 1.0);
  f64[3] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(find_non_finite(view(f64, DType::F64))->element, 3);

  std::vector<uint16_t> bf16(100, float_to_bf16(1.0f));
  bf16[7] = float_to_bf16(std::numeric_limits<float>::infinity());
  EXPECT_EQ(find_non_finite(view(bf16, DType::BF16))->value, "inf");
  std::vector<uint16_t> f16(100, 0x3C00);  // 1.0
  EXPECT_EQ(find_non_finite(view(f16, DType::F16)), std::nullopt);
  f16[99] = 0x7E00;  // NaN
  EXPECT_EQ(find_non_finite(view(f16, DType::F16))->value, "nan");
  // 65504 (F16's largest) and BF16's largest finite values are finite.
  EXPECT_EQ(find_non_finite(view(std::vector<uint16_t>{0x7BFF}, DType::F16)), std::nullopt);
  EXPECT_EQ(find_non_finite(view(std::vector<uint16_t>{0x7F7F}, DType::BF16)), std::nullopt);
}

TEST(TensorFiniteCheck, RequireFiniteNamesTheFileTensorAndElement) {
  std::vector<float> values{1.0f, 2.0f, std::nanf("")};
  testing::expect_user_error([&] { require_finite(view(values, DType::F32), "/a/adapter_model.safetensors", "fix it"); },
                             {"/a/adapter_model.safetensors: tensor w holds a non-finite value (nan at element 2); fix it"});
}

}  // namespace
}  // namespace surogate::io
