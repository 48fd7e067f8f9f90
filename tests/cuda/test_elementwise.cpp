// Embedding, RMSNorm (plain and fused residual), RoPE and SwiGLU kernels vs float64 CPU
// references on the same bf16 inputs. Tolerances (relative_error, test_helpers.h):
//   bf16 outputs of fp32 elementwise math: 4e-3 (one bf16 rounding is ≤ 2^-9 of an element)
//   fp32 outputs (rstd, dweight, embedding grads): 1e-4 (fp32 accumulation order)
//   embedding forward and the residual sum: exact (copies / one correctly rounded add)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cuda/kernels/embedding.h"
#include "cuda/kernels/rmsnorm.h"
#include "cuda/kernels/rope.h"
#include "cuda/kernels/swiglu.h"
#include "test_helpers.h"

namespace surogate::cuda::testing {
namespace {

constexpr double kBf16Elementwise = 4e-3;
constexpr double kFp32Accumulate = 1e-4;

TEST(CudaEmbedding, ForwardAndBackward) {
  SKIP_WITHOUT_GPU();
  const int64_t shapes[][3] = {{1, 5, 8}, {37, 11, 64}, {513, 1000, 264}};  // tokens, vocab, channels
  for (const auto& [tokens, vocab, channels] : shapes) {
    auto table = random_floats(vocab * channels);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab) - 1);
    std::vector<int32_t> ids(tokens);
    for (auto& id : ids) id = pick(generator());
    ids[tokens / 2] = ids[0];  // a repeated id accumulates twice
    auto device_table = device_bf16(table);
    auto device_ids = to_device(ids);
    DeviceBuffer<Bf16> out(tokens * channels);
    out.poison();
    embedding_forward(bf16_ptr(out), device_ids.data(), bf16_ptr(device_table), tokens, vocab, channels, nullptr);

    auto dout = random_floats(tokens * channels);
    auto device_dout = device_bf16(dout);
    auto initial = random_fp32(vocab * channels, -1.0f, 1.0f);
    auto dtable = to_device(initial);
    embedding_backward(dtable.data(), device_ids.data(), bf16_ptr(device_dout), tokens, vocab, channels, nullptr);
    synchronize();

    std::vector<float> expected(tokens * channels);
    std::vector<double> expected_grad(initial.begin(), initial.end());
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t c = 0; c < channels; ++c) {
        expected[t * channels + c] = table[ids[t] * channels + c];
        expected_grad[ids[t] * channels + c] += dout[t * channels + c];
      }
    EXPECT_EQ(relative_error(download_bf16(out), expected), 0.0) << "tokens=" << tokens;
    EXPECT_LT(relative_error(dtable.download(), expected_grad), kFp32Accumulate) << "tokens=" << tokens;
  }
}

// embedding_backward_rows: the whole bf16 gradient from touched rows only, the same bits as
// zeroing an fp32 table, the scatter-add and rounding every element (the old binder's path),
// with the fp32 scratch and the output full of garbage beforehand (only touched rows may be read).
TEST(CudaEmbedding, BackwardRowsEqualsTheWholeTableRounded) {
  SKIP_WITHOUT_GPU();
  const int64_t shapes[][3] = {{1, 5, 8}, {37, 50, 64}, {513, 1000, 264}, {4096, 151936, 64}};
  for (const auto& [tokens, vocab, channels] : shapes) {
    // Distinct ids but one repeat: the scatter-add's fp32 atomics sum a row of two in either
    // order to the same bits (three or more could differ between the two runs).
    std::vector<int32_t> ids(vocab);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), generator());
    ids.resize(tokens);
    ids[tokens / 2] = ids[0];
    auto device_ids = to_device(ids);
    auto device_dout = device_bf16(random_floats(tokens * channels));
    DeviceBuffer<float> whole(vocab * channels), rows(vocab * channels);
    whole.zero();
    rows.poison();
    DeviceBuffer<Bf16> out(vocab * channels);
    out.poison();
    embedding_backward(whole.data(), device_ids.data(), bf16_ptr(device_dout), tokens, vocab, channels, nullptr);
    embedding_backward_rows(bf16_ptr(out), rows.data(), device_ids.data(), bf16_ptr(device_dout), tokens, vocab,
                            channels, nullptr);
    synchronize();
    const std::vector<float> expected = whole.download();
    const std::vector<Bf16> got = out.download();
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(got[i], float_to_bf16(expected[i])) << "element " << i << ", tokens=" << tokens << " vocab=" << vocab;
    }
  }
}

