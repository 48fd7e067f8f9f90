// The fp8_hybrid ops' CPU emulation (src/ops/defs/fp8_linear_def.cpp) against the rules written out
// here: quantize_fp8 scales by the tensor's own amax until the site has a delayed one, records the
// amax either way, and encodes with quant::fp8_encode; linear_fp8's output and its input gradient
// (through autodiff: linear_fp8_backward_input quantizing d_out in E5M2 at its own site) equal the
// products of the decoded codes times the two scales, summed in double here (fp32 in the op:
// relative tolerance 1e-5); with a trained weight, autodiff emits linear_fp8_backward, whose
// weight gradient is the product of the decoded E5M2 gradient and the forward's E4M3 input (same
// tolerance), and in a BF16 graph its accumulating form writes the persistent gradient;
// quantize_fp8_weight writes the codes, their transpose and scale_inv of 448 / amax;
// roll_fp8_history moves the step's amax into the history.
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "ops/fp8_tensor.h"
#include "ops_defs_test_util.h"
#include "quant/fp8.h"
#include "quant/fp8_scaling.h"

namespace surogate {
namespace {
using namespace ops_defs_testing;
using quant::Fp8Format;

std::vector<float> random_floats(size_t count, uint32_t seed, double scale) {
  std::vector<double> values = random_doubles(count, seed, scale);
  return std::vector<float>(values.begin(), values.end());
}

template <typename T>
std::vector<T> read(runtime::CpuBackend& backend, TensorId id, size_t count) {
  std::vector<T> values(count);
  backend.read(id, std::as_writable_bytes(std::span<T>(values)));
  return values;
}

template <typename T>
void write(runtime::CpuBackend& backend, TensorId id, const std::vector<T>& values) {
  backend.write(id, std::as_bytes(std::span<const T>(values)));
}

TEST(OpsDefsFp8, QuantizeScalesByCurrentThenDelayedAmax) {
  GraphBuilder b(registry());
  TensorId x = b.input("x", DType::F32, {4, 8});
  TensorId state = b.parameter("state", DType::F32, {2, 2 + 4}, false);
  auto outputs = b.op("quantize_fp8", {x, state}, {{"format", "e4m3"}, {"site", 1}});
  b.mark_output(outputs[0]);
  b.mark_output(outputs[1]);
  compiler::ExecutionPlan plan = compiler::compile_forward(b.finish(), registry());
  runtime::CpuBackend backend;
  backend.load(plan, registry());
  const std::vector<float> values = random_floats(32, 3, 5.0);
  const float amax = quant::amax_of(values);
  write(backend, plan.tensor("x"), values);

  auto check = [&](const std::vector<float>& row_before, float expected_scale, float expected_recorded) {
    std::vector<float> rows(12, 0.0f);
    std::copy(row_before.begin(), row_before.end(), rows.begin() + 6);
    write(backend, plan.tensor("state"), rows);
    backend.execute({});
    const std::vector<uint8_t> codes = read<uint8_t>(backend, outputs[0], 32);
    for (size_t i = 0; i < 32; ++i) EXPECT_EQ(codes[i], quant::fp8_encode(values[i] * expected_scale, Fp8Format::E4M3));
    EXPECT_EQ(read<float>(backend, outputs[1], 1)[0], 1.0f / expected_scale);
    const std::vector<float> after = read<float>(backend, plan.tensor("state"), 12);
    EXPECT_EQ(after[7], expected_recorded);
    EXPECT_EQ(after[6], row_before[0]);
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(after[i], 0.0f) << "another site's row was touched";
  };
  check({0, 0, 0, 0, 0, 0}, 448.0f / amax, amax);                  // no history: the current amax
  check({0, amax * 2, 0, 0, 0, 0}, 448.0f / amax, amax * 2);         // no history: still its own amax, the max kept
  check({amax / 4, 0, 0, 0, 0, 0}, 448.0f / (amax / 4), amax);     // delayed (values saturate), recorded
}

TEST(OpsDefsFp8, RollMovesTheStepsAmaxIntoTheHistory) {
  std::vector<float> row{0.0f, 3.0f, 0.0f, 0.0f, 0.0f};
  quant::roll_fp8_history(row.data(), 1, 3, 0);
  EXPECT_EQ(row, (std::vector<float>{3.0f, 0.0f, 3.0f, 0.0f, 0.0f}));
  row[1] = 1.0f;
  quant::roll_fp8_history(row.data(), 1, 3, 1);
  EXPECT_EQ(row, (std::vector<float>{3.0f, 0.0f, 3.0f, 1.0f, 0.0f}));
  row[1] = 2.0f;
  quant::roll_fp8_history(row.data(), 1, 3, 3);  // overwrites step 0's slot: the 3 leaves the window
  EXPECT_EQ(row, (std::vector<float>{2.0f, 0.0f, 2.0f, 1.0f, 0.0f}));
}

// A calibration (TrainingDevice::calibrate_fp8_scaling) rolls into the last slot with headroom.
TEST(OpsDefsFp8, CalibrationRollsWithHeadroomIntoTheLastSlot) {
  std::vector<float> row{0.0f, 3.0f, 0.0f, 0.0f, 0.0f};
  quant::roll_fp8_history(row.data(), 1, 3, 2, quant::kFp8CalibrationHeadroom);
  EXPECT_EQ(row, (std::vector<float>{6.0f, 0.0f, 0.0f, 0.0f, 6.0f}));
  row[1] = 5.0f;  // step 0: below the calibration, which keeps the scale
  quant::roll_fp8_history(row.data(), 1, 3, 0);
  EXPECT_EQ(row, (std::vector<float>{6.0f, 0.0f, 5.0f, 0.0f, 6.0f}));
}

// The host's view of which sites scale by a delayed amax (the CUDA producers skip their pending
// pass for those): row[0] > 0, not 0, NaN or a negative; from whole rows or from row[0]s alone.
TEST(OpsDefsFp8, DelayedAmaxSitesAreTheRowsWithAPositiveRowZero) {
  const float nan = std::nanf("");
  std::vector<float> state{0.0f, 5.0f, 0.0f,  2.0f, 0.0f, 2.0f,  nan, 0.0f, nan,  -1.0f, 0.0f, 0.0f,  1e-30f, 0.0f, 0.0f};
  EXPECT_EQ(quant::delayed_amax_sites(state.data(), 5, 3), (std::vector<bool>{false, true, false, false, true}));
  std::vector<float> firsts{0.0f, 2.0f, nan, -1.0f, 1e-30f};
  EXPECT_EQ(quant::delayed_amax_sites(firsts.data(), 5, 1), (std::vector<bool>{false, true, false, false, true}));
  quant::roll_fp8_history(state.data(), 5, 1, 0);  // site 0's step amax 5 becomes its delayed amax
  EXPECT_TRUE(quant::delayed_amax_sites(state.data(), 5, 3)[0]);
}

// y = linear_fp8(x, quantize(x), w…) and d_x from autodiff, against the decoded products.
TEST(OpsDefsFp8, LinearAndInputGradientEqualDecodedProducts) {
  const int64_t rows = 3, in = 16, out = 8;
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F32, {rows, in});
  TensorId w = b.parameter("w.fp8", DType::F8_E4M3, {out, in}, false);
  TensorId w_t = b.parameter("w.fp8_t", DType::F8_E4M3, {in, out}, false);
  TensorId w_scale_inv = b.parameter("w.scale_inv", DType::F32, {1}, false);
  TensorId state = b.parameter("state", DType::F32, {2, 2 + 4}, false);
  auto q = b.op("quantize_fp8", {x, state}, {{"format", "e4m3"}, {"site", 0}});
  TensorId y = b.op("linear_fp8", {x, q[0], q[1], w, w_t, w_scale_inv, state}, {{"grad_site", 1}, {"grad_format", "e5m2"}});
  TensorId probe = b.parameter("probe", DType::F32, {rows, out}, false);
  TensorId loss = b.op("sum", {b.op("mul", {y, probe})});
  b.mark_output(loss);
  b.mark_output(y);
  compiler::ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry());
  runtime::CpuBackend backend;
  backend.load(plan, registry());

