// The mixture-of-experts ops on the CUDA backend (runtime/cuda_moe_ops.cpp: cuda/kernels/
// moe_routing.cu and the CUTLASS grouped GEMMs of cuda/kernels/grouped_gemm.cu) against the CPU ops, one
// node at a time: the same node in a BF16 plan on the GPU and an F32 plan on the CPU backend, fed
// the same values (bf16-exact floats, int32 indices / offsets as inputs).
// Tolerances (max |gpu − cpu| / max |cpu| per output):
//   router probabilities and weights   1e-5  (fp32 softmax of the same bf16 logits; expf vs exp)
//   indices, order, position, offsets  exact (ties go to the lower expert on both)
//   bf16 outputs                       1e-2  (fp32 math, one or two bf16 roundings of the result)
//   router statistics, aux loss        1e-5  (fp32 sums of the same values, other orders)
//   grouped GEMMs                      1e-2  (bf16 operands, fp32 accumulation, bf16 output; as
//                                             tests/cuda's cuBLASLt matmuls), experts without rows
//                                             included; the accumulating weight gradient adds into
//                                             a non-zero gradient.
// Plus a whole MoE decoder (the three HF fixtures) in bf16 against the CPU: the loss within 2e-2
// (bf16 router logits may move a near-tied token to another expert, which shifts the loss by
// about 1/tokens of one token's loss) and a second step bit-identical (deterministic kernels).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "cuda/kernels/grouped_gemm.h"
#include "cuda/test_helpers.h"
#include "graph/builder.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "models/decoder_graph.h"
#include "models/model_spec.h"
#include "models/weight_io.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "runtime/cuda_backend.h"