struct NormReference {
  std::vector<double> out, rstd, dinput, dweight;
};

NormReference reference_rmsnorm(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& dy,
                                const std::vector<float>& dresidual, int64_t rows, int64_t channels, double epsilon) {
  NormReference r;
  r.out.resize(rows * channels);
  r.dinput.resize(rows * channels);
  r.rstd.resize(rows);
  r.dweight.assign(channels, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = &x[i * channels];
    double sum = 0.0;
    for (int64_t c = 0; c < channels; ++c) sum += double(row[c]) * row[c];
    const double rstd = 1.0 / std::sqrt(sum / channels + epsilon);
    r.rstd[i] = rstd;
    double dot = 0.0;
    for (int64_t c = 0; c < channels; ++c) {
      const double normalized = row[c] * rstd;
      r.out[i * channels + c] = normalized * w[c];
      dot += dy[i * channels + c] * double(w[c]) * normalized;
      r.dweight[c] += dy[i * channels + c] * normalized;
    }
    for (int64_t c = 0; c < channels; ++c) {
      const double normalized = row[c] * rstd;
      r.dinput[i * channels + c] = rstd * (dy[i * channels + c] * double(w[c]) - normalized * dot / channels) +
                                   (dresidual.empty() ? 0.0 : dresidual[i * channels + c]);
    }
  }
  return r;
}

void check_rmsnorm(int64_t rows, int64_t channels, bool fused) {
  const float epsilon = 1e-6f;
  auto x = random_floats(rows * channels, 2.0f), w = random_floats(channels), dy = random_floats(rows * channels);
  std::vector<float> residual, dresidual, normalized_input = x;
  auto device_x = device_bf16(x), device_w = device_bf16(w), device_dy = device_bf16(dy);
  DeviceBuffer<Bf16> out(rows * channels), residual_out(rows * channels), dinput(rows * channels);
  DeviceBuffer<float> rstd(rows);
  out.poison();
  rstd.poison();
  DeviceBuffer<Bf16> device_residual, device_dresidual;
  if (fused) {
    residual = random_floats(rows * channels, 2.0f);
    dresidual = random_floats(rows * channels);
    device_residual = device_bf16(residual);
    device_dresidual = device_bf16(dresidual);
    residual_out.poison();
    residual_rmsnorm_forward(bf16_ptr(out), bf16_ptr(residual_out), rstd.data(), bf16_ptr(device_residual),
                             bf16_ptr(device_x), bf16_ptr(device_w), rows, channels, epsilon, nullptr);
    for (int64_t i = 0; i < rows * channels; ++i)
      normalized_input[i] = bf16_to_float(float_to_bf16(residual[i] + x[i]));
  } else {
    rmsnorm_forward(bf16_ptr(out), rstd.data(), bf16_ptr(device_x), bf16_ptr(device_w), rows, channels, epsilon,
                    nullptr);
  }
  const NormReference reference = reference_rmsnorm(normalized_input, w, dy, dresidual, rows, channels, epsilon);
  const __nv_bfloat16* saved_input = fused ? bf16_ptr(residual_out) : bf16_ptr(device_x);

  auto initial_dweight = random_fp32(channels, -1.0f, 1.0f);
  std::vector<float> dweight_results[2];
  std::vector<Bf16> dinput_results[2];
  for (int run = 0; run < 2; ++run) {  // twice: the backward must be bitwise deterministic
    auto dweight = to_device(initial_dweight);
    DeviceBuffer<float> scratch(rmsnorm_backward_scratch_floats(rows, channels));
    dinput.poison();
    rmsnorm_backward(bf16_ptr(dinput), dweight.data(), scratch.data(), bf16_ptr(device_dy),
                     fused ? bf16_ptr(device_dresidual) : nullptr, saved_input, bf16_ptr(device_w), rstd.data(), rows,
                     channels, nullptr);
    synchronize();
    dweight_results[run] = dweight.download();
    dinput_results[run] = dinput.download();
  }
  // A frozen weight (null dweight, no scratch): the same dinput, bit for bit.
  dinput.poison();
  rmsnorm_backward(bf16_ptr(dinput), nullptr, nullptr, bf16_ptr(device_dy), fused ? bf16_ptr(device_dresidual) : nullptr,
                   saved_input, bf16_ptr(device_w), rstd.data(), rows, channels, nullptr);
  synchronize();
  const std::vector<Bf16> frozen_dinput = dinput.download();
  std::vector<double> expected_dweight = reference.dweight;
  for (int64_t c = 0; c < channels; ++c) expected_dweight[c] += initial_dweight[c];

  const std::string where = "rows=" + std::to_string(rows) + " channels=" + std::to_string(channels);
  if (fused) EXPECT_EQ(relative_error(download_bf16(residual_out), normalized_input), 0.0) << where;
  EXPECT_LT(relative_error(download_bf16(out), reference.out), kBf16Elementwise) << where;
  EXPECT_LT(relative_error(rstd.download(), reference.rstd), kFp32Accumulate) << where;
  EXPECT_LT(relative_error(from_bf16(dinput_results[0]), reference.dinput), kBf16Elementwise) << where;
  EXPECT_LT(relative_error(dweight_results[0], expected_dweight), kFp32Accumulate) << where;
  EXPECT_EQ(dweight_results[0], dweight_results[1]) << "dweight not deterministic, " << where;
  EXPECT_EQ(dinput_results[0], dinput_results[1]) << "dinput not deterministic, " << where;
  EXPECT_EQ(frozen_dinput, dinput_results[0]) << "dinput without dweight differs, " << where;
}

