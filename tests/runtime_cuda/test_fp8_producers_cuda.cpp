// The fp8_hybrid producers that quantize their own output on the GPU (rmsnorm_fp8,
// fused_residual_rmsnorm_fp8, swiglu_fp8: cuda/kernels/fp8_epilogue.cuh, runtime/cuda_fp8_ops.cpp)
// against the unfused graph — the producer, then quantize_fp8 of its output (fp8_record_amax +
// fp8_quantize, themselves tested bit for bit against the CPU in test_fp8_cuda.cpp) — on the
// CUDA backend, BF16, fresh random values spanning 2^-20 .. 2^6: every output (the bf16 results,
// rstd, the E4M3 codes, scale_inv) and the scaling state after the step equal bit for bit, with
// no delayed amax yet (the first step: the producer records the amax, fp8_quantize_pending
// quantizes) and with delayed amaxes (the producer quantizes; one row small enough to saturate) —
// then also with the delayed sites flagged by the host (CudaBackend::set_fp8_delayed_sites: no
// pending pass, no amax zeroing; the unflagged sites keep theirs).
// The fused graph is made by models::fuse_fp8_producers from the unfused one. Row counts and
// widths are not multiples of the kernels' block sizes. The same for the backward's
// swiglu_backward_fp8 (E5M2 codes of d_gate and d_up at two sites) and the
// linear_fp8_backward_input_quantized products that read them, made by models::fuse_fp8_gradients
// from swiglu_backward and two linear_fp8_backward_input (the second adding the first's d_x):
// d_gate, d_up, both d_x (the same cuBLASLt product of the same codes) and the state, bit for bit.
// With trained projections (full fine-tuning), the same through linear_fp8_backward: the
// linear_fp8_backward_quantized products' d_x and d_weight, bit for bit.
// Qwen3's q / k norm + RoPE backward (fused_rmsnorm_rope_backward_fp8), frozen and trained. The
// attention's output quantized by the flash forward's epilogue (attention_fp8).
// And a norm's fused_residual_rmsnorm_backward_fp8 (the residual stream's gradient in E5M2 for the
// projection that reads it) against the backward then linear_fp8_backward_input (frozen), or
// linear_fp8_backward with the norm weight's gradient too (trained: full fine-tuning).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "cuda/test_helpers.h"
#include "core/bfloat16.h"
#include "cuda/device_info.h"
#include "graph/builder.h"
#include "models/fp8_fusion.h"
#include "ops/defs/register_ops.h"
#include "quant/fp8.h"
#include "quant/fp8_scaling.h"
#include "runtime/cuda_backend.h"

