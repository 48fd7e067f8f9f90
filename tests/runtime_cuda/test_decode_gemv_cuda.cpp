// cuda::decode_gemv and cuda::decode_gemv_swiglu (cuda/kernels/decode_gemv.h), a decode step's
// weight reads for M = 1 and 2, on Qwen3-8B's shapes and on odd ones:
//   * against a float64 CPU product of the same bf16 values on the sampled columns
//     (hashed_weights.h): max |gpu − ref| / max |ref| < 4e-3 — the output's one rounding to bf16
//     (2^-8 of the largest value) plus fp32 accumulation error. A wrong row, chunk, warp or block
//     sum is off by order 1;
//   * against small_m_linear (the op's present kernel) on every column: < 1e-2 (two bf16
//     roundings of fp32 sums in different orders, the matmul tests' bound);
//   * bit for bit across runs and across rows-per-block choices: each row's sum has one fixed
//     order (thread t takes chunks t, t + 256, ... ascending; warps summed in order), whatever the
//     block holds — and so three weights in one launch equal each alone, bit for bit;
//   * SwiGLU: equal to silu(g) · u of the bf16 products g and u (each made by decode_gemv alone, bit
//     equal) within 4e-3 of the largest value (the output's rounding and __expf); against float64
//     with g and u rounded to bf16 < 1e-2 (one bf16 step of g or u, 2^-8, times silu' ≤ 1.1,
//     plus the output's rounding).
//   * with the RMSNorm folded in (DecodeGemvNorm): against rmsnorm_forward then the plain product
//     < 4e-3 (rstd's sum in another order may move a normalised value by one bf16 step, which moves
//     a sum far less than the output's rounding; SwiGLU's bound as above, 1e-2), and against a
//     float64 norm and product on the sampled columns < 4e-3.
// Every output is poisoned (NaN) first, so an unwritten element fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/hashed_weights.h"
#include "cuda/kernels/decode_gemv.h"
#include "cuda/kernels/rmsnorm.h"
#include "cuda/kernels/small_m_linear.h"
#include "cuda/test_helpers.h"