TEST(CudaRmsnorm, ForwardBackward) {
  SKIP_WITHOUT_GPU();
  for (auto [rows, channels] : {std::pair<int64_t, int64_t>{1, 8}, {7, 24}, {129, 1000}, {1031, 4096}, {17, 8192}, {3, 12288}, {2, 32768}})
    check_rmsnorm(rows, channels, false);
}

TEST(CudaRmsnorm, FusedResidualForwardBackward) {
  SKIP_WITHOUT_GPU();
  for (auto [rows, channels] : {std::pair<int64_t, int64_t>{1, 8}, {33, 328}, {600, 2048}, {40, 6144}})
    check_rmsnorm(rows, channels, true);
}

TEST(CudaRope, ForwardBackwardWithPositionIds) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t tokens;
    int heads, head_dim, rotary_dim;
    float scaling;
  };
  for (const Case& c : {Case{1, 1, 16, 16, 1.0f}, Case{37, 3, 64, 64, 1.0f}, Case{300, 4, 128, 128, 1.25f},
                        Case{65, 2, 128, 64, 1.0f}}) {
    std::vector<float> inv_freq(c.rotary_dim / 2);
    for (int i = 0; i < c.rotary_dim / 2; ++i) inv_freq[i] = std::pow(1e6f, -2.0f * i / c.rotary_dim);
    std::vector<int32_t> positions(c.tokens);
    for (int64_t t = 0; t < c.tokens; ++t) positions[t] = static_cast<int32_t>(t < c.tokens / 2 ? t : t - c.tokens / 2) * 97;
    const int64_t count = c.tokens * c.heads * c.head_dim;
    auto x = random_floats(count), dy = random_floats(count);
    auto device_x = device_bf16(x), device_dy = device_bf16(dy);
    auto device_inv_freq = to_device(inv_freq);
    auto device_positions = to_device(positions);
    DeviceBuffer<Bf16> out(count);
    out.poison();
    rope_forward(bf16_ptr(out), bf16_ptr(device_x), device_inv_freq.data(), device_positions.data(), c.tokens,
                 c.heads, c.head_dim, c.rotary_dim, c.scaling, nullptr);
    // Backward in place, exercising out == in.
    rope_backward(bf16_ptr(device_dy), bf16_ptr(device_dy), device_inv_freq.data(), device_positions.data(),
                  c.tokens, c.heads, c.head_dim, c.rotary_dim, c.scaling, nullptr);
    synchronize();
    std::vector<double> expected(count), expected_grad(count);
    const int half = c.rotary_dim / 2;
    for (int64_t t = 0; t < c.tokens; ++t)
      for (int h = 0; h < c.heads; ++h) {
        const int64_t base = (t * c.heads + h) * c.head_dim;
        for (int i = 0; i < c.head_dim; ++i) {
          expected[base + i] = x[base + i];
          expected_grad[base + i] = dy[base + i];
        }
        for (int i = 0; i < half; ++i) {
          const double angle = double(float(positions[t]) * inv_freq[i]);
          const double cosine = std::cos(angle) * c.scaling, sine = std::sin(angle) * c.scaling;
          expected[base + i] = x[base + i] * cosine - x[base + i + half] * sine;
          expected[base + i + half] = x[base + i + half] * cosine + x[base + i] * sine;
          expected_grad[base + i] = dy[base + i] * cosine + dy[base + i + half] * sine;
          expected_grad[base + i + half] = dy[base + i + half] * cosine - dy[base + i] * sine;
        }
      }
    EXPECT_LT(relative_error(download_bf16(out), expected), kBf16Elementwise) << "tokens=" << c.tokens;
    EXPECT_LT(relative_error(download_bf16(device_dy), expected_grad), kBf16Elementwise) << "tokens=" << c.tokens;
  }
}