namespace surogate {
namespace {

constexpr int64_t kRows = 259, kChannels = 648, kInter = 1368, kHistory = 4;
// The backward's products: cuBLASLt's FP8 layouts take K and N in multiples of 16.
constexpr int64_t kGradChannels = 640, kGradInter = 1360;

graph::Graph producers(const graph::OpRegistry& registry, int64_t rows) {
  graph::GraphBuilder b(registry);
  const DType bf16 = DType::BF16;
  graph::TensorId residual = b.parameter("residual", bf16, {rows, kChannels}, false);
  graph::TensorId x = b.parameter("x", bf16, {rows, kChannels}, false);
  graph::TensorId w = b.parameter("w", bf16, {kChannels}, false);
  graph::TensorId gate = b.parameter("gate", bf16, {rows, kInter}, false);
  graph::TensorId up = b.parameter("up", bf16, {rows, kInter}, false);
  graph::TensorId state = b.parameter("state", DType::F32, {3, 2 + kHistory}, false);
  auto fused_norm = b.op("fused_residual_rmsnorm", {residual, x, w}, {{"eps", 1e-6}}, "ln2");
  auto norm = b.op("rmsnorm", {x, w}, {{"eps", 1e-6}}, "ln1");
  graph::TensorId activated = b.op("swiglu", {gate, up}, nlohmann::json::object(), "act");
  auto q0 = b.op("quantize_fp8", {fused_norm[0], state}, {{"format", "e4m3"}, {"site", 0}}, "ln2.fp8");
  auto q1 = b.op("quantize_fp8", {norm[0], state}, {{"format", "e4m3"}, {"site", 1}}, "ln1.fp8");
  auto q2 = b.op("quantize_fp8", {activated, state}, {{"format", "e4m3"}, {"site", 2}}, "act.fp8");
  for (graph::TensorId id : {fused_norm[0], fused_norm[1], fused_norm[2], norm[0], norm[1], activated}) b.mark_output(id);
  for (auto* q : {&q0, &q1, &q2}) {
    b.mark_output((*q)[0]);
    b.mark_output((*q)[1]);
  }
  return b.finish();
}

// Every output's bytes, then the state's, after one execution. `inputs` are 16-bit words (bf16
// values, or pairs of FP8 codes), `floats` F32 tensors; "state" is the scaling state.
using Inputs = std::vector<std::pair<std::string, std::vector<uint16_t>>>;
using FloatInputs = std::vector<std::pair<std::string, std::vector<float>>>;
// `flag_sites`: the host tells the backend which sites have a delayed amax (as the training device
// does after each roll), so their producers launch no pending pass and no amax zeroing.
std::vector<std::vector<uint8_t>> run(const compiler::ExecutionPlan& plan, const graph::OpRegistry& registry,
                                      const Inputs& inputs, const std::vector<float>& state,
                                      const FloatInputs& floats = {}, bool flag_sites = false) {
  runtime::CudaBackend backend;
  backend.load(plan, registry);
  if (flag_sites) {
    const int64_t width = 2 + kHistory, sites = static_cast<int64_t>(state.size()) / width;
    backend.set_fp8_delayed_sites(quant::delayed_amax_sites(state.data(), sites, width));
  }
  for (const auto& [name, bits] : inputs) backend.write(plan.tensor(name), std::as_bytes(std::span<const uint16_t>(bits)));
  for (const auto& [name, values] : floats) backend.write(plan.tensor(name), std::as_bytes(std::span<const float>(values)));
  backend.write(plan.tensor("state"), std::as_bytes(std::span<const float>(state)));
  backend.execute({});
  std::vector<std::vector<uint8_t>> results;
  std::vector<graph::TensorId> ids(plan.graph.outputs.begin(), plan.graph.outputs.end());
  ids.push_back(plan.tensor("state"));
  for (graph::TensorId id : ids) {
    const graph::TensorType& type = plan.graph.tensor(id).type;
    std::vector<uint8_t> bytes(static_cast<size_t>(type.numel()) * dtype_size_bytes(type.dtype));
    backend.read(id, std::as_writable_bytes(std::span<uint8_t>(bytes)));
    results.push_back(std::move(bytes));
  }
  return results;
}

// The fused plan's outputs equal the unfused plan's byte for byte; `names` says which is which
// (the state last), `context` which case.
void expect_same_bytes(const std::vector<std::vector<uint8_t>>& actual,
                       const std::vector<std::vector<uint8_t>>& expected, const std::vector<std::string>& names,
                       const std::string& context) {
  ASSERT_EQ(actual.size(), expected.size()) << context;
  ASSERT_EQ(names.size(), expected.size()) << context;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(actual[i].size(), expected[i].size()) << context << ": " << names[i];
    EXPECT_EQ(std::memcmp(actual[i].data(), expected[i].data(), expected[i].size()), 0)
        << context << ": " << names[i] << " differs";
  }
}

std::string amax_case(bool delayed) { return delayed ? "delayed amax" : "no delayed amax"; }

// bf16 bits of `count` gradient-like values (magnitudes 2^-12 … 2^2, random signs) or, not
// `spread`, of values in [0.5, 2) (norm weights).
std::vector<uint16_t> random_bf16(std::mt19937& rng, size_t count, bool spread) {
  std::uniform_real_distribution<float> exponent(-12.0f, 2.0f), sign(-1.0f, 1.0f), positive(0.5f, 2.0f);
  std::vector<uint16_t> bits(count);
  for (uint16_t& b : bits) b = float_to_bf16(spread ? std::copysign(std::exp2(exponent(rng)), sign(rng)) : positive(rng));
  return bits;
}

// `count` E4M3 codes (two per 16-bit word) of N(0, 1) · 64 values: no NaN codes.
std::vector<uint16_t> random_e4m3(std::mt19937& rng, size_t count) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> pairs((count + 1) / 2);
  for (uint16_t& pair : pairs) {
    pair = static_cast<uint16_t>(quant::fp8_encode(normal(rng) * 64.0f, quant::Fp8Format::E4M3) |
                                 (quant::fp8_encode(normal(rng) * 64.0f, quant::Fp8Format::E4M3) << 8));
  }
  return pairs;
}

