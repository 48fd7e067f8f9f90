// mrope_cos_sin (M-RoPE tables, ops/mrope.h) in a graph: the rotation through its tables has the
// gradient finite differences give (rope's backward on M-RoPE tables), and a bad mrope_section or
// position shape is refused by name.
#include "ops_defs_test_util.h"

namespace surogate {
namespace {
using namespace ops_defs_testing;

// [3, 2, 4]: temporal, height, width of two packed rows, an image's 2 x 2 grid in the first.
const std::vector<int32_t> kMropePositions{0, 1, 1, 1, 0, 1, 2, 3,  //
                                           0, 1, 1, 2, 0, 1, 2, 3,  //
                                           0, 1, 2, 1, 0, 1, 2, 3};

TEST(OpsDefsMrope, GradientThroughTheTablesMatchesFiniteDifferences) {
  const json attrs{{"inv_freq", {1.0, 0.3, 0.1, 0.01}}, {"mrope_section", {1, 2, 1}}, {"attention_scaling", 1.25},
                   {"dtype", "F64"}};
  size_t checked = check_gradients(
      [&](GraphBuilder& b) {
        TensorId positions = b.input("position_ids", DType::I32, {3, 2, 4});
        TensorId q = b.parameter("q", DType::F64, {2, 4, 2 * 8});
        auto tables = b.op("mrope_cos_sin", {positions}, attrs);
        return probe_loss(b, b.op("rope", {q, tables[0], tables[1]}, {{"heads", 2}, {"head_dim", 8}}));
      },
      {{"position_ids", kMropePositions}});
  EXPECT_EQ(checked, 1u);
}

TEST(OpsDefsMrope, ABadSectionOrPositionShapeIsRefused) {
  // The message of the UserError building the op throws ("" when none).
  auto error_of = [](const json& sections, graph::Shape shape) -> std::string {
    GraphBuilder b(registry());
    TensorId positions = b.input("position_ids", DType::I32, shape);
    try {
      b.op("mrope_cos_sin", {positions}, {{"inv_freq", {1.0, 0.1, 0.01}}, {"mrope_section", sections}});
    } catch (const UserError& error) {
      return error.what();
    }
    return "";
  };
  EXPECT_NE(error_of({1, 1}, {3, 4}).find("'mrope_section' must be three sizes"), std::string::npos);
  EXPECT_NE(error_of({1, 1, 2}, {3, 4}).find("summing to 4"), std::string::npos);
  EXPECT_NE(error_of({1, 1, 1}, {2, 4}), "");  // positions [2, 4]: not three axes
  EXPECT_EQ(error_of({1, 1, 1}, {3, 4}), "");
}

}  // namespace
}  // namespace surogate