TEST(CudaSwiglu, ForwardBackwardFusedAndSeparateLayouts) {
  SKIP_WITHOUT_GPU();
  // 12 and 3420 (Qwen2.5-VL-7B's vision MLP) are not multiples of 8: the one-value-per-thread path.
  for (auto [rows, channels] : {std::pair<int64_t, int64_t>{1, 8}, {37, 72}, {515, 1408}, {3, 12}, {33, 3420}}) {
    for (bool fused : {false, true}) {
      const int64_t stride = fused ? 2 * channels : channels;
      auto gate_up = random_floats(rows * 2 * channels, 4.0f), dout = random_floats(rows * channels);
      auto device_inputs = device_bf16(gate_up), device_dout = device_bf16(dout);
      // fused: [rows, 2I] = gate | up;  separate: gate = first rows·I values, up = the rest.
      const __nv_bfloat16* gate = bf16_ptr(device_inputs);
      const __nv_bfloat16* up = gate + (fused ? channels : rows * channels);
      auto value = [&](bool is_up, int64_t r, int64_t c) {
        return double(gate_up[(is_up ? (fused ? channels : rows * channels) : 0) + r * stride + c]);
      };
      DeviceBuffer<Bf16> out(rows * channels), grads(rows * 2 * channels);
      out.poison();
      grads.poison();
      __nv_bfloat16* dgate = bf16_ptr(grads);
      __nv_bfloat16* dup = dgate + (fused ? channels : rows * channels);
      swiglu_forward(bf16_ptr(out), gate, up, rows, channels, stride, nullptr);
      swiglu_backward(dgate, dup, bf16_ptr(device_dout), gate, up, rows, channels, stride, nullptr);
      synchronize();
      std::vector<double> expected(rows * channels), expected_grads(rows * 2 * channels);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < channels; ++c) {
          const double g = value(false, r, c), u = value(true, r, c), s = 1.0 / (1.0 + std::exp(-g));
          const double dy = dout[r * channels + c];
          expected[r * channels + c] = g * s * u;
          expected_grads[r * stride + c] = dy * u * s * (1.0 + g * (1.0 - s));
          expected_grads[(fused ? channels : rows * channels) + r * stride + c] = dy * g * s;
        }
      const std::string where = "rows=" + std::to_string(rows) + " fused=" + std::to_string(fused);
      EXPECT_LT(relative_error(download_bf16(out), expected), kBf16Elementwise) << where;
      EXPECT_LT(relative_error(download_bf16(grads), expected_grads), kBf16Elementwise) << where;
    }
  }
}

}  // namespace
}  // namespace surogate::cuda::testing