void check_producers(int64_t rows) {
  const graph::OpRegistry registry = ops::make_model_registry();
  const graph::Graph unfused = producers(registry, rows);
  const graph::Graph fused = models::fuse_fp8_producers(unfused, registry);
  ASSERT_EQ(models::fp8_fused_producer_count(fused), 3);
  // The same outputs, in the same order, as tensor names (ids are kept by the pass).
  ASSERT_EQ(fused.outputs, unfused.outputs);
  const compiler::ExecutionPlan unfused_plan = compiler::compile_forward(unfused, registry);
  const compiler::ExecutionPlan fused_plan = compiler::compile_forward(fused, registry);

  std::mt19937 rng(29);
  std::uniform_real_distribution<float> exponent(-20.0f, 6.0f), sign(-1.0f, 1.0f), weight(0.5f, 1.5f);
  auto values = [&](size_t count, bool spread) {
    std::vector<uint16_t> bits(count);
    for (uint16_t& b : bits) {
      const float v = spread ? std::copysign(std::exp2(exponent(rng)), sign(rng)) : weight(rng);
      b = float_to_bf16(v);
    }
    return bits;
  };
  const Inputs inputs = {
      {"residual", values(rows * kChannels, true)}, {"x", values(rows * kChannels, true)},
      {"w", values(kChannels, false)},              {"gate", values(rows * kInter, true)},
      {"up", values(rows * kInter, true)}};
  for (const bool delayed : {false, true}) {
    std::vector<float> state(3 * (2 + kHistory), 0.0f);
    if (delayed) {
      state[0 * (2 + kHistory)] = 2.5f;
      state[1 * (2 + kHistory)] = 40.0f;
      state[2 * (2 + kHistory)] = 0.01f;  // far below the SwiGLU's amax: codes saturate
    }
    const auto expected = run(unfused_plan, registry, inputs, state);
    const auto actual = run(fused_plan, registry, inputs, state);
    std::vector<std::string> names;
    for (size_t i = 0; i + 1 < expected.size(); ++i) names.push_back(unfused.tensor(unfused.outputs[i]).name);
    names.push_back("the state");
    ASSERT_EQ(actual.size(), expected.size());
    expect_same_bytes(actual, expected, names, amax_case(delayed));
    if (delayed) {  // the sites flagged by the host: no pending pass, no amax zeroing
      expect_same_bytes(run(fused_plan, registry, inputs, state, {}, true), expected, names,
                        amax_case(delayed) + ", sites flagged delayed");
    }
    // Real values were compared: every site recorded a nonzero amax.
    std::vector<float> after(state.size());
    std::memcpy(after.data(), actual.back().data(), after.size() * sizeof(float));
    for (int site = 0; site < 3; ++site) EXPECT_GT(after[site * (2 + kHistory) + 1], 0.0f) << "site " << site;
  }
}

TEST(Fp8ProducersCuda, FusedEpilogueEqualsTheQuantizeNodesBitForBit) {
  SKIP_WITHOUT_GPU();
  check_producers(kRows);
}

// Enough rows that the SwiGLU's grid (one wave of blocks, fp8::epilogue_blocks) loops: 1,708
// blocks' worth of 8-value vectors.
TEST(Fp8ProducersCuda, FusedEpilogueLoopsOverMoreThanOneWave) {
  SKIP_WITHOUT_GPU();
  check_producers(2557);
}

