// The fp8_hybrid recipe's CUDA pieces against the CPU reference on fresh random data:
//   - fp8_record_amax + fp8_quantize equal quant::fp8_encode(x · fp8_scale(amax)) bit for bit, with
//     the same scale_inv and the same state row afterwards: current scaling (no delayed amax: the
//     tensor's own, also when the row already holds a larger amax of this step), delayed scaling
//     (a row with a history, including one small enough that values saturate), E4M3 and E5M2, the
//     8-wide path and the scalar one, values spanning subnormals to large magnitudes;
//   - fp8_roll_history equals quant::roll_fp8_history;
//   - fp8_quantize_weight equals ops::quantize_fp8_tensor (codes, transpose, scale_inv) and
//     fp8_transpose a plain transpose, bit for bit, on shapes for each of the three paths (128- and
//     64-row tiles of 128-byte lines, 64 × 64-byte tiles, byte per thread; one tile or many), and
//     a weight gradient's pair of transposes at its real shapes;
//   - Fp8Matmul (cuBLASLt) equals the product of the decoded codes times both scales, computed in
//     double, within the accumulation and bf16 output rounding: |got − ref| ≤ 2⁻⁷·|ref| + e·Σ|a·b|,
//     in the settings the engine runs them (runtime/cuda_fp8_ops.cpp): the forward's E4M3 × E4M3
//     with fast accumulation, with and without a bias; the backward's E5M2 × E4M3 with promoted
//     accumulation and an addend, or accumulating into out (the weight gradient's form). Hopper's FP8 tensor cores keep about 14 bits of the running sum
//     (DeepSeek-V3 technical report, 3.3.2), promoted to fp32 periodically without fast
//     accumulation: e = 2⁻¹² promoted, 2⁻¹⁰ fast (measured on the H100: 2⁻¹³·⁴ and 2⁻¹¹·⁸ worst);
//   - the ops bound in a graph (runtime/cuda_fp8_ops.cpp): quantize_fp8 → linear_fp8 with an addend,
//     linear_fp8_backward_input with an addend, linear_fp8_backward (both gradients, the weight's
//     from the transposed codes) and quantize_fp8_weight, BF16 on the CUDA backend against the F32
//     CPU emulation from the same (bf16-exact) values: the state rows and the weight's codes equal
//     bit for bit (the same amaxes recorded at the right sites), y, d_x and d_w within 1e-2 of each
//     tensor's largest entry (bf16 outputs, accumulation order). Autodiff's use of the ops is checked on the CPU
//     (tests/ops_defs/test_fp8_defs.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "core/bfloat16.h"
#include "graph/builder.h"
#include "models/run_precision.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "runtime/cuda_backend.h"
#include "cuda/device_buffer.h"
#include "cuda/device_info.h"
#include "cuda/fp8_matmul.h"
#include "cuda/kernels/fp8_quantize.h"
#include "ops/fp8_tensor.h"
#include "quant/fp8.h"
#include "quant/fp8_scaling.h"