namespace surogate::cuda::testing {
namespace {

using Weight = DecodeGemvWeight<__nv_bfloat16>;

struct GemvCase {
  int64_t out, in;
};

// float64 x[m] · W[column] of bf16 values (x already rounded to bf16).
double gemv_dot(const std::vector<Bf16>& weight, int64_t column, const std::vector<float>& x, int64_t m, int64_t in) {
  double sum = 0.0;
  for (int64_t k = 0; k < in; ++k) sum += static_cast<double>(bf16_to_float(weight[column * in + k])) * x[m * in + k];
  return sum;
}

// One weight, the whole output downloaded.
std::vector<float> run_gemv(const DeviceBuffer<Bf16>& weight, int64_t out, const DeviceBuffer<Bf16>& x,
                            DecodeGemvShape shape) {
  DeviceBuffer<Bf16> result(static_cast<size_t>(shape.rows * out));
  result.poison();
  const Weight w{.weight = bf16_ptr(weight), .out = bf16_ptr(result), .rows = out};
  decode_gemv(&w, 1, bf16_ptr(x), shape, nullptr);
  synchronize();
  return download_bf16(result);
}

TEST(CudaDecodeGemv, QwenShapesAgainstTheCpuProductAndSmallM) {
  SKIP_WITHOUT_GPU();
  for (const GemvCase& s : {GemvCase{4096, 4096}, GemvCase{1024, 4096}, GemvCase{6144, 4096}, GemvCase{4096, 12288},
                            GemvCase{151936, 4096}}) {
    std::vector<Bf16> weight_bits(static_cast<size_t>(s.out * s.in));
    for (size_t i = 0; i < weight_bits.size(); ++i) weight_bits[i] = hashed_bf16(i);
    const DeviceBuffer<Bf16> weight = to_device(weight_bits);
    const std::vector<float> x = from_bf16(to_bf16(random_floats(static_cast<size_t>(kDecodeGemvMaxRows * s.in))));
    const DeviceBuffer<Bf16> device_x = device_bf16(x);
    const std::vector<int64_t> columns = sampled_columns(s.out);
    for (int64_t rows = 1; rows <= kDecodeGemvMaxRows; ++rows) {
      const std::string where = "N=" + std::to_string(s.out) + " K=" + std::to_string(s.in) + " M=" + std::to_string(rows);
      const std::vector<float> got = run_gemv(weight, s.out, device_x, {.rows = rows, .in = s.in});
      std::vector<double> expected;
      std::vector<float> got_sampled;
      for (int64_t m = 0; m < rows; ++m) {
        for (int64_t column : columns) {
          expected.push_back(gemv_dot(weight_bits, column, x, m, s.in));
          got_sampled.push_back(got[static_cast<size_t>(m * s.out + column)]);
        }
      }
      EXPECT_LT(relative_error(got_sampled, expected), 4e-3) << where;
      DeviceBuffer<Bf16> small_m(static_cast<size_t>(rows * s.out));
      small_m_linear(bf16_ptr(small_m), bf16_ptr(device_x), bf16_ptr(weight), static_cast<const __nv_bfloat16*>(nullptr),
                     static_cast<const __nv_bfloat16*>(nullptr), {.rows = rows, .out = s.out, .in = s.in}, nullptr);
      synchronize();
      EXPECT_LT(relative_error(got, download_bf16(small_m)), 1e-2) << where << " against small_m_linear";
      for (int rows_per_block : {1, 2, 4, 8}) {
        EXPECT_EQ(run_gemv(weight, s.out, device_x, {.rows = rows, .in = s.in, .rows_per_block = rows_per_block}), got)
            << where << " rows per block " << rows_per_block << ": not the same bits";
      }
    }
  }
}

// q, k and v in one launch (a bias on the first, an addend on the third, a scale) equal each alone
// bit for bit; on an odd shape (K = 264, partial blocks, 7 rows) all three against float64.
TEST(CudaDecodeGemv, ThreeWeightsInOneLaunch) {
  SKIP_WITHOUT_GPU();
  for (const int64_t in : {int64_t{264}, int64_t{4096}}) {
    const std::vector<int64_t> outs = in == 264 ? std::vector<int64_t>{1000, 24, 7} : std::vector<int64_t>{4096, 1024, 1024};
    for (int64_t rows = 1; rows <= kDecodeGemvMaxRows; ++rows) {
      const std::vector<float> x = from_bf16(to_bf16(random_floats(static_cast<size_t>(rows * in))));
      const DeviceBuffer<Bf16> device_x = device_bf16(x);
      std::vector<std::vector<float>> w(3), bias(3), addend(3);
      std::vector<DeviceBuffer<Bf16>> device_w, device_bias, device_addend, fused, alone;
      Weight fused_weights[3], alone_weights[3];
      for (size_t i = 0; i < 3; ++i) {
        w[i] = from_bf16(to_bf16(random_floats(static_cast<size_t>(outs[i] * in))));
        bias[i] = from_bf16(to_bf16(random_floats(static_cast<size_t>(outs[i]))));
        addend[i] = from_bf16(to_bf16(random_floats(static_cast<size_t>(rows * outs[i]))));
        device_w.push_back(device_bf16(w[i]));
        device_bias.push_back(device_bf16(bias[i]));
        device_addend.push_back(device_bf16(addend[i]));
        fused.emplace_back(static_cast<size_t>(rows * outs[i]));
        alone.emplace_back(static_cast<size_t>(rows * outs[i]));
        fused.back().poison();
        alone.back().poison();
      }
      for (size_t i = 0; i < 3; ++i) {
        const Weight base{.weight = bf16_ptr(device_w[i]),
                          .rows = outs[i],
                          .bias = i == 0 ? bf16_ptr(device_bias[i]) : nullptr,
                          .addend = i == 2 ? bf16_ptr(device_addend[i]) : nullptr};
        fused_weights[i] = alone_weights[i] = base;
        fused_weights[i].out = bf16_ptr(fused[i]);
        alone_weights[i].out = bf16_ptr(alone[i]);
      }
      const DecodeGemvShape shape{.rows = rows, .in = in, .alpha = 0.5f};
      const void* pointers[3] = {device_w[0].data(), device_w[1].data(), device_w[2].data()};
      ASSERT_TRUE(decode_gemv_supported(shape, device_x.data(), pointers, 3));
      decode_gemv(fused_weights, 3, bf16_ptr(device_x), shape, nullptr);
      for (size_t i = 0; i < 3; ++i) decode_gemv(&alone_weights[i], 1, bf16_ptr(device_x), shape, nullptr);
      synchronize();
      for (size_t i = 0; i < 3; ++i) {
        const std::string where = "K=" + std::to_string(in) + " M=" + std::to_string(rows) + " weight " + std::to_string(i);
        const std::vector<float> got = download_bf16(fused[i]);
        EXPECT_EQ(got, download_bf16(alone[i])) << where << ": not the same bits as alone";
        std::vector<double> expected(static_cast<size_t>(rows * outs[i]));
        for (int64_t m = 0; m < rows; ++m) {
          for (int64_t n = 0; n < outs[i]; ++n) {
            double sum = 0.0;
            for (int64_t k = 0; k < in; ++k) sum += static_cast<double>(x[m * in + k]) * w[i][n * in + k];
            sum *= 0.5;
            if (i == 0) sum += bias[i][n];
            if (i == 2) sum += addend[i][m * outs[i] + n];
            expected[m * outs[i] + n] = sum;
          }
        }
        EXPECT_LT(relative_error(got, expected), 4e-3) << where;
      }
    }
  }
}

TEST(CudaDecodeGemv, SwigluOfGateAndUp) {
  SKIP_WITHOUT_GPU();
  for (const GemvCase& s : {GemvCase{12288, 4096}, GemvCase{1000, 264}}) {
    std::vector<Bf16> gate_bits(static_cast<size_t>(s.out * s.in)), up_bits(gate_bits.size());
    for (size_t i = 0; i < gate_bits.size(); ++i) {
      gate_bits[i] = hashed_bf16(i);
      up_bits[i] = hashed_bf16(i + gate_bits.size());
    }
    const DeviceBuffer<Bf16> gate = to_device(gate_bits), up = to_device(up_bits);
    for (int64_t rows = 1; rows <= kDecodeGemvMaxRows; ++rows) {
      // Scaled so that the products reach a few units, where silu bends.
      const std::vector<float> x = from_bf16(to_bf16(random_floats(static_cast<size_t>(rows * s.in), 0.1f)));
      const DeviceBuffer<Bf16> device_x = device_bf16(x);
      const DecodeGemvShape shape{.rows = rows, .in = s.in, .alpha = 0.75f};
      const std::vector<float> g = run_gemv(gate, s.out, device_x, shape), u = run_gemv(up, s.out, device_x, shape);
      std::vector<float> from_products(g.size());
      for (size_t i = 0; i < g.size(); ++i) from_products[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
      const std::vector<int64_t> columns = sampled_columns(s.out);
      std::vector<double> expected;
      for (int64_t m = 0; m < rows; ++m) {
        for (int64_t column : columns) {
          const double gd = bf16_to_float(float_to_bf16(static_cast<float>(0.75 * gemv_dot(gate_bits, column, x, m, s.in))));
          const double ud = bf16_to_float(float_to_bf16(static_cast<float>(0.75 * gemv_dot(up_bits, column, x, m, s.in))));
          expected.push_back(gd / (1.0 + std::exp(-gd)) * ud);
        }
      }
      for (int rows_per_block : {0, 2, 4, 8, 16}) {
        const std::string where = "F=" + std::to_string(s.out) + " K=" + std::to_string(s.in) +
                                  " M=" + std::to_string(rows) + " rows per block " + std::to_string(rows_per_block);
        DeviceBuffer<Bf16> out(static_cast<size_t>(rows * s.out));
        out.poison();
        DecodeGemvShape fused_shape = shape;
        fused_shape.rows_per_block = rows_per_block;
        decode_gemv_swiglu(bf16_ptr(out), bf16_ptr(device_x), bf16_ptr(gate), bf16_ptr(up), s.out, fused_shape, nullptr);
        synchronize();
        const std::vector<float> got = download_bf16(out);
        EXPECT_LT(relative_error(got, from_products), 4e-3) << where << " against silu(g) · u";
        std::vector<float> got_sampled;
        for (int64_t m = 0; m < rows; ++m) {
          for (int64_t column : columns) got_sampled.push_back(got[static_cast<size_t>(m * s.out + column)]);
        }
        EXPECT_LT(relative_error(got_sampled, expected), 1e-2) << where << " against float64";
      }
    }
  }
}

// q, k and v with the norm before them folded in, and the MLP's gate / up with its norm.
TEST(CudaDecodeGemv, RmsnormFoldedIntoTheProduct) {
  SKIP_WITHOUT_GPU();
  constexpr int64_t kIn = 4096, kQ = 4096, kKv = 1024, kFfn = 12288;
  constexpr float kEpsilon = 1e-6f;
  std::vector<Bf16> weight_bits(static_cast<size_t>((kQ + 2 * kKv) * kIn)), up_bits(static_cast<size_t>(kFfn * kIn));
  for (size_t i = 0; i < weight_bits.size(); ++i) weight_bits[i] = hashed_bf16(i);
  for (size_t i = 0; i < up_bits.size(); ++i) up_bits[i] = hashed_bf16(i + weight_bits.size());
  const DeviceBuffer<Bf16> weights = to_device(weight_bits), up = to_device(up_bits);
  const std::vector<float> norm_weight = from_bf16(to_bf16(random_fp32(kIn, 0.5f, 1.5f)));
  const DeviceBuffer<Bf16> device_norm = device_bf16(norm_weight);
  const DecodeGemvNorm<__nv_bfloat16> norm{.weight = bf16_ptr(device_norm), .epsilon = kEpsilon};
  for (int64_t rows = 1; rows <= kDecodeGemvMaxRows; ++rows) {
    const std::string where = "M=" + std::to_string(rows);
    const std::vector<float> x = from_bf16(to_bf16(random_floats(static_cast<size_t>(rows * kIn), 3.0f)));
    const DeviceBuffer<Bf16> device_x = device_bf16(x);
    DeviceBuffer<Bf16> normed_x(static_cast<size_t>(rows * kIn));
    DeviceBuffer<float> rstd(static_cast<size_t>(rows));
    rmsnorm_forward(bf16_ptr(normed_x), rstd.data(), bf16_ptr(device_x), bf16_ptr(device_norm), rows, kIn, kEpsilon,
                    nullptr);
    const DecodeGemvShape shape{.rows = rows, .in = kIn};
    const void* pointer[1] = {weights.data()};
    ASSERT_TRUE(decode_gemv_supported(shape, device_x.data(), pointer, 1, true));
    // q, k, v: the fused launch against the norm kernel and then the plain launch.
    DeviceBuffer<Bf16> fused(static_cast<size_t>(rows * (kQ + 2 * kKv))), unfused(fused.size());
    fused.poison();
    Weight fused_weights[3], unfused_weights[3];
    int64_t offset = 0;
    for (int i = 0; i < 3; ++i) {
      const int64_t n = i == 0 ? kQ : kKv;
      fused_weights[i] = {.weight = bf16_ptr(weights) + offset * kIn, .out = bf16_ptr(fused) + rows * offset, .rows = n};
      unfused_weights[i] = fused_weights[i];
      unfused_weights[i].out = bf16_ptr(unfused) + rows * offset;
      offset += n;
    }
    decode_gemv(fused_weights, 3, bf16_ptr(device_x), shape, nullptr, norm);
    decode_gemv(unfused_weights, 3, bf16_ptr(normed_x), shape, nullptr);
    synchronize();
    const std::vector<float> got = download_bf16(fused);
    EXPECT_LT(relative_error(got, download_bf16(unfused)), 4e-3) << where << " against rmsnorm_forward";
    // float64: the norm, then the q product on the sampled columns.
    std::vector<float> normed_reference(x.size());
    for (int64_t m = 0; m < rows; ++m) {
      double squares = 0.0;
      for (int64_t k = 0; k < kIn; ++k) squares += static_cast<double>(x[m * kIn + k]) * x[m * kIn + k];
      const double scale = 1.0 / std::sqrt(squares / kIn + kEpsilon);
      for (int64_t k = 0; k < kIn; ++k) {
        // rounded to bf16 as the norm's output is (the op's semantics), so that what remains is the
        // product's own error
        normed_reference[m * kIn + k] = bf16_to_float(float_to_bf16(static_cast<float>(x[m * kIn + k] * scale * norm_weight[k])));
      }
    }
    std::vector<double> expected;
    std::vector<float> got_sampled;
    for (int64_t m = 0; m < rows; ++m) {
      for (int64_t column : sampled_columns(kQ)) {
        expected.push_back(gemv_dot(weight_bits, column, normed_reference, m, kIn));
        got_sampled.push_back(got[static_cast<size_t>(m * kQ + column)]);
      }
    }
    EXPECT_LT(relative_error(got_sampled, expected), 4e-3) << where << " against float64";
    // gate: the up weights reversed (any other weight will do).
    const DeviceBuffer<Bf16> gate = to_device(std::vector<Bf16>(up_bits.rbegin(), up_bits.rend()));
    DeviceBuffer<Bf16> mlp_fused(static_cast<size_t>(rows * kFfn)), mlp_unfused(mlp_fused.size());
    mlp_fused.poison();
    decode_gemv_swiglu(bf16_ptr(mlp_fused), bf16_ptr(device_x), bf16_ptr(gate), bf16_ptr(up), kFfn, shape, nullptr, norm);
    decode_gemv_swiglu(bf16_ptr(mlp_unfused), bf16_ptr(normed_x), bf16_ptr(gate), bf16_ptr(up), kFfn, shape, nullptr);
    synchronize();
    EXPECT_LT(relative_error(download_bf16(mlp_fused), download_bf16(mlp_unfused)), 1e-2) << where << " SwiGLU";
  }
}

TEST(CudaDecodeGemv, TheShapeRule) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer<Bf16> x(64), w(64 * 64);
  const void* aligned[1] = {w.data()};
  const void* misaligned[1] = {bf16_ptr(w) + 1};
  EXPECT_TRUE(decode_gemv_supported({.rows = 2, .in = 64}, x.data(), aligned, 1));
  EXPECT_FALSE(decode_gemv_supported({.rows = 3, .in = 64}, x.data(), aligned, 1));
  EXPECT_FALSE(decode_gemv_supported({.rows = 1, .in = 60}, x.data(), aligned, 1));
  EXPECT_FALSE(decode_gemv_supported({.rows = 1, .in = 64}, bf16_ptr(x) + 1, aligned, 1));
  EXPECT_FALSE(decode_gemv_supported({.rows = 1, .in = 64}, x.data(), misaligned, 1));
  EXPECT_FALSE(decode_gemv_supported({.rows = 1, .in = 64}, x.data(), aligned, 4));
  EXPECT_TRUE(decode_gemv_supported({.rows = 2, .in = 8192}, x.data(), aligned, 1, true));
  EXPECT_FALSE(decode_gemv_supported({.rows = 2, .in = 8200}, x.data(), aligned, 1, true));
  EXPECT_TRUE(decode_gemv_supported({.rows = 2, .in = 8200}, x.data(), aligned, 1, false));
}

}  // namespace
}  // namespace surogate::cuda::testing