// `trained`: the projections' weights train (full fine-tuning), so the products are
// linear_fp8_backward, whose weight gradient needs the rows in multiples of 16.
graph::Graph swiglu_gradients(const graph::OpRegistry& registry, int64_t rows, bool trained) {
  graph::GraphBuilder b(registry);
  const DType bf16 = DType::BF16;
  graph::TensorId d_out = b.parameter("d_out", bf16, {rows, kGradInter}, false);
  graph::TensorId gate = b.parameter("gate", bf16, {rows, kGradInter}, false);
  graph::TensorId up = b.parameter("up", bf16, {rows, kGradInter}, false);
  graph::TensorId gate_w_t = b.parameter("gate_w_t", DType::F8_E4M3, {kGradChannels, kGradInter}, false);
  graph::TensorId up_w_t = b.parameter("up_w_t", DType::F8_E4M3, {kGradChannels, kGradInter}, false);
  graph::TensorId gate_scale = b.parameter("gate_scale", DType::F32, {1}, false);
  graph::TensorId up_scale = b.parameter("up_scale", DType::F32, {1}, false);
  graph::TensorId xq = b.parameter("xq", DType::F8_E4M3, {rows, kGradChannels}, false);
  graph::TensorId x_scale = b.parameter("x_scale", DType::F32, {1}, false);
  graph::TensorId state = b.parameter("state", DType::F32, {3, 2 + kHistory}, false);
  auto grads = b.op("swiglu_backward", {d_out, gate, up}, nlohmann::json::object(), "act.grad");
  for (graph::TensorId id : {grads[0], grads[1]}) b.mark_output(id);
  if (trained) {
    auto gate_grads = b.op("linear_fp8_backward", {grads[0], xq, x_scale, gate_w_t, gate_scale, state},
                           {{"site", 0}, {"format", "e5m2"}}, "gate.backward");
    auto up_grads = b.op("linear_fp8_backward", {grads[1], xq, x_scale, up_w_t, up_scale, state, gate_grads[0]},
                         {{"site", 2}, {"format", "e5m2"}}, "up.backward");
    for (graph::TensorId id : {gate_grads[0], up_grads[0], gate_grads[1], up_grads[1]}) b.mark_output(id);
    return b.finish();
  }
  graph::TensorId d_x = b.op("linear_fp8_backward_input", {grads[0], gate_w_t, gate_scale, state},
                             {{"site", 0}, {"format", "e5m2"}}, "gate.d_x");
  graph::TensorId both = b.op("linear_fp8_backward_input", {grads[1], up_w_t, up_scale, state, d_x},
                              {{"site", 2}, {"format", "e5m2"}}, "both.d_x");
  for (graph::TensorId id : {d_x, both}) b.mark_output(id);
  return b.finish();
}

void check_swiglu_gradients(int64_t rows, bool trained) {
  const graph::OpRegistry registry = ops::make_model_registry();
  const graph::Graph unfused = swiglu_gradients(registry, rows, trained);
  const graph::Graph fused = models::fuse_fp8_gradients(unfused);
  ASSERT_EQ(models::fp8_fused_producer_count(fused), 1);
  const std::string product = trained ? "linear_fp8_backward_quantized" : "linear_fp8_backward_input_quantized";
  ASSERT_EQ(std::count_if(fused.nodes.begin(), fused.nodes.end(), [&](const graph::Node& node) { return node.op == product; }),
            2);
  const compiler::ExecutionPlan unfused_plan = compiler::compile_forward(unfused, registry);
  const compiler::ExecutionPlan fused_plan = compiler::compile_forward(fused, registry);

  std::mt19937 rng(31);
  std::uniform_real_distribution<float> exponent(-20.0f, 3.0f), sign(-1.0f, 1.0f);
  auto values = [&](size_t count) {
    std::vector<uint16_t> bits(count);
    for (uint16_t& b : bits) b = float_to_bf16(std::copysign(std::exp2(exponent(rng)), sign(rng)));
    return bits;
  };
  auto codes = [&](size_t count) { return random_e4m3(rng, count); };
  const FloatInputs scales = {{"gate_scale", {1.0f / 64.0f}}, {"up_scale", {1.0f / 128.0f}}, {"x_scale", {1.0f / 32.0f}}};
  const Inputs inputs = {
      {"d_out", values(rows * kGradInter)},         {"gate", values(rows * kGradInter)},
      {"up", values(rows * kGradInter)},            {"gate_w_t", codes(kGradChannels * kGradInter)},
      {"up_w_t", codes(kGradChannels * kGradInter)}, {"xq", codes(rows * kGradChannels)}};
  for (const bool delayed : {false, true}) {
    std::vector<float> state(3 * (2 + kHistory), 0.0f);
    if (delayed) {
      state[0] = 30.0f;
      state[2 * (2 + kHistory)] = 1e-3f;  // far below d_up's amax: E5M2 codes saturate
    }
    const auto expected = run(unfused_plan, registry, inputs, state, scales);
    const auto actual = run(fused_plan, registry, inputs, state, scales);
    ASSERT_EQ(actual.size(), expected.size());
    const std::vector<std::string> names =
        trained ? std::vector<std::string>{"d_gate", "d_up", "gate's d_x", "both d_x", "gate's d_weight", "up's d_weight",
                                           "the state"}
                : std::vector<std::string>{"d_gate", "d_up", "gate's d_x", "both d_x", "the state"};
    expect_same_bytes(actual, expected, names, (trained ? "trained, " : "frozen, ") + amax_case(delayed));
    if (delayed) {  // the sites flagged by the host: no pending pass, no amax zeroing
      expect_same_bytes(run(fused_plan, registry, inputs, state, scales, true), expected, names,
                        (trained ? "trained, " : "frozen, ") + amax_case(delayed) + ", sites flagged delayed");
    }
    std::vector<float> after(state.size());
    std::memcpy(after.data(), actual.back().data(), after.size() * sizeof(float));
    EXPECT_GT(after[1], 0.0f);
    EXPECT_GT(after[2 * (2 + kHistory) + 1], 0.0f);
  }
}