namespace surogate {
namespace {

bool skip_without_gpu() {
  std::string reason;
  if (cuda::cuda_device_available(&reason)) return false;
  std::printf("skipped: %s\n", reason.c_str());
  return true;
}

// bf16 values whose magnitudes span 2^-20 .. 2^6, signs mixed.
std::vector<float> spread_values(size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> exponent(-20.0f, 6.0f), sign(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) {
    value = bf16_to_float(float_to_bf16(std::copysign(std::exp2(exponent(rng)), sign(rng))));
  }
  return values;
}

TEST(Fp8Cuda, QuantizeMatchesCpuReferenceBitForBit) {
  if (skip_without_gpu()) GTEST_SKIP();
  std::mt19937 rng(20261125);
  for (quant::Fp8Format format : {quant::Fp8Format::E4M3, quant::Fp8Format::E5M2}) {
    for (size_t count : {size_t{1} << 20, size_t{4096}, size_t{777}}) {
      const std::vector<float> values = spread_values(count, rng);
      std::vector<uint16_t> bits(count);
      for (size_t i = 0; i < count; ++i) bits[i] = float_to_bf16(values[i]);
      const float amax = quant::amax_of(values);
      // Rows: current scaling, with nothing recorded and with a larger amax recorded earlier this
      // step; delayed with a larger amax; delayed with a smaller one (saturates).
      const std::pair<float, float> rows[] = {{0.0f, 0.0f}, {0.0f, amax * 2}, {amax * 3.0f, amax / 2}, {amax / 16.0f, amax / 2}};
      for (const auto& [delayed, recorded] : rows) {
        std::vector<float> row{delayed, recorded};
        std::vector<float> expected_row = row;
        expected_row[1] = quant::amax_max(expected_row[1], amax);
        const float scale = quant::fp8_scale(quant::scaling_amax(row.data(), amax), format);
        cuda::DeviceBuffer<uint16_t> x = cuda::to_device(bits);
        cuda::DeviceBuffer<float> row_device = cuda::to_device(row), own_amax = cuda::to_device(std::vector<float>{0.0f});
        cuda::DeviceBuffer<uint8_t> q(count);
        cuda::DeviceBuffer<float> scale_inv(1);
        const auto* x_bf16 = reinterpret_cast<const __nv_bfloat16*>(x.data());
        const cuda::Fp8Target target = format == quant::Fp8Format::E4M3 ? cuda::Fp8Target::E4M3 : cuda::Fp8Target::E5M2;
        cuda::fp8_record_amax(x_bf16, static_cast<int64_t>(count), row_device.data(), own_amax.data(), nullptr);
        cuda::fp8_quantize(x_bf16, static_cast<int64_t>(count), target, row_device.data(), own_amax.data(), q.data(),
                           scale_inv.data(), nullptr);
        const std::vector<uint8_t> codes = q.download();
        EXPECT_EQ(row_device.download(), expected_row);
        EXPECT_EQ(scale_inv.download()[0], 1.0f / scale);
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(codes[i], quant::fp8_encode(values[i] * scale, format))
              << "value " << values[i] << " (element " << i << " of " << count << ", delayed amax " << delayed << ")";
        }
      }
    }
  }
}

TEST(Fp8Cuda, QuantizeWeightAndTransposeMatchTheCpuBitForBit) {
  if (skip_without_gpu()) GTEST_SKIP();
  std::mt19937 rng(5);
  for (const auto& [rows, columns] : {std::pair<int64_t, int64_t>{1024, 4096}, {384, 128}, {64, 256}, {192, 320}, {64, 64}, {96, 128}, {100, 70}, {1, 33}}) {
    const std::vector<float> values = spread_values(static_cast<size_t>(rows * columns), rng);
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = float_to_bf16(values[i]);
    std::vector<uint8_t> codes(values.size()), transposed(values.size());
    const float scale_inv = ops::quantize_fp8_tensor(values.data(), rows, columns, codes.data(), transposed.data());
    cuda::DeviceBuffer<uint16_t> w = cuda::to_device(bits);
    cuda::DeviceBuffer<uint8_t> codes_device(values.size()), transposed_device(values.size()), back(values.size());
    cuda::DeviceBuffer<float> amax(1), scale_inv_device(1);
    cuda::fp8_quantize_weight(reinterpret_cast<const __nv_bfloat16*>(w.data()), rows, columns, amax.data(),
                              codes_device.data(), transposed_device.data(), scale_inv_device.data(), nullptr);
    cuda::fp8_transpose(transposed_device.data(), columns, rows, back.data(), nullptr);
    EXPECT_EQ(scale_inv_device.download()[0], scale_inv) << rows << "x" << columns;
    EXPECT_EQ(codes_device.download(), codes) << rows << "x" << columns;
    EXPECT_EQ(transposed_device.download(), transposed) << rows << "x" << columns;
    EXPECT_EQ(back.download(), codes) << "transposing the transpose, " << rows << "x" << columns;
  }
}

// A weight gradient's two transposes (its output gradient's codes and its input's, the same rows)
// bit for bit: a 1.7B layer's shapes, tiles of 128 and 64 rows of 128-byte lines, 64 × 64-byte
// tiles (192 and 64 columns), and a shape that takes the byte-per-thread fallback (70 columns).
TEST(Fp8Cuda, WeightGradientTransposesMatchTheCpu) {
  if (skip_without_gpu()) GTEST_SKIP();
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> byte(0, 255);
  auto transposed = [](const std::vector<uint8_t>& in, int64_t rows, int64_t columns) {
    std::vector<uint8_t> out(in.size());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < columns; ++c) out[static_cast<size_t>(c * rows + r)] = in[static_cast<size_t>(r * columns + c)];
    }
    return out;
  };
  struct Case {
    int64_t rows, columns_a, columns_b;
  };
  for (const Case& shape : {Case{320, 128, 192}, Case{4096, 2048, 6144}, Case{128, 1024, 384}, Case{64, 64, 64}, Case{448, 256, 70}}) {
    std::vector<uint8_t> a(static_cast<size_t>(shape.rows * shape.columns_a)), b(static_cast<size_t>(shape.rows * shape.columns_b));
    for (uint8_t& v : a) v = static_cast<uint8_t>(byte(rng));
    for (uint8_t& v : b) v = static_cast<uint8_t>(byte(rng));
    cuda::DeviceBuffer<uint8_t> a_device = cuda::to_device(a), b_device = cuda::to_device(b);
    cuda::DeviceBuffer<uint8_t> a_out(a.size()), b_out(b.size());
    cuda::fp8_transpose(a_device.data(), shape.rows, shape.columns_a, a_out.data(), nullptr);
    cuda::fp8_transpose(b_device.data(), shape.rows, shape.columns_b, b_out.data(), nullptr);
    const std::string context = std::to_string(shape.rows) + " rows, " + std::to_string(shape.columns_a) + " and " +
                                std::to_string(shape.columns_b) + " columns";
    EXPECT_EQ(a_out.download(), transposed(a, shape.rows, shape.columns_a)) << context;
    EXPECT_EQ(b_out.download(), transposed(b, shape.rows, shape.columns_b)) << context;
  }
}

