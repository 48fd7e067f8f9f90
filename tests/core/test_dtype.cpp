#include <gtest/gtest.h>

#include "core/dtype.h"

namespace surogate {
namespace {

TEST(DType, SafetensorsNamesRoundTrip) {
  for (auto dtype : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::F8_E4M3, DType::F8_E5M2,
                     DType::I64, DType::I32, DType::I16, DType::I8, DType::U8, DType::BOOL}) {
    auto parsed = dtype_from_safetensors_name(dtype_safetensors_name(dtype));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, dtype);
  }
  EXPECT_FALSE(dtype_from_safetensors_name("F128").has_value());
}

TEST(DType, SizesAndTorchNames) {
  EXPECT_EQ(dtype_size_bytes(DType::BF16), 2u);
  EXPECT_EQ(dtype_size_bytes(DType::F8_E4M3), 1u);
  EXPECT_EQ(dtype_size_bytes(DType::I64), 8u);
  EXPECT_EQ(dtype_from_torch_name("bfloat16"), DType::BF16);
  EXPECT_EQ(dtype_from_torch_name("torch.float16"), DType::F16);
  EXPECT_EQ(dtype_from_torch_name("float"), DType::F32);
  EXPECT_FALSE(dtype_from_torch_name("complex64").has_value());
}

}  // namespace
}  // namespace surogate