TEST(Fp8ProducersCuda, SwigluBackwardCodesEqualTheInputGradientsOwn) {
  SKIP_WITHOUT_GPU();
  check_swiglu_gradients(kRows, false);
}

// Full fine-tuning: the same codes also make the trained projections' weight gradients.
TEST(Fp8ProducersCuda, SwigluBackwardCodesMakeTheTrainedProjectionsGradients) {
  SKIP_WITHOUT_GPU();
  check_swiglu_gradients(272, true);
  check_swiglu_gradients(2576, true);  // 1,711 blocks' worth of vectors: the one-wave grid loops
}

// A norm's backward with the residual-stream gradient, read by the projection whose output joined
// the stream: linear_fp8_backward_input (frozen projection and norm weight), or linear_fp8_backward
// with the norm weight's gradient (full fine-tuning).
graph::Graph norm_gradient(const graph::OpRegistry& registry, int64_t rows, bool trained) {
  graph::GraphBuilder b(registry);
  const DType bf16 = DType::BF16;
  graph::TensorId d_out = b.parameter("d_out", bf16, {rows, kGradChannels}, false);
  graph::TensorId residual_out = b.parameter("residual_out", bf16, {rows, kGradChannels}, false);
  graph::TensorId weight = b.parameter("weight", bf16, {kGradChannels}, false);
  graph::TensorId rstd = b.parameter("rstd", DType::F32, {rows}, false);
  graph::TensorId d_residual = b.parameter("d_residual", bf16, {rows, kGradChannels}, false);
  graph::TensorId w_t = b.parameter("w_t", DType::F8_E4M3, {kGradInter, kGradChannels}, false);
  graph::TensorId w_scale = b.parameter("w_scale", DType::F32, {1}, false);
  graph::TensorId xq = b.parameter("xq", DType::F8_E4M3, {rows, kGradInter}, false);
  graph::TensorId x_scale = b.parameter("x_scale", DType::F32, {1}, false);
  graph::TensorId state = b.parameter("state", DType::F32, {3, 2 + kHistory}, false);
  auto grads = b.op("fused_residual_rmsnorm_backward", {d_out, residual_out, weight, rstd, d_residual},
                    {{"weight_grad", trained}}, "ln.grad");
  b.mark_output(grads[0]);
  if (trained) {
    b.mark_output(grads[1]);
    auto both = b.op("linear_fp8_backward", {grads[0], xq, x_scale, w_t, w_scale, state},
                     {{"site", 1}, {"format", "e5m2"}}, "proj.backward");
    b.mark_output(both[0]);
    b.mark_output(both[1]);
  } else {
    b.mark_output(b.op("linear_fp8_backward_input", {grads[0], w_t, w_scale, state}, {{"site", 1}, {"format", "e5m2"}},
                       "proj.d_x"));
  }
  return b.finish();
}