TEST(Fp8Cuda, RollHistoryMatchesCpuReference) {
  if (skip_without_gpu()) GTEST_SKIP();
  const int64_t sites = 37, history = 1024;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> amax(0.0f, 100.0f);
  std::vector<float> state(static_cast<size_t>(sites * (history + 2)));
  for (float& value : state) value = amax(rng);
  cuda::DeviceBuffer<float> device = cuda::to_device(state);
  for (int64_t step : {0, 5, 1023, 1024, 4000}) {
    quant::roll_fp8_history(state.data(), sites, history, step);
    cuda::fp8_roll_history(device.data(), sites, history, step, nullptr);
    ASSERT_EQ(device.download(), state) << "step " << step;
  }
  // A calibration's roll (the last slot, with headroom) after fresh amaxes.
  for (int64_t site = 0; site < sites; ++site) state[static_cast<size_t>(site * (history + 2) + 1)] = amax(rng);
  device = cuda::to_device(state);
  quant::roll_fp8_history(state.data(), sites, history, history - 1, quant::kFp8CalibrationHeadroom);
  cuda::fp8_roll_history(device.data(), sites, history, history - 1, nullptr, quant::kFp8CalibrationHeadroom);
  ASSERT_EQ(device.download(), state) << "calibration";
}

void check_product(int64_t m, int64_t n, int64_t k, quant::Fp8Format a_format, bool bias, bool addend,
                   bool accumulate = false) {
  const bool fast = a_format == quant::Fp8Format::E4M3;  // as the forward runs; gradients accumulate fully
  const int error_exponent = fast ? -10 : -12;
  std::mt19937 rng(static_cast<uint32_t>(m * 31 + n * 7 + k));
  std::uniform_int_distribution<int> code(0, 255);
  auto random_codes = [&](int64_t count, quant::Fp8Format format) {
    std::vector<uint8_t> codes(static_cast<size_t>(count));
    for (uint8_t& c : codes) {
      do c = static_cast<uint8_t>(code(rng));
      while (!std::isfinite(quant::fp8_decode(c, format)));
    }
    return codes;
  };
  const std::vector<uint8_t> a = random_codes(m * k, a_format), b = random_codes(n * k, quant::Fp8Format::E4M3);
  const float a_scale = 1.0f / 512.0f, b_scale = 1.0f / 64.0f;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> bias_bits(static_cast<size_t>(n)), addend_bits(static_cast<size_t>(m * n));
  for (uint16_t& v : bias_bits) v = float_to_bf16(normal(rng));
  for (uint16_t& v : addend_bits) v = float_to_bf16(normal(rng));
  cuda::DeviceBuffer<uint8_t> a_device = cuda::to_device(a), b_device = cuda::to_device(b);
  cuda::DeviceBuffer<float> a_scale_device = cuda::to_device(std::vector<float>{a_scale});
  cuda::DeviceBuffer<float> b_scale_device = cuda::to_device(std::vector<float>{b_scale});
  cuda::DeviceBuffer<uint16_t> bias_device = cuda::to_device(bias_bits), addend_device = cuda::to_device(addend_bits);
  // accumulate: out starts as the addend's values and the product is added to it.
  cuda::DeviceBuffer<uint16_t> out = accumulate ? cuda::to_device(addend_bits) : cuda::DeviceBuffer<uint16_t>(m * n);
  cuda::Fp8Matmul matmul;
  const cuda::Fp8MatmulShape shape{.m = m, .n = n, .k = k,
                                   .a_format = a_format == quant::Fp8Format::E4M3 ? cuda::Fp8Operand::E4M3
                                                                                  : cuda::Fp8Operand::E5M2,
                                   .has_bias = bias, .has_addend = addend, .fast_accumulation = fast,
                                   .accumulate = accumulate};
  matmul.run(shape, reinterpret_cast<__nv_bfloat16*>(out.data()), a_device.data(), a_scale_device.data(), b_device.data(),
             b_scale_device.data(), bias ? reinterpret_cast<const __nv_bfloat16*>(bias_device.data()) : nullptr,
             addend ? reinterpret_cast<const __nv_bfloat16*>(addend_device.data()) : nullptr, nullptr);
  const std::vector<uint16_t> got = out.download();
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double sum = 0.0, magnitude = 0.0;
      for (int64_t i = 0; i < k; ++i) {
        const double product = double(quant::fp8_decode(a[r * k + i], a_format)) *
                               double(quant::fp8_decode(b[c * k + i], quant::Fp8Format::E4M3));
        sum += product;
        magnitude += std::fabs(product);
      }
      double expected = sum * a_scale * b_scale;
      if (bias) expected += bf16_to_float(bias_bits[c]);
      if (addend || accumulate) expected += bf16_to_float(addend_bits[r * n + c]);
      const double actual = bf16_to_float(got[r * n + c]);
      const double tolerance = std::ldexp(std::fabs(expected), -7) + std::ldexp(magnitude * a_scale * b_scale, error_exponent) + 1e-6;
      ASSERT_NEAR(actual, expected, tolerance) << "row " << r << ", column " << c << " of " << m << "x" << n << "x" << k;
    }
  }
}