  const std::vector<float> x_values = random_floats(rows * in, 1, 2.0), probe_values = random_floats(rows * out, 2, 0.5);
  const std::vector<float> weight = random_floats(out * in, 3, 0.1);
  const float w_scale = quant::fp8_scale(quant::amax_of(weight), Fp8Format::E4M3);
  std::vector<uint8_t> codes(weight.size()), transposed(weight.size());
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      codes[o * in + i] = transposed[i * out + o] = quant::fp8_encode(weight[o * in + i] * w_scale, Fp8Format::E4M3);
    }
  }
  write(backend, plan.tensor("x"), x_values);
  write(backend, plan.tensor("probe"), probe_values);
  write(backend, plan.tensor("w.fp8"), codes);
  write(backend, plan.tensor("w.fp8_t"), transposed);
  write(backend, plan.tensor("w.scale_inv"), std::vector<float>{1.0f / w_scale});
  write(backend, plan.tensor("state"), std::vector<float>(12, 0.0f));
  backend.zero_gradients();
  backend.execute({});

  const float x_scale = quant::fp8_scale(quant::amax_of(x_values), Fp8Format::E4M3);
  const std::vector<float> y_values = read<float>(backend, y, rows * out);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = 0.0;
      for (int64_t i = 0; i < in; ++i) {
        sum += double(quant::fp8_decode(quant::fp8_encode(x_values[r * in + i] * x_scale, Fp8Format::E4M3), Fp8Format::E4M3)) *
               quant::fp8_decode(codes[o * in + i], Fp8Format::E4M3);
      }
      const double expected = sum * (1.0f / x_scale) * (1.0f / w_scale);
      EXPECT_NEAR(y_values[r * out + o], expected, 1e-5 * std::fabs(expected) + 1e-7) << r << ", " << o;
    }
  }
  // d_y = probe, quantized in E5M2 at its current amax; d_x = decode(d_q) · decode(w) · both scales.
  const float g_scale = quant::fp8_scale(quant::amax_of(probe_values), Fp8Format::E5M2);
  const std::vector<float> d_x = read<float>(backend, plan.parameter_gradients.at(x), rows * in);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < in; ++i) {
      double sum = 0.0;
      for (int64_t o = 0; o < out; ++o) {
        sum += double(quant::fp8_decode(quant::fp8_encode(probe_values[r * out + o] * g_scale, Fp8Format::E5M2), Fp8Format::E5M2)) *
               quant::fp8_decode(codes[o * in + i], Fp8Format::E4M3);
      }
      const double expected = sum * (1.0f / g_scale) * (1.0f / w_scale);
      EXPECT_NEAR(d_x[r * in + i], expected, 1e-5 * std::fabs(expected) + 1e-7) << r << ", " << i;
    }
  }
  const std::vector<float> rows_after = read<float>(backend, plan.tensor("state"), 12);
  EXPECT_EQ(rows_after[1], quant::amax_of(x_values));
  EXPECT_EQ(rows_after[7], quant::amax_of(probe_values));
}