void check_norm_gradient(int64_t rows, bool trained) {
  const graph::OpRegistry registry = ops::make_model_registry();
  const graph::Graph unfused = norm_gradient(registry, rows, trained);
  const graph::Graph fused = models::fuse_fp8_gradients(unfused);
  ASSERT_EQ(models::fp8_fused_producer_count(fused), 1);
  const compiler::ExecutionPlan unfused_plan = compiler::compile_forward(unfused, registry);
  const compiler::ExecutionPlan fused_plan = compiler::compile_forward(fused, registry);
  std::mt19937 rng(37);
  std::uniform_real_distribution<float> positive(0.5f, 2.0f);
  auto values = [&](size_t count, bool spread) { return random_bf16(rng, count, spread); };
  std::vector<float> rstd(static_cast<size_t>(rows));
  for (float& value : rstd) value = positive(rng);
  const Inputs inputs = {{"d_out", values(rows * kGradChannels, true)},
                         {"residual_out", values(rows * kGradChannels, true)},
                         {"weight", values(kGradChannels, false)},
                         {"d_residual", values(rows * kGradChannels, true)},
                         {"w_t", random_e4m3(rng, kGradChannels * kGradInter)},
                         {"xq", random_e4m3(rng, rows * kGradInter)}};
  const FloatInputs floats = {{"rstd", rstd}, {"w_scale", {1.0f / 64.0f}}, {"x_scale", {1.0f / 32.0f}}};
  for (const bool delayed : {false, true}) {
    std::vector<float> state(3 * (2 + kHistory), 0.0f);
    if (delayed) state[1 * (2 + kHistory)] = 0.5f;
    const auto expected = run(unfused_plan, registry, inputs, state, floats);
    const auto actual = run(fused_plan, registry, inputs, state, floats);
    ASSERT_EQ(actual.size(), expected.size());
    const std::vector<std::string> names =
        trained ? std::vector<std::string>{"d_input", "the norm's d_weight", "d_x", "d_weight", "the state"}
                : std::vector<std::string>{"d_input", "d_x", "the state"};
    expect_same_bytes(actual, expected, names, (trained ? "trained, " : "frozen, ") + amax_case(delayed));
    if (delayed) {  // the sites flagged by the host: no pending pass, no amax zeroing
      expect_same_bytes(run(fused_plan, registry, inputs, state, floats, true), expected, names,
                        (trained ? "trained, " : "frozen, ") + amax_case(delayed) + ", sites flagged delayed");
    }
    std::vector<float> after(state.size());
    std::memcpy(after.data(), actual.back().data(), after.size() * sizeof(float));
    EXPECT_GT(after[1 * (2 + kHistory) + 1], 0.0f);
  }
}

TEST(Fp8ProducersCuda, NormBackwardCodesEqualTheInputGradientsOwn) {
  SKIP_WITHOUT_GPU();
  check_norm_gradient(kRows, false);
  check_norm_gradient(272, true);  // the weight gradient's FP8 product takes tokens in multiples of 16
}

// Qwen3's q / k norm + RoPE backward with the q projection's gradient codes: fused_rmsnorm_rope_backward
// then linear_fp8_backward_input (a frozen q_proj and norm weight), or linear_fp8_backward with the
// norm weight's gradient (full fine-tuning).
constexpr int64_t kHeads = 4, kHeadDim = 128;