TEST(Fp8Cuda, MatmulMatchesDecodedProduct) {
  if (skip_without_gpu()) GTEST_SKIP();
  check_product(256, 384, 512, quant::Fp8Format::E4M3, true, false);
  check_product(200, 128, 1024, quant::Fp8Format::E5M2, false, true);
  check_product(64, 64, 64, quant::Fp8Format::E4M3, false, false);
  check_product(96, 128, 256, quant::Fp8Format::E5M2, false, false, true);  // a weight gradient: out += product
}

// quantize_fp8 → linear_fp8 with an addend, and the input gradient's op for d_y = probe with an
// addend of its own (what autodiff emits for x with another consumer), as a graph of `dtype`.
compiler::ExecutionPlan fp8_chain(const graph::OpRegistry& registry, DType dtype, int64_t rows, int64_t in, int64_t out) {
  graph::GraphBuilder b(registry);
  graph::TensorId x = b.parameter("x", dtype, {rows, in}, false);
  graph::TensorId addend = b.parameter("addend", dtype, {rows, out}, false);
  graph::TensorId w = b.parameter("w.fp8", DType::F8_E4M3, {out, in}, false);
  graph::TensorId w_t = b.parameter("w.fp8_t", DType::F8_E4M3, {in, out}, false);
  graph::TensorId w_scale_inv = b.parameter("w.scale_inv", DType::F32, {1}, false);
  graph::TensorId state = b.parameter("state", DType::F32, {4, 2 + 8}, false);
  graph::TensorId weight = b.parameter("weight", dtype, {out, in}, false);
  graph::TensorId probe = b.parameter("probe", dtype, {rows, out}, false);
  graph::TensorId pending = b.parameter("pending", dtype, {rows, in}, false);
  auto q = b.op("quantize_fp8", {x, state}, {{"format", "e4m3"}, {"site", 2}});
  graph::TensorId y = b.op("linear_fp8", {x, q[0], q[1], w, w_t, w_scale_inv, addend, state},
                           {{"extra", "addend"}, {"grad_site", 0}, {"grad_format", "e5m2"}}, "y");
  graph::TensorId d_x = b.op("linear_fp8_backward_input", {probe, w_t, w_scale_inv, state, pending},
                             {{"site", 0}, {"format", "e5m2"}}, "d_x");
  auto both = b.op("linear_fp8_backward", {probe, q[0], q[1], w_t, w_scale_inv, state, pending},
                   {{"site", 3}, {"format", "e5m2"}}, "both");
  auto pieces = b.op("quantize_fp8_weight", {weight}, nlohmann::json::object(), "weight_fp8");
  b.mark_output(y);
  b.mark_output(d_x);
  b.mark_output(both[0]);
  b.mark_output(both[1]);
  for (graph::TensorId piece : pieces.ids) b.mark_output(piece);
  return compiler::compile_forward(b.finish(), registry);
}

