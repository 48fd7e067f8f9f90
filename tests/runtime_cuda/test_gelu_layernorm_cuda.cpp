// gelu / gelu_backward and layernorm / layernorm_backward through the CUDA backend's binders
// (runtime/cuda_gelu_layernorm_ops.cpp: a one-node BF16 plan per op) against the CPU ops in
// double on the same bf16 inputs, at odd and model-sized widths.
// Error measure: max |gpu − ref| / max |ref| (tests/cuda/test_helpers.h); a NaN fails.
// Tolerances:
//   gelu out, d_x                  4e-3  (fp32 math, one bf16 rounding of the output: ≤ 2^-9 relative)
//   layernorm out, d_x             1e-2  (as rmsnorm: bf16 in/out, fp32 sums over the row)
//   layernorm mean                 1e-4  (fp32 sum of C bf16 values over C, against max |mean|)
//   layernorm rstd                 1e-5  (fp32 sums of squares, rsqrtf; as rmsnorm's rstd)
//   layernorm d_weight, d_bias     1e-2  (fp32 column sums over all rows, one bf16 rounding)
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda/test_helpers.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "runtime_cuda/cuda_node_plan.h"

namespace surogate::runtime {
namespace {

using namespace cuda::testing;

std::vector<double> as_double(const std::vector<float>& values) { return {values.begin(), values.end()}; }

// The erf, tanh and quick (x · σ(1.702 x), Qwen2-VL's vision MLP) forms.
TEST(CudaGeluLayerNorm, GeluEveryFormMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (int64_t count : {int64_t{1}, int64_t{37}, int64_t{4096 * 33}}) {
    for (const char* form : {"none", "tanh", "quick"}) {
      SCOPED_TRACE(::testing::Message() << count << " " << form);
      const ops::GeluApproximation approximation = *ops::gelu_approximation_from_name(form);
      const std::vector<float> x = random_floats(static_cast<size_t>(count), 5.0f), d_out = random_floats(static_cast<size_t>(count));
      std::vector<double> out(x.size()), d_x(x.size());
      ops::gelu_forward(as_double(x).data(), count, approximation, out.data());
      ops::gelu_backward(as_double(d_out).data(), as_double(x).data(), count, approximation, d_x.data());

      CudaNodePlan gpu;
      graph::TensorId gx = gpu.operand("x", DType::BF16, {count});
      graph::TensorId forward = gpu.builder.op("gelu", {gx}, {{"approximate", form}})[0];
      graph::TensorId backward =
          gpu.builder.op("gelu_backward", {gpu.operand("d_out", DType::BF16, {count}), gx}, {{"approximate", form}})[0];
      gpu.load({forward, backward});
      gpu.write("x", x);
      gpu.write("d_out", d_out);
      gpu.run({});
      EXPECT_LT(relative_error(gpu.read(forward), out), 4e-3) << "out";
      EXPECT_LT(relative_error(gpu.read(backward), d_x), 4e-3) << "d_x";
    }
  }
}

TEST(CudaGeluLayerNorm, LayerNormWithAndWithoutBiasMatchesCpu) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t rows, channels;
    bool bias;
  };
  for (Case c : {Case{1, 7, true}, Case{37, 64, false}, Case{130, 1000, true}, Case{5000, 4096, true}}) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.channels << (c.bias ? " bias" : ""));
    const int64_t rows = c.rows, channels = c.channels;
    const size_t count = static_cast<size_t>(rows * channels);
    std::vector<float> x = random_floats(count, 2.0f);
    for (size_t i = 0; i < count; ++i) x[i] = bf16_to_float(float_to_bf16(x[i] + 0.5f));  // a mean away from 0
    const std::vector<float> d_out = random_floats(count), weight = random_floats(static_cast<size_t>(channels)),
                             bias = random_floats(static_cast<size_t>(channels));
    std::vector<double> out(count), mean(rows), rstd(rows), d_x(count), d_weight(channels, 0.0), d_bias(channels, 0.0);
    const std::vector<double> xd = as_double(x), wd = as_double(weight), bd = as_double(bias);
    ops::layernorm_forward(xd.data(), wd.data(), c.bias ? bd.data() : nullptr, rows, channels, 1e-5, out.data(),
                           mean.data(), rstd.data());
    ops::layernorm_backward(as_double(d_out).data(), xd.data(), wd.data(), mean.data(), rstd.data(), rows, channels,
                            d_x.data(), d_weight.data(), d_bias.data());

    CudaNodePlan gpu;
    const graph::Shape shape{rows, channels};
    graph::TensorId gx = gpu.operand("x", DType::BF16, shape), gw = gpu.operand("w", DType::BF16, {channels});
    std::vector<graph::TensorId> operands{gx, gw};
    if (c.bias) operands.push_back(gpu.operand("b", DType::BF16, {channels}));
    auto forward = gpu.builder.op("layernorm", operands, {{"eps", 1e-5}});
    graph::TensorId g_mean = gpu.operand("mean_ref", DType::F32, {rows}), g_rstd = gpu.operand("rstd_ref", DType::F32, {rows});
    graph::TensorId g_dout = gpu.operand("d_out", DType::BF16, shape);
    auto backward = gpu.builder.op("layernorm_backward", {g_dout, gx, gw, g_mean, g_rstd}, {{"bias_grad", true}});
    auto frozen = gpu.builder.op("layernorm_backward", {g_dout, gx, gw, g_mean, g_rstd}, {{"weight_grad", false}});
    gpu.load({forward[0], forward[1], forward[2], backward[0], backward[1], backward[2], frozen[0]});
    gpu.write("x", x);
    gpu.write("w", weight);
    if (c.bias) gpu.write("b", bias);
    gpu.write("d_out", d_out);
    gpu.write("mean_ref", std::vector<float>(mean.begin(), mean.end()));
    gpu.write("rstd_ref", std::vector<float>(rstd.begin(), rstd.end()));
    gpu.run({});
    EXPECT_LT(relative_error(gpu.read(forward[0]), out), 1e-2) << "out";
    EXPECT_LT(relative_error(gpu.read(forward[1]), mean), 1e-4) << "mean";
    EXPECT_LT(relative_error(gpu.read(forward[2]), rstd), 1e-5) << "rstd";
    EXPECT_LT(relative_error(gpu.read(backward[0]), d_x), 1e-2) << "d_x";
    EXPECT_LT(relative_error(gpu.read(backward[1]), d_weight), 1e-2) << "d_weight";
    EXPECT_LT(relative_error(gpu.read(backward[2]), d_bias), 1e-2) << "d_bias";
    EXPECT_EQ(gpu.read(frozen[0]), gpu.read(backward[0])) << "d_x without the parameter pass";
  }
}

}  // namespace
}  // namespace surogate::runtime
