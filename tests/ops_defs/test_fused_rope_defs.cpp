// fused_rope (use_fused_rope: cos/sin computed inside the op from the position ids) against the
// table version: on the CPU, rope_cos_sin → rope and fused_rope give the same output and the same
// input gradient bit for bit (tolerance none: both compute each token's row with rope_tables'
// formula and rotate with rope_forward / rope_backward), for full and partial rotary and for the
// frequency attributes of a RoPE config (yarn, whose attention_scaling is not 1); its gradient
// matches finite differences.
#include <cstring>

#include "ops_defs_test_util.h"

namespace surogate {
namespace {
using namespace ops_defs_testing;

const std::vector<int32_t> kPositions{0, 1, 2, 3, 0, 1, 7, 9};  // two packed documents, a gap

TEST(OpsDefsFusedRope, GradientMatchesFiniteDifferences) {
  const json attrs{{"heads", 2}, {"head_dim", 8}, {"inv_freq", {1.0, 0.1, 0.01}}, {"attention_scaling", 1.25}};
  size_t checked = check_gradients(
      [&](GraphBuilder& b) {
        TensorId positions = b.input("position_ids", DType::I32, {2, 4});
        TensorId q = b.parameter("q", DType::F64, {2, 4, 2 * 8});
        return probe_loss(b, b.op("fused_rope", {q, positions}, attrs));
      },
      {{"position_ids", kPositions}});
  EXPECT_EQ(checked, 1u);
}

// y = rope(x) through tables or fused, and d_x for d_y = probe; every float compared bit for bit.
void expect_same_as_tables(const json& frequency_attrs, int64_t heads, int64_t head_dim) {
  auto run = [&](bool fused) {
    GraphBuilder b(registry());
    TensorId positions = b.input("position_ids", DType::I32, {2, 4});
    TensorId x = b.parameter("x", DType::F32, {2, 4, heads * head_dim});
    json attrs = frequency_attrs;
    attrs["heads"] = heads;
    attrs["head_dim"] = head_dim;
    TensorId y;
    if (fused) {
      y = b.op("fused_rope", {x, positions}, attrs);
    } else {
      auto tables = b.op("rope_cos_sin", {positions}, frequency_attrs);
      y = b.op("rope", {x, tables[0], tables[1]}, {{"heads", heads}, {"head_dim", head_dim}});
    }
    TensorId probe = b.parameter("probe", DType::F32, b.type(y).shape, false);
    TensorId loss = b.op("sum", {b.op("mul", {y, probe})});
    b.mark_output(loss);
    b.mark_output(y);
    compiler::ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry());
    runtime::CpuBackend backend;
    backend.load(plan, registry());
    const auto count = static_cast<size_t>(8 * heads * head_dim);
    std::vector<double> x_doubles = random_doubles(count, 3, 2.0), probe_doubles = random_doubles(count, 4, 1.0);
    std::vector<float> x_values(x_doubles.begin(), x_doubles.end()), probe_values(probe_doubles.begin(), probe_doubles.end());
    backend.write(plan.tensor("x"), std::as_bytes(std::span<const float>(x_values)));
    backend.write(plan.tensor("probe"), std::as_bytes(std::span<const float>(probe_values)));
    backend.write(plan.tensor("position_ids"), std::as_bytes(std::span<const int32_t>(kPositions)));
    backend.zero_gradients();
    backend.execute({});
    std::vector<float> result(2 * count);
    backend.read(y, std::as_writable_bytes(std::span<float>(result).first(count)));
    backend.read(plan.parameter_gradients.at(plan.tensor("x")), std::as_writable_bytes(std::span<float>(result).last(count)));
    return result;
  };
  const std::vector<float> tables = run(false), fused = run(true);
  ASSERT_EQ(tables.size(), fused.size());
  EXPECT_EQ(std::memcmp(tables.data(), fused.data(), tables.size() * sizeof(float)), 0);
  bool rotated = false;
  for (size_t i = 0; i < tables.size() / 2; ++i) rotated = rotated || tables[i] != 0.0f;
  EXPECT_TRUE(rotated) << "the comparison is vacuous";
}

TEST(OpsDefsFusedRope, EqualsTheTableVersionBitForBit) {
  expect_same_as_tables({{"inv_freq", {1.0, 0.3, 0.1, 0.03}}, {"attention_scaling", 1.0}}, 2, 8);  // full rotary
  expect_same_as_tables({{"inv_freq", {1.0, 0.1}}, {"attention_scaling", 1.0}}, 3, 8);            // partial rotary
  expect_same_as_tables({{"rope_type", "yarn"}, {"theta", 10000.0}, {"rotary_dim", 16}, {"factor", 4.0},
                         {"original_max_position_embeddings", 4}},
                        2, 16);
}

TEST(OpsDefsFusedRope, ShapeErrorsNameTheProblem) {
  GraphBuilder b(registry());
  TensorId positions = b.input("position_ids", DType::I32, {2, 4});
  TensorId x = b.parameter("x", DType::F32, {2, 4, 16});
  const json attrs{{"heads", 2}, {"head_dim", 8}, {"inv_freq", {1.0, 0.1, 0.01, 0.001, 0.0001}}};
  EXPECT_THROW(b.op("fused_rope", {x, positions}, attrs), UserError);  // rotary_dim 10 > head_dim 8
  TensorId few = b.input("few", DType::I32, {2, 3});
  EXPECT_THROW(b.op("fused_rope", {x, few}, {{"heads", 2}, {"head_dim", 8}, {"inv_freq", {1.0}}}), UserError);
}

}  // namespace
}  // namespace surogate