graph::Graph qk_gradient(const graph::OpRegistry& registry, int64_t rows, bool trained) {
  graph::GraphBuilder b(registry);
  const DType bf16 = DType::BF16;
  const int64_t width = kHeads * kHeadDim;
  graph::TensorId d_out = b.parameter("d_out", bf16, {rows, width}, false);
  graph::TensorId x = b.parameter("x", bf16, {rows, width}, false);
  graph::TensorId weight = b.parameter("weight", bf16, {kHeadDim}, false);
  graph::TensorId rstd = b.parameter("rstd", DType::F32, {rows * kHeads}, false);
  graph::TensorId positions = b.parameter("positions", DType::I32, {rows}, false);
  graph::TensorId w_t = b.parameter("w_t", DType::F8_E4M3, {kGradChannels, width}, false);
  graph::TensorId w_scale = b.parameter("w_scale", DType::F32, {1}, false);
  graph::TensorId xq = b.parameter("xq", DType::F8_E4M3, {rows, kGradChannels}, false);
  graph::TensorId x_scale = b.parameter("x_scale", DType::F32, {1}, false);
  graph::TensorId state = b.parameter("state", DType::F32, {3, 2 + kHistory}, false);
  nlohmann::json frequencies = nlohmann::json::array();
  for (int64_t i = 0; i < kHeadDim / 2; ++i) frequencies.push_back(std::pow(1e6, -2.0 * static_cast<double>(i) / kHeadDim));
  const nlohmann::json attrs = {{"heads", kHeads}, {"head_dim", kHeadDim}, {"eps", 1e-6}, {"inv_freq", frequencies},
                                {"attention_scaling", 1.0}, {"weight_grad", trained}};
  auto grads = b.op("fused_rmsnorm_rope_backward", {d_out, x, weight, rstd, positions}, attrs, "q_norm_rope.grad");
  b.mark_output(grads[0]);
  if (trained) {
    b.mark_output(grads[1]);
    auto both = b.op("linear_fp8_backward", {grads[0], xq, x_scale, w_t, w_scale, state},
                     {{"site", 1}, {"format", "e5m2"}}, "q.backward");
    b.mark_output(both[0]);
    b.mark_output(both[1]);
  } else {
    b.mark_output(b.op("linear_fp8_backward_input", {grads[0], w_t, w_scale, state}, {{"site", 1}, {"format", "e5m2"}},
                       "q.d_x"));
  }
  return b.finish();
}

void check_qk_gradient(int64_t rows, bool trained) {
  const graph::OpRegistry registry = ops::make_model_registry();
  const graph::Graph unfused = qk_gradient(registry, rows, trained);
  const graph::Graph fused = models::fuse_fp8_gradients(unfused);
  ASSERT_EQ(models::fp8_fused_producer_count(fused), 1);
  const compiler::ExecutionPlan unfused_plan = compiler::compile_forward(unfused, registry);
  const compiler::ExecutionPlan fused_plan = compiler::compile_forward(fused, registry);
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> positive(0.5f, 2.0f);
  auto values = [&](size_t count, bool spread) { return random_bf16(rng, count, spread); };
  auto codes = [&](size_t count) { return random_e4m3(rng, count); };
  const int64_t width = kHeads * kHeadDim;
  std::vector<uint16_t> positions(static_cast<size_t>(2 * rows), 0);  // int32 words, low half first
  for (int64_t t = 0; t < rows; ++t) positions[static_cast<size_t>(2 * t)] = static_cast<uint16_t>(t % 97);
  std::vector<float> rstd(static_cast<size_t>(rows * kHeads));
  for (float& value : rstd) value = positive(rng);
  const Inputs inputs = {{"d_out", values(rows * width, true)}, {"x", values(rows * width, true)},
                         {"weight", values(kHeadDim, false)},   {"positions", positions},
                         {"w_t", codes(kGradChannels * width)}, {"xq", codes(rows * kGradChannels)}};
  const FloatInputs floats = {{"rstd", rstd}, {"w_scale", {1.0f / 64.0f}}, {"x_scale", {1.0f / 32.0f}}};
  for (const bool delayed : {false, true}) {
    std::vector<float> state(3 * (2 + kHistory), 0.0f);
    if (delayed) state[1 * (2 + kHistory)] = 0.5f;
    const auto expected = run(unfused_plan, registry, inputs, state, floats);
    const auto actual = run(fused_plan, registry, inputs, state, floats);
    ASSERT_EQ(actual.size(), expected.size());
    const std::vector<std::string> names =
        trained ? std::vector<std::string>{"d_x", "the norm's d_weight", "q's d_x", "q's d_weight", "the state"}
                : std::vector<std::string>{"d_x", "q's d_x", "the state"};
    expect_same_bytes(actual, expected, names, (trained ? "trained, " : "frozen, ") + amax_case(delayed));
    if (delayed) {  // the sites flagged by the host: no pending pass, no amax zeroing
      expect_same_bytes(run(fused_plan, registry, inputs, state, floats, true), expected, names,
                        (trained ? "trained, " : "frozen, ") + amax_case(delayed) + ", sites flagged delayed");
    }
    std::vector<float> after(state.size());
    std::memcpy(after.data(), actual.back().data(), after.size() * sizeof(float));
    EXPECT_GT(after[1 * (2 + kHistory) + 1], 0.0f);
  }
}