TEST(Fp8Cuda, GraphOpsMatchTheCpuEmulation) {
  if (skip_without_gpu()) GTEST_SKIP();
  graph::OpRegistry registry = ops::make_model_registry();
  const int64_t rows = 64, in = 128, out = 96;
  std::mt19937 rng(11);
  auto bf16_exact = [&](size_t count, float scale) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> values(count);
    for (float& value : values) value = bf16_to_float(float_to_bf16(normal(rng)));
    return values;
  };
  const std::vector<float> x = bf16_exact(rows * in, 1.0f), addend = bf16_exact(rows * out, 1.0f);
  const std::vector<float> pending = bf16_exact(rows * in, 0.001f);
  const std::vector<float> probe = bf16_exact(rows * out, 0.01f), weight = bf16_exact(out * in, 0.05f);
  const float w_scale = quant::fp8_scale(quant::amax_of(weight), quant::Fp8Format::E4M3);
  std::vector<uint8_t> codes(weight.size()), transposed(weight.size());
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      codes[o * in + i] = transposed[i * out + o] =
          quant::fp8_encode(weight[o * in + i] * w_scale, quant::Fp8Format::E4M3);
    }
  }
  const std::vector<float> w_scale_inv{1.0f / w_scale}, state(40, 0.0f);

  struct Result {
    std::vector<float> y, d_x, both_d_x, d_w, state;
    std::vector<uint8_t> weight_codes;
  };
  auto run = [&](runtime::Backend& backend, const compiler::ExecutionPlan& plan, bool bf16) {
    backend.load(plan, registry);
    auto write_floats = [&](const char* name, const std::vector<float>& values) {
      if (!bf16) {
        backend.write(plan.tensor(name), std::as_bytes(std::span<const float>(values)));
        return;
      }
      std::vector<uint16_t> bits(values.size());
      for (size_t i = 0; i < values.size(); ++i) bits[i] = float_to_bf16(values[i]);
      backend.write(plan.tensor(name), std::as_bytes(std::span<const uint16_t>(bits)));
    };
    auto read_floats = [&](graph::TensorId id, size_t count) {
      return models::testing::read_floats(backend, id, count, bf16 ? DType::BF16 : DType::F32);
    };
    write_floats("x", x);
    write_floats("addend", addend);
    write_floats("probe", probe);
    write_floats("pending", pending);
    write_floats("weight", weight);
    backend.write(plan.tensor("w.fp8"), std::as_bytes(std::span<const uint8_t>(codes)));
    backend.write(plan.tensor("w.fp8_t"), std::as_bytes(std::span<const uint8_t>(transposed)));
    backend.write(plan.tensor("w.scale_inv"), std::as_bytes(std::span<const float>(w_scale_inv)));
    backend.write(plan.tensor("state"), std::as_bytes(std::span<const float>(state)));
    backend.execute({});
    Result result;
    result.y = read_floats(plan.tensor("y"), rows * out);
    result.d_x = read_floats(plan.tensor("d_x"), rows * in);
    result.both_d_x = read_floats(plan.tensor("both"), rows * in);
    result.d_w = read_floats(plan.tensor("both.d_weight"), out * in);
    result.weight_codes.resize(static_cast<size_t>(2 * out * in + 4));
    backend.read(plan.tensor("weight_fp8"), std::as_writable_bytes(std::span<uint8_t>(result.weight_codes).first(out * in)));
    backend.read(plan.tensor("weight_fp8.codes_t"),
                 std::as_writable_bytes(std::span<uint8_t>(result.weight_codes).subspan(out * in, out * in)));
    backend.read(plan.tensor("weight_fp8.scale_inv"), std::as_writable_bytes(std::span<uint8_t>(result.weight_codes).last(4)));
    result.state.resize(40);
    backend.read(plan.tensor("state"), std::as_writable_bytes(std::span<float>(result.state)));
    return result;
  };
  const compiler::ExecutionPlan cpu_plan = fp8_chain(registry, DType::F32, rows, in, out);
  const compiler::ExecutionPlan cuda_plan = fp8_chain(registry, DType::BF16, rows, in, out);
  runtime::CpuBackend cpu;
  runtime::CudaBackend gpu;
  const Result expected = run(cpu, cpu_plan, false), actual = run(gpu, cuda_plan, true);

  EXPECT_EQ(actual.state, expected.state);
  EXPECT_EQ(expected.state[2 * 10 + 1], quant::amax_of(x));      // site 2: x's amax
  EXPECT_EQ(expected.state[0 * 10 + 1], quant::amax_of(probe));  // site 0: d_y = probe
  auto expect_close = [](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    float largest = 0.0f;
    for (float value : want) largest = std::max(largest, std::fabs(value));
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-2 * largest) << what << " element " << i;
    }
  };
  EXPECT_EQ(expected.state[3 * 10 + 1], quant::amax_of(probe));  // site 3: the same d_y, both gradients
  EXPECT_EQ(actual.weight_codes, expected.weight_codes);          // quantize_fp8_weight, bit for bit
  expect_close(actual.y, expected.y, "y");
  expect_close(actual.d_x, expected.d_x, "d_x");
  expect_close(actual.both_d_x, expected.both_d_x, "linear_fp8_backward's d_x");
  expect_close(actual.d_w, expected.d_w, "linear_fp8_backward's d_w");
}

}  // namespace
}  // namespace surogate