TEST(OpsDefsFp8, QuantizeWeightWritesCodesTransposeAndScale) {
  const int64_t out = 24, in = 40;
  GraphBuilder b(registry());
  TensorId w = b.parameter("w", DType::F32, {out, in}, false);
  auto pieces = b.op("quantize_fp8_weight", {w});
  for (TensorId piece : pieces.ids) b.mark_output(piece);
  EXPECT_EQ(b.type(pieces[1]).shape, (Shape{in, out}));
  compiler::ExecutionPlan plan = compiler::compile_forward(b.finish(), registry());
  runtime::CpuBackend backend;
  backend.load(plan, registry());
  const std::vector<float> values = random_floats(out * in, 9, 0.3);
  write(backend, plan.tensor("w"), values);
  backend.execute({});
  const float scale = 448.0f / quant::amax_of(values);
  const std::vector<uint8_t> codes = read<uint8_t>(backend, pieces[0], out * in);
  const std::vector<uint8_t> transposed = read<uint8_t>(backend, pieces[1], out * in);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      ASSERT_EQ(codes[o * in + i], quant::fp8_encode(values[o * in + i] * scale, Fp8Format::E4M3));
      ASSERT_EQ(transposed[i * out + o], codes[o * in + i]);
    }
  }
  EXPECT_EQ(read<float>(backend, pieces[2], 1)[0], 1.0f / scale);
}