TEST(Fp8ProducersCuda, QkNormRopeBackwardCodesEqualTheInputGradientsOwn) {
  SKIP_WITHOUT_GPU();
  check_qk_gradient(kRows, false);
  check_qk_gradient(272, true);
}

// The attention's output quantized by the flash forward's epilogue (attention_fp8) against
// attention then quantize_fp8: out, logsumexp, the codes, scale_inv and the state bit for bit, with
// packed documents, GQA and a row count that is not a multiple of the 64-query blocks.
TEST(Fp8ProducersCuda, AttentionOutputCodesEqualTheQuantizeNodes) {
  SKIP_WITHOUT_GPU();
  constexpr int64_t kBatch = 2, kSequence = 203, kQHeads = 4, kKvHeads = 2, kDim = 128;
  const graph::OpRegistry registry = ops::make_model_registry();
  graph::GraphBuilder b(registry);
  const DType bf16 = DType::BF16;
  graph::TensorId q = b.parameter("q", bf16, {kBatch, kSequence, kQHeads * kDim}, false);
  graph::TensorId k = b.parameter("k", bf16, {kBatch, kSequence, kKvHeads * kDim}, false);
  graph::TensorId v = b.parameter("v", bf16, {kBatch, kSequence, kKvHeads * kDim}, false);
  graph::TensorId documents = b.parameter("documents", DType::I32, {kBatch, kSequence}, false);
  graph::TensorId state = b.parameter("state", DType::F32, {3, 2 + kHistory}, false);
  auto attention = b.op("attention", {q, k, v, documents},
                        {{"query_heads", kQHeads}, {"kv_heads", kKvHeads}, {"head_dim", kDim}, {"window", 0}}, "attention");
  auto codes = b.op("quantize_fp8", {attention[0], state}, {{"format", "e4m3"}, {"site", 2}}, "attention.fp8");
  for (graph::TensorId id : {attention[0], attention[1], codes[0], codes[1]}) b.mark_output(id);
  const graph::Graph unfused = b.finish();
  const graph::Graph fused = models::fuse_fp8_producers(unfused, registry);
  ASSERT_EQ(models::fp8_fused_producer_count(fused), 1);
  const compiler::ExecutionPlan unfused_plan = compiler::compile_forward(unfused, registry);
  const compiler::ExecutionPlan fused_plan = compiler::compile_forward(fused, registry);
  std::mt19937 rng(43);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto values = [&](size_t count) {
    std::vector<uint16_t> bits(count);
    for (uint16_t& bit : bits) bit = float_to_bf16(normal(rng));
    return bits;
  };
  std::vector<uint16_t> document_words(static_cast<size_t>(2 * kBatch * kSequence), 0);  // int32, low half first
  for (int64_t i = 0; i < kBatch * kSequence; ++i) document_words[static_cast<size_t>(2 * i)] = (i % kSequence) / 70;
  const Inputs inputs = {{"q", values(kBatch * kSequence * kQHeads * kDim)},
                         {"k", values(kBatch * kSequence * kKvHeads * kDim)},
                         {"v", values(kBatch * kSequence * kKvHeads * kDim)},
                         {"documents", document_words}};
  for (const bool delayed : {false, true}) {
    std::vector<float> state_values(3 * (2 + kHistory), 0.0f);
    if (delayed) state_values[2 * (2 + kHistory)] = 0.25f;  // below the output's amax: some codes saturate
    const auto expected = run(unfused_plan, registry, inputs, state_values);
    const auto actual = run(fused_plan, registry, inputs, state_values);
    ASSERT_EQ(actual.size(), expected.size());
    expect_same_bytes(actual, expected, {"out", "logsumexp", "the codes", "scale_inv", "the state"}, amax_case(delayed));
    if (delayed) {  // the sites flagged by the host: no pending pass, no amax zeroing
      expect_same_bytes(run(fused_plan, registry, inputs, state_values, {}, true), expected,
                        {"out", "logsumexp", "the codes", "scale_inv", "the state"},
                        amax_case(delayed) + ", sites flagged delayed");
    }
  }
}

}  // namespace
}  // namespace surogate