namespace surogate::runtime {
namespace {

using namespace cuda::testing;

// One operand of a node under test: floating (values, BF16 or F32 on the GPU, F32 on the CPU)
// or I32 (ints), always a graph input.
struct Operand {
  std::string name;
  DType gpu_dtype;
  graph::Shape shape;
  std::vector<float> values;
  std::vector<int32_t> ints;
};

// Adds the node(s) under test; `gpu` says which plan (the GPU one is BF16 where the CPU's is F32).
using NodeBuilder =
    std::function<std::vector<graph::TensorId>(graph::GraphBuilder&, const std::vector<graph::TensorId>&, bool gpu)>;

struct Outputs {
  std::vector<std::vector<float>> floats;  // every output as floats (I32 outputs converted)
};

// Runs the node(s) `build` adds on the operands, on the CPU (F32) or the GPU (operands' dtypes).
Outputs run_node(bool gpu, const std::vector<Operand>& operands, const NodeBuilder& build) {
  const graph::OpRegistry registry = ops::make_model_registry();
  graph::GraphBuilder builder(registry);
  std::vector<graph::TensorId> ids;
  for (const Operand& operand : operands) {
    const DType dtype = operand.gpu_dtype == DType::I32 ? DType::I32 : (gpu ? operand.gpu_dtype : DType::F32);
    ids.push_back(builder.input(operand.name, dtype, operand.shape));
  }
  const std::vector<graph::TensorId> outputs = build(builder, ids, gpu);
  for (graph::TensorId id : outputs) builder.mark_output(id);
  compiler::ExecutionPlan plan = compiler::compile_forward(builder.finish(), registry);
  std::unique_ptr<Backend> backend;
  if (gpu) backend = std::make_unique<CudaBackend>();
  else backend = std::make_unique<CpuBackend>();
  backend->load(plan, registry);
  std::vector<std::vector<std::byte>> storage;
  std::vector<InputBinding> inputs;
  for (size_t i = 0; i < operands.size(); ++i) {
    const Operand& operand = operands[i];
    const DType dtype = plan.graph.tensor(plan.tensor(operand.name)).type.dtype;
    std::vector<std::byte> bytes;
    if (dtype == DType::I32) {
      bytes.resize(operand.ints.size() * 4);
      std::memcpy(bytes.data(), operand.ints.data(), bytes.size());
    } else if (dtype == DType::BF16) {
      const std::vector<Bf16> bits = to_bf16(operand.values);
      bytes.resize(bits.size() * 2);
      std::memcpy(bytes.data(), bits.data(), bytes.size());
    } else {
      bytes.resize(operand.values.size() * 4);
      std::memcpy(bytes.data(), operand.values.data(), bytes.size());
    }
    storage.push_back(std::move(bytes));
    inputs.push_back({plan.tensor(operand.name), storage.back()});
  }
  backend->execute(inputs);
  Outputs result;
  for (graph::TensorId id : outputs) {
    const graph::TensorType& type = plan.graph.tensor(id).type;
    const size_t count = static_cast<size_t>(type.numel());
    std::vector<float> values(count);
    if (type.dtype == DType::BF16) {
      std::vector<Bf16> bits(count);
      backend->read(id, std::as_writable_bytes(std::span<Bf16>(bits)));
      values = from_bf16(bits);
    } else if (type.dtype == DType::I32) {
      std::vector<int32_t> ints(count);
      backend->read(id, std::as_writable_bytes(std::span<int32_t>(ints)));
      std::transform(ints.begin(), ints.end(), values.begin(), [](int32_t v) { return static_cast<float>(v); });
    } else {
      backend->read(id, std::as_writable_bytes(std::span<float>(values)));
    }
    result.floats.push_back(std::move(values));
  }
  return result;
}

// The node on both backends; output i compared with tolerance[i] (0: exact).
void expect_match(const std::vector<Operand>& operands, const NodeBuilder& build, const std::vector<double>& tolerance) {
  const Outputs cpu = run_node(false, operands, build), gpu = run_node(true, operands, build);
  ASSERT_EQ(cpu.floats.size(), tolerance.size());
  for (size_t i = 0; i < tolerance.size(); ++i) {
    if (tolerance[i] == 0.0) {
      EXPECT_EQ(gpu.floats[i], cpu.floats[i]) << "output " << i;
    } else {
      EXPECT_LT(relative_error(gpu.floats[i], cpu.floats[i]), tolerance[i]) << "output " << i;
    }
  }
}

// Top-k expert choices per token (distinct experts, a skewed distribution so some experts get
// no token at all when `skew`).
std::vector<int32_t> random_choices(int64_t tokens, int experts, int top_k, bool skew) {
  std::vector<int32_t> choices;
  std::vector<int32_t> all(static_cast<size_t>(experts));
  std::iota(all.begin(), all.end(), 0);
  const int pool = skew ? std::max(top_k, experts / 2) : experts;
  for (int64_t t = 0; t < tokens; ++t) {
    std::shuffle(all.begin(), all.begin() + pool, generator());
    choices.insert(choices.end(), all.begin(), all.begin() + top_k);
  }
  return choices;
}

// The CPU dispatch of `choices`: offsets, order and position as the graph would compute them.
struct Dispatch {
  std::vector<int32_t> order, position, offsets;
};
Dispatch dispatch_of(const std::vector<int32_t>& choices, int experts) {
  const Outputs cpu = run_node(false, {{"indices", DType::I32, {static_cast<int64_t>(choices.size()), 1}, {}, choices}},
                               [&](graph::GraphBuilder& b, const std::vector<graph::TensorId>& in, bool) {
                                 graph::OpOutputs out = b.op("moe_dispatch", {in[0]}, {{"experts", experts}});
                                 return std::vector<graph::TensorId>{out[0], out[1], out[2]};
                               });
  auto ints = [](const std::vector<float>& values) { return std::vector<int32_t>(values.begin(), values.end()); };
  return {ints(cpu.floats[0]), ints(cpu.floats[1]), ints(cpu.floats[2])};
}

std::vector<int32_t> as_ints(const std::vector<float>& values) { return {values.begin(), values.end()}; }

TEST(MoeCuda, RouterTopkAndBackwardMatchCpu) {
  SKIP_WITHOUT_GPU();
  struct Case { int64_t tokens; int experts, top_k; bool normalize; };
  for (Case c : {Case{74, 8, 2, true}, Case{33, 60, 4, false}, Case{129, 128, 8, true}, Case{17, 256, 8, false}}) {
    SCOPED_TRACE(::testing::Message() << c.tokens << " tokens, " << c.experts << " experts, top " << c.top_k);
    const int64_t e = c.experts, k = c.top_k;
    const std::vector<Operand> operands{{"logits", DType::BF16, {c.tokens, e}, random_floats(c.tokens * e, 3.0f), {}}};
    const nlohmann::json attrs{{"top_k", k}, {"normalize", c.normalize}};
    const NodeBuilder forward = [&](graph::GraphBuilder& b, const std::vector<graph::TensorId>& in, bool) {
      graph::OpOutputs out = b.op("router_topk", {in[0]}, attrs);
      return std::vector<graph::TensorId>{out[0], out[1], out[2]};
    };
    expect_match(operands, forward, {1e-5, 0.0, 1e-5});
    // The backward at the CPU's forward point.
    const Outputs point = run_node(false, operands, forward);
    const std::vector<Operand> backward{
        {"d_weights", DType::F32, {c.tokens, k}, random_fp32(c.tokens * k, -1.0f, 1.0f), {}},
        {"probs", DType::F32, {c.tokens, e}, point.floats[2], {}},
        {"indices", DType::I32, {c.tokens, k}, {}, as_ints(point.floats[1])},
        {"weights", DType::F32, {c.tokens, k}, point.floats[0], {}},
        {"d_probs", DType::F32, {c.tokens, e}, random_fp32(c.tokens * e, -0.1f, 0.1f), {}}};
    for (bool with_probs : {false, true}) {
      SCOPED_TRACE(with_probs ? "with d_probs" : "without d_probs");
      expect_match(backward, [&](graph::GraphBuilder& b, const std::vector<graph::TensorId>& in, bool gpu) {
        std::vector<graph::TensorId> inputs{in[0], in[1], in[2], in[3]};
        if (with_probs) inputs.push_back(in[4]);
        nlohmann::json backward_attrs{{"normalize", c.normalize}};
        if (gpu) backward_attrs["logits_dtype"] = "BF16";  // the GPU graph's logits are bf16
        return std::vector<graph::TensorId>{b.op("router_topk_backward", inputs, backward_attrs)};
      }, {1e-2});
    }
  }
}

TEST(MoeCuda, DispatchIsTheCpuStableSort) {
  SKIP_WITHOUT_GPU();
  struct Case { int64_t tokens; int experts, top_k; bool skew; };
  for (Case c : {Case{3, 4, 2, false}, Case{1000, 128, 8, true}, Case{4099, 60, 4, false}, Case{257, 512, 16, true}}) {
    SCOPED_TRACE(::testing::Message() << c.tokens << " tokens, " << c.experts << " experts, top " << c.top_k);
    const std::vector<int32_t> choices = random_choices(c.tokens, c.experts, c.top_k, c.skew);
    expect_match({{"indices", DType::I32, {c.tokens, c.top_k}, {}, choices}},
                 [&](graph::GraphBuilder& b, const std::vector<graph::TensorId>& in, bool) {
                   graph::OpOutputs out = b.op("moe_dispatch", {in[0]}, {{"experts", c.experts}});
                   return std::vector<graph::TensorId>{out[0], out[1], out[2]};
                 }, {0.0, 0.0, 0.0});
  }
}

TEST(MoeCuda, PermuteUnpermuteAndBackwardMatchCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t tokens = 301, width = 96;
  const int experts = 16, top_k = 4;
  const std::vector<int32_t> choices = random_choices(tokens, experts, top_k, true);
  const Dispatch d = dispatch_of(choices, experts);
  const int64_t rows = tokens * top_k;
  const std::vector<Operand> operands{
      {"x", DType::BF16, {tokens, width}, random_floats(tokens * width), {}},
      {"order", DType::I32, {rows}, {}, d.order},
      {"position", DType::I32, {tokens, top_k}, {}, d.position},
      {"y", DType::BF16, {rows, width}, random_floats(rows * width), {}},
      {"weights", DType::F32, {tokens, top_k}, random_fp32(tokens * top_k, 0.0f, 1.0f), {}},
      {"d_out", DType::BF16, {tokens, width}, random_floats(tokens * width), {}},
      {"d_sorted", DType::BF16, {rows, width}, random_floats(rows * width), {}}};
  expect_match(operands, [](graph::GraphBuilder& b, const std::vector<graph::TensorId>& in, bool) {
    const graph::TensorId permuted = b.op("moe_permute", {in[0], in[1], in[2]});
    const graph::TensorId d_x = b.op("moe_permute_backward", {in[6], in[2]});
    const graph::TensorId combined = b.op("moe_unpermute", {in[3], in[4], in[2]});
    graph::OpOutputs grads = b.op("moe_unpermute_backward", {in[5], in[3], in[4], in[2]});
    return std::vector<graph::TensorId>{permuted, d_x, combined, grads[0], grads[1]};
  }, {0.0, 1e-2, 1e-2, 1e-2, 1e-2});
}

TEST(MoeCuda, GroupedExpertGemmsMatchCpu) {
  SKIP_WITHOUT_GPU();
  struct Case { int64_t tokens; int experts, top_k; int64_t out, in; bool skew; };
  for (Case c : {Case{64, 8, 2, 64, 128, true}, Case{300, 4, 2, 16, 32, false}, Case{517, 32, 4, 384, 256, true},
                 Case{5, 16, 2, 16, 48, false}}) {
    SCOPED_TRACE(::testing::Message() << c.tokens << " tokens, " << c.experts << " experts, " << c.out << " x " << c.in);
    const std::vector<int32_t> choices = random_choices(c.tokens, c.experts, c.top_k, c.skew);
    const Dispatch d = dispatch_of(choices, c.experts);
    const int64_t rows = c.tokens * c.top_k, e = c.experts;
    const std::vector<Operand> operands{
        {"x", DType::BF16, {rows, c.in}, random_floats(rows * c.in), {}},
        {"weight", DType::BF16, {e, c.out, c.in}, random_floats(e * c.out * c.in, 0.2f), {}},
        {"offsets", DType::I32, {e + 1}, {}, d.offsets},
        {"d_out", DType::BF16, {rows, c.out}, random_floats(rows * c.out), {}}};
    expect_match(operands, [](graph::GraphBuilder& b, const std::vector<graph::TensorId>& in, bool) {
      const graph::TensorId y = b.op("expert_linear", {in[0], in[1], in[2]});
      const graph::TensorId d_x = b.op("expert_linear_backward_input", {in[3], in[1], in[2]});
      const graph::TensorId d_w = b.op("expert_linear_backward_weight", {in[3], in[0], in[2]});
      return std::vector<graph::TensorId>{y, d_x, d_w};
    }, {1e-2, 1e-2, 1e-2});
  }
}

TEST(MoeCuda, AccumulatingExpertWeightGradientAddsIn) {
  SKIP_WITHOUT_GPU();
  // expert_linear_backward_weight_accumulate's GEMM (beta 1): two runs into a gradient give twice
  // the overwriting GEMM's result; experts without rows stay exactly zero in the overwriting one.
  const int64_t tokens = 40, out = 32, in = 64;
  const int experts = 8, top_k = 2;
  const Dispatch d = dispatch_of(random_choices(tokens, experts, top_k, true), experts);
  const int64_t rows = tokens * top_k;
  auto offsets = cuda::to_device(d.offsets);
  auto d_out = device_bf16(random_floats(rows * out)), x = device_bf16(random_floats(rows * in));
  cuda::DeviceBuffer<Bf16> written(static_cast<size_t>(experts * out * in)), summed(static_cast<size_t>(experts * out * in));
  summed.zero(nullptr);
  written.poison(nullptr);
  cuda::GroupedGemm overwrite(cuda::GroupedGemmKind::BackwardWeight, experts, out, in, false);
  cuda::GroupedGemm accumulate(cuda::GroupedGemmKind::BackwardWeight, experts, out, in, true);
  overwrite.run(offsets.data(), bf16_ptr(d_out), bf16_ptr(x), bf16_ptr(written), nullptr);
  accumulate.run(offsets.data(), bf16_ptr(d_out), bf16_ptr(x), bf16_ptr(summed), nullptr);
  accumulate.run(offsets.data(), bf16_ptr(d_out), bf16_ptr(x), bf16_ptr(summed), nullptr);
  synchronize();
  const std::vector<float> once = download_bf16(written);
  std::vector<float> twice = once;
  for (float& value : twice) value *= 2.0f;
  EXPECT_LT(relative_error(download_bf16(summed), twice), 1e-2);
  for (int e = 0; e < experts; ++e) {
    if (d.offsets[e] != d.offsets[e + 1]) continue;
    for (int64_t i = 0; i < out * in; ++i) ASSERT_EQ(once[e * out * in + i], 0.0f) << "expert " << e << " has no rows";
  }
}

TEST(MoeCuda, RouterLossAndSharedExpertGateMatchCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t tokens = 203, width = 64;
  const int experts = 60, top_k = 4;
  std::vector<float> probs = random_fp32(tokens * experts, 0.0f, 1.0f);
  const std::vector<Operand> operands{
      {"probs", DType::F32, {tokens, experts}, probs, {}},
      {"indices", DType::I32, {tokens, top_k}, {}, random_choices(tokens, experts, top_k, true)},
      {"d_sum", DType::F32, {experts}, random_fp32(experts, -1.0f, 1.0f), {}},
      {"d_loss", DType::F32, {}, {0.75f}, {}},
      {"base", DType::BF16, {tokens, width}, random_floats(tokens * width), {}},
      {"shared", DType::BF16, {tokens, width}, random_floats(tokens * width), {}},
      {"gate", DType::BF16, {tokens, 1}, random_floats(tokens, 2.0f), {}},
      {"d_out", DType::BF16, {tokens, width}, random_floats(tokens * width), {}}};
  expect_match(operands, [](graph::GraphBuilder& b, const std::vector<graph::TensorId>& in, bool) {
    graph::OpOutputs statistics = b.op("router_statistics", {in[0], in[1]});
    const graph::TensorId d_probs = b.op("router_statistics_backward", {in[2], in[0]});
    const graph::TensorId aux = b.op("router_aux_loss", {statistics[0], statistics[1]}, {{"scale", 0.37}});
    const graph::TensorId d_sum = b.op("router_aux_loss_backward", {in[3], statistics[1]}, {{"scale", 0.37}});
    const graph::TensorId gated = b.op("sigmoid_gated_add", {in[4], in[5], in[6]});
    graph::OpOutputs gate_grads = b.op("sigmoid_gated_add_backward", {in[7], in[5], in[6]});
    return std::vector<graph::TensorId>{statistics[0], statistics[1], d_probs, aux, d_sum, gated, gate_grads[0],
                                        gate_grads[1]};
  }, {1e-5, 0.0, 0.0, 1e-5, 1e-5, 1e-2, 1e-2, 1e-2});
}

// ---- whole MoE decoders ----

std::filesystem::path fixture_dir(const std::string& name) {
  const char* override_dir = std::getenv("SUROGATE_FIXTURES_DIR");
  return std::filesystem::path(override_dir && *override_dir ? override_dir : SUROGATE_FIXTURES_DIR) / name;
}

std::vector<int32_t> read_ints(const io::SafetensorsFile& file, const std::string& name) {
  const io::SafetensorsTensor& tensor = file.tensor(name);
  std::vector<int32_t> out(static_cast<size_t>(tensor.element_count()));
  std::memcpy(out.data(), tensor.bytes.data(), tensor.bytes.size());
  return out;
}

class MoeDecoderOnCuda : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeDecoderOnCuda, LossMatchesCpuAndStepsRepeat) {
  SKIP_WITHOUT_GPU();
  const std::string name = GetParam();
  const io::ModelConfig config = io::load_model_config(fixture_dir(name));
  const io::SafetensorsFile expected = io::SafetensorsFile::open(fixture_dir(name) / "expected.safetensors");
  const std::vector<int32_t> ids = read_ints(expected, "input_ids"), positions = read_ints(expected, "position_ids"),
                             documents = read_ints(expected, "document_ids"), targets = read_ints(expected, "targets");
  const int64_t batch = expected.tensor("input_ids").shape[0], sequence = expected.tensor("input_ids").shape[1];
  const float loss_scale =
      1.0f / static_cast<float>(std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t != -100; }));
  const graph::OpRegistry registry = ops::make_model_registry();
  const std::vector<models::ParameterSpec> specs = models::parameter_specs(config);
  std::vector<std::vector<Bf16>> bf16_weights(specs.size());
  std::vector<std::vector<float>> f32_weights(specs.size());
  models::load_hf_weights(fixture_dir(name), specs, [&](const models::ParameterSpec& spec, const io::SafetensorsTensor& tensor) {
    const size_t index = static_cast<size_t>(&spec - specs.data());
    bf16_weights[index] = to_bf16(io::read_tensor_as_float32(tensor));
    f32_weights[index] = from_bf16(bf16_weights[index]);
  });
  float losses[2] = {};
  for (int device = 0; device < 2; ++device) {
    models::DecoderGraphOptions options{.batch = batch, .sequence = sequence, .lmhead_chunks = 2};
    options.router_aux_loss_micro_batches = 1;
    if (device == 1) options.dtype = DType::BF16;
    models::DecoderGraph graph = models::build_decoder_graph(config, registry, options);
    compiler::ExecutionPlan plan = compiler::compile_training(std::move(graph.graph), graph.loss, registry);
    std::unique_ptr<Backend> backend;
    if (device == 0) backend = std::make_unique<CpuBackend>();
    else backend = std::make_unique<CudaBackend>();
    backend->load(plan, registry);
    for (size_t i = 0; i < specs.size(); ++i) {
      if (device == 0) backend->write(plan.tensor(specs[i].name), std::as_bytes(std::span<const float>(f32_weights[i])));
      else backend->write(plan.tensor(specs[i].name), std::as_bytes(std::span<const Bf16>(bf16_weights[i])));
    }
    backend->write(plan.tensor("loss_scale"), std::as_bytes(std::span<const float>(&loss_scale, 1)));
    const std::vector<InputBinding> inputs{{plan.tensor("input_ids"), std::as_bytes(std::span<const int32_t>(ids))},
                                           {plan.tensor("position_ids"), std::as_bytes(std::span<const int32_t>(positions))},
                                           {plan.tensor("document_ids"), std::as_bytes(std::span<const int32_t>(documents))},
                                           {plan.tensor("targets"), std::as_bytes(std::span<const int32_t>(targets))}};
    backend->zero_gradients();
    backend->execute(inputs);
    backend->read(plan.loss, std::as_writable_bytes(std::span<float>(&losses[device], 1)));
    if (device == 1) {
      backend->zero_gradients();
      backend->execute(inputs);
      float again = 0.0f;
      backend->read(plan.loss, std::as_writable_bytes(std::span<float>(&again, 1)));
      EXPECT_EQ(again, losses[1]) << name << ": a second step must repeat the first bit for bit";
    }
  }
  std::printf("[ measured ] %s: loss cuda %.6f cpu %.6f\n", name.c_str(), losses[1], losses[0]);
  EXPECT_LT(std::abs(losses[1] - losses[0]) / std::abs(losses[0]), 2e-2) << name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MoeDecoderOnCuda, ::testing::Values("qwen3_moe_topk", "qwen2_moe_shared", "mixtral_topk"));

}  // namespace
}  // namespace surogate::runtime
