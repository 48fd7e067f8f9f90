// Shape products past what any machine holds (or that wrap around 64 bits) are UserErrors, never
// small tensors: the net under the sizes config.json and the run's options put into shapes
// (io/model_config_bounds.h bounds the config's own keys).
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "graph/graph.h"

namespace surogate::graph {
namespace {

std::string error_of(void (*body)()) {
  try {
    body();
  } catch (const UserError& error) {
    return error.what();
  }
  return "";
}

TEST(ShapeSizes, ElementCountsPastTwoToThe47AreUserErrors) {
  EXPECT_EQ(shape_numel({3, 5, 7}), 105);
  EXPECT_EQ(shape_numel({int64_t{1} << 30, int64_t{1} << 17}), int64_t{1} << 47);
  EXPECT_EQ((TensorType{DType::F64, {int64_t{1} << 47}}.size_bytes()), size_t{1} << 50);
  // 2^70 wraps around 64 bits to 0: it must not become an empty tensor.
  for (const Shape& shape : {Shape{int64_t{1} << 40, int64_t{1} << 30}, Shape{int64_t{1} << 30, int64_t{1} << 18}}) {
    static Shape current;
    current = shape;
    const std::string message = error_of([] { shape_numel(current); });
    EXPECT_NE(message.find(fmt::format("a tensor of shape {} has more than 2^47 elements", format_shape(shape))),
              std::string::npos) << message;
    EXPECT_NE(message.find("config.json"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace surogate::graph
