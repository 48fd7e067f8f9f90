// fused_rope and fused_rope_backward (use_fused_rope) through the CUDA backend's binders
// (runtime/cuda_fused_ops.cpp), against the CPU reference rotation in double with tables computed
// in double from the same fp32 inverse frequencies: the on-the-fly kernel (cuda/kernels/rope.h:
// head_dim a multiple of 8, rotary_dim of 16; full and partial rotary, GQA-sized head counts) and
// the fallback through fp32 tables (rotary_dim 8). Tolerance 4e-3 of the largest entry (one bf16
// rounding of the output, ≤ 2^-9 relative; cos/sin in fp32 from an fp32 angle, ~1e-6) — the
// bf16 table version (rope_cos_sin → rope) rounds cos/sin to bf16 as well, so the fused op is the
// closer of the two to the fp32 reference. On the CPU the two versions are equal bit for bit
// (tests/ops_defs/test_fused_rope_defs.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/rope.h"
#include "runtime_cuda/cuda_node_plan.h"

namespace surogate::runtime {
namespace {

using namespace cuda::testing;

TEST(CudaFusedRope, BindersMatchTheCpuRotation) {
  SKIP_WITHOUT_GPU();
  struct Case { int64_t tokens; int heads, head_dim, rotary_dim; };
  for (Case c : {Case{300, 4, 64, 64}, Case{77, 2, 128, 64}, Case{50, 3, 8, 8}}) {
    SCOPED_TRACE(::testing::Message() << c.tokens << " tokens, heads " << c.heads << " head_dim " << c.head_dim
                                      << " rotary " << c.rotary_dim);
    const int64_t count = c.tokens * c.heads * c.head_dim;
    std::vector<int32_t> positions(static_cast<size_t>(c.tokens));
    for (int64_t t = 0; t < c.tokens; ++t) positions[static_cast<size_t>(t)] = static_cast<int32_t>((t * 7) % 97);
    const TestRopeFrequencies rope = test_rope_frequencies(c.rotary_dim, 1.1f);
    const ops::RopeFrequencies<double>& frequencies = rope.reference;
    const std::vector<double>& inv_freq = rope.inv_freq;
    const std::vector<float> x = random_floats(static_cast<size_t>(count), 2.0f);
    const std::vector<float> d_out = random_floats(static_cast<size_t>(count));
    const auto half = static_cast<size_t>(c.rotary_dim / 2);
    std::vector<double> cos(c.tokens * half), sin(c.tokens * half), out(count), d_x(count);
    // The angle as the kernels form it: the fp32 product of position and inverse frequency.
    for (int64_t t = 0; t < c.tokens; ++t) {
      for (size_t i = 0; i < half; ++i) {
        const double angle = static_cast<float>(positions[static_cast<size_t>(t)]) * static_cast<float>(inv_freq[i]);
        cos[t * half + i] = std::cos(angle) * frequencies.attention_scaling;
        sin[t * half + i] = std::sin(angle) * frequencies.attention_scaling;
      }
    }
    const std::vector<double> x_double(x.begin(), x.end()), d_out_double(d_out.begin(), d_out.end());
    ops::rope_forward(x_double.data(), cos.data(), sin.data(), c.tokens, c.heads, c.head_dim, c.rotary_dim, out.data());
    ops::rope_backward(d_out_double.data(), cos.data(), sin.data(), c.tokens, c.heads, c.head_dim, c.rotary_dim,
                       d_x.data());

    CudaNodePlan gpu;
    const graph::Shape flat{c.tokens, static_cast<int64_t>(c.heads) * c.head_dim};
    const nlohmann::json attrs{{"heads", c.heads}, {"head_dim", c.head_dim}, {"inv_freq", inv_freq},
                               {"attention_scaling", 1.1f}};
    graph::TensorId ids = gpu.builder.input("position_ids", DType::I32, {c.tokens});
    graph::TensorId forward = gpu.builder.op("fused_rope", {gpu.operand("x", DType::BF16, flat), ids}, attrs);
    graph::TensorId backward =
        gpu.builder.op("fused_rope_backward", {gpu.operand("d_out", DType::BF16, flat), ids}, attrs);
    gpu.load({forward, backward});
    gpu.write("x", x);
    gpu.write("d_out", d_out);
    gpu.run(positions);
    EXPECT_LT(relative_error(gpu.read(forward), out), 4e-3);
    EXPECT_LT(relative_error(gpu.read(backward), d_x), 4e-3);
  }
}

}  // namespace
}  // namespace surogate::runtime