// A trained weight: linear_fp8 with trained_weight, x and w trainable; d_w and d_x from autodiff.
TEST(OpsDefsFp8, TrainedWeightGradientEqualsDecodedProducts) {
  const int64_t rows = 5, in = 16, out = 8;
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::F32, {rows, in});
  TensorId weight = b.parameter("w", DType::F32, {out, in});
  TensorId w = b.parameter("w.fp8", DType::F8_E4M3, {out, in}, false);
  TensorId w_t = b.parameter("w.fp8_t", DType::F8_E4M3, {in, out}, false);
  TensorId w_scale_inv = b.parameter("w.scale_inv", DType::F32, {1}, false);
  TensorId state = b.parameter("state", DType::F32, {2, 2 + 4}, false);
  auto q = b.op("quantize_fp8", {x, state}, {{"format", "e4m3"}, {"site", 0}});
  TensorId y = b.op("linear_fp8", {x, q[0], q[1], w, w_t, w_scale_inv, state, weight},
                    {{"grad_site", 1}, {"grad_format", "e5m2"}, {"trained_weight", true}});
  TensorId probe = b.parameter("probe", DType::F32, {rows, out}, false);
  TensorId loss = b.op("sum", {b.op("mul", {y, probe})});
  b.mark_output(loss);
  compiler::ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry());
  int both = 0;
  for (const graph::Node& node : plan.graph.nodes) both += node.op == "linear_fp8_backward";
  EXPECT_EQ(both, 1) << "one op computes both gradients from one quantization of d_out";
  runtime::CpuBackend backend;
  backend.load(plan, registry());

  const std::vector<float> x_values = random_floats(rows * in, 4, 2.0), probe_values = random_floats(rows * out, 5, 0.5);
  const std::vector<float> weight_values = random_floats(out * in, 6, 0.1);
  std::vector<uint8_t> codes(weight_values.size()), transposed(weight_values.size());
  const float w_scale_inv_value =
      ops::quantize_fp8_tensor(weight_values.data(), out, in, codes.data(), transposed.data());
  write(backend, plan.tensor("x"), x_values);
  write(backend, plan.tensor("w"), weight_values);
  write(backend, plan.tensor("probe"), probe_values);
  write(backend, plan.tensor("w.fp8"), codes);
  write(backend, plan.tensor("w.fp8_t"), transposed);
  write(backend, plan.tensor("w.scale_inv"), std::vector<float>{w_scale_inv_value});
  write(backend, plan.tensor("state"), std::vector<float>(12, 0.0f));
  backend.zero_gradients();
  backend.execute({});

  const float x_scale = quant::fp8_scale(quant::amax_of(x_values), Fp8Format::E4M3);
  const float g_scale = quant::fp8_scale(quant::amax_of(probe_values), Fp8Format::E5M2);
  auto x_decoded = [&](int64_t r, int64_t i) {
    return double(quant::fp8_decode(quant::fp8_encode(x_values[r * in + i] * x_scale, Fp8Format::E4M3), Fp8Format::E4M3));
  };
  auto g_decoded = [&](int64_t r, int64_t o) {
    return double(quant::fp8_decode(quant::fp8_encode(probe_values[r * out + o] * g_scale, Fp8Format::E5M2), Fp8Format::E5M2));
  };
  const std::vector<float> d_w = read<float>(backend, plan.parameter_gradients.at(weight), out * in);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      double sum = 0.0;
      for (int64_t r = 0; r < rows; ++r) sum += g_decoded(r, o) * x_decoded(r, i);
      const double expected = sum * (1.0f / g_scale) * (1.0f / x_scale);
      ASSERT_NEAR(d_w[o * in + i], expected, 1e-5 * std::fabs(expected) + 1e-7) << o << ", " << i;
    }
  }
  const std::vector<float> d_x = read<float>(backend, plan.parameter_gradients.at(x), rows * in);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < in; ++i) {
      double sum = 0.0;
      for (int64_t o = 0; o < out; ++o) sum += g_decoded(r, o) * quant::fp8_decode(codes[o * in + i], Fp8Format::E4M3);
      const double expected = sum * (1.0f / g_scale) * w_scale_inv_value;
      ASSERT_NEAR(d_x[r * in + i], expected, 1e-5 * std::fabs(expected) + 1e-7) << r << ", " << i;
    }
  }
  const std::vector<float> rows_after = read<float>(backend, plan.tensor("state"), 12);
  EXPECT_EQ(rows_after[1], quant::amax_of(x_values));
  EXPECT_EQ(rows_after[7], quant::amax_of(probe_values));
}

// In a BF16 graph the trained weight's gradient is written by linear_fp8_backward_accumulate
// into the persistent gradient (no temporary, no accumulate node), as LoRA's products are.
TEST(OpsDefsFp8, Bf16GraphsAccumulateTheTrainedWeightsGradientInPlace) {
  GraphBuilder b(registry());
  TensorId x = b.parameter("x", DType::BF16, {4, 16});
  TensorId weight = b.parameter("w", DType::BF16, {8, 16});
  TensorId w = b.parameter("w.fp8", DType::F8_E4M3, {8, 16}, false);
  TensorId w_t = b.parameter("w.fp8_t", DType::F8_E4M3, {16, 8}, false);
  TensorId w_scale_inv = b.parameter("w.scale_inv", DType::F32, {1}, false);
  TensorId state = b.parameter("state", DType::F32, {2, 2 + 4}, false);
  auto q = b.op("quantize_fp8", {x, state}, {{"format", "e4m3"}, {"site", 0}});
  TensorId y = b.op("linear_fp8", {x, q[0], q[1], w, w_t, w_scale_inv, state, weight},
                    {{"grad_site", 1}, {"grad_format", "e5m2"}, {"trained_weight", true}});
  TensorId loss = b.op("sum", {y});
  b.mark_output(loss);
  compiler::ExecutionPlan plan = compiler::compile_training(b.finish(), loss, registry());
  int accumulating = 0, accumulate_nodes = 0;
  for (const graph::Node& node : plan.graph.nodes) {
    if (node.op == "linear_fp8_backward_accumulate") {
      ++accumulating;
      EXPECT_EQ(node.outputs[1], plan.parameter_gradients.at(weight));
    }
    if (node.op == "accumulate" && node.outputs[0] == plan.parameter_gradients.at(weight)) ++accumulate_nodes;
  }
  EXPECT_EQ(accumulating, 1);
  EXPECT_EQ(accumulate_nodes, 0);
}

}  // namespace
}  // namespace surogate
