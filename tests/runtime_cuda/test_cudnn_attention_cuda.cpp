// The CUDA backend's attention and attention_backward on cuDNN's fused SDPA (runtime/
// cuda_attention_path.h) against the CPU op in double (ops/attention.h, the oracle): packed
// documents with padding tokens (each sees only itself), GQA, sliding windows, head dims 64 / 128 /
// 256, bf16 and fp16; the deterministic backward; and the fallback to our kernels where cuDNN is
// not taken; bidirectional attention (causal: false, the vision towers': windows, whole frames,
// random documents, head dims 64 / 80 / 128 and the padded and plain fallbacks) on every path.
// The CUDA attention is 16-bit only (bf16, fp16; no fp32 kernels). Tolerances are the flash kernels' (tests/cuda/test_attention.cpp): out 1e-2 relative,
// logsumexp 1e-4 relative, dq / dk / dv 2e-2 relative (relative_error: the largest deviation over
// the reference's largest magnitude; a NaN poison left unwritten makes it infinite). fp16 inputs
// are rounded to fp16 before the reference sees them. Every case prints the path that ran and its
// errors ("[cudnn attention] ...").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <span>

#include <nlohmann/json.hpp>

#include "compiler/execution_plan.h"
#include "core/bfloat16.h"
#include "cuda/test_helpers.h"
#include "graph/builder.h"
#include "ops/attention.h"
#include "ops/defs/register_ops.h"
#include "runtime/cuda_attention_path.h"
#include "runtime/cuda_backend.h"

namespace surogate::runtime {
namespace {

using cuda::testing::relative_error;

struct Case {
  int64_t rows, sequence;
  int q_heads, kv_heads, head_dim, window;
  bool documents, padding, half;
  bool causal = true;  // false: bidirectional within each document (a vision tower's attention)
  int segment = 0;     // > 0: documents of this many tokens (a row's last one shorter), as vision windows
};

std::string describe(const Case& c) {
  return fmt::format("{}x{} Hq {} Hkv {} d {} window {}{}{}{}{} {}", c.rows, c.sequence, c.q_heads, c.kv_heads,
                     c.head_dim, c.window, c.documents ? " documents" : "",
                     c.segment > 0 ? fmt::format(" of {}", c.segment) : "", c.padding ? "+padding" : "",
                     c.causal ? "" : " bidirectional", c.half ? "fp16" : "bf16");
}

// Documents of random lengths (1 .. sequence / 2) per row, or of c.segment tokens; with padding,
// runs of id −1 at the end of odd rows and the start of every fourth row (each padding token its
// own document).
std::vector<int32_t> make_documents(const Case& c, std::mt19937& rng) {
  std::vector<int32_t> documents;
  std::uniform_int_distribution<int64_t> length(1, std::max<int64_t>(1, c.sequence / 2));
  for (int64_t row = 0; row < c.rows; ++row) {
    int32_t id = 0;
    for (int64_t t = 0; t < c.sequence;) {
      const int64_t end = std::min(c.sequence, t + (c.segment > 0 ? c.segment : length(rng)));
      for (; t < end; ++t) documents.push_back(id);
      ++id;
    }
    if (!c.padding) continue;
    int32_t* row_ids = documents.data() + row * c.sequence;
    if (row % 2 == 1) std::fill(row_ids + c.sequence - c.sequence / 3, row_ids + c.sequence, -1);
    if (row % 4 == 2) std::fill(row_ids, row_ids + c.sequence / 4, -1);
  }
  return documents;
}

// Random values rounded to the case's 16-bit type: the floats the reference sees and the bits.
struct Operand {
  std::vector<float> values;
  std::vector<uint16_t> bits;
};
Operand random_operand(size_t count, bool half, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Operand operand{std::vector<float>(count), std::vector<uint16_t>(count)};
  for (size_t i = 0; i < count; ++i) {
    const float value = uniform(rng);
    operand.bits[i] = half ? float_to_f16(value) : float_to_bf16(value);
    operand.values[i] = half ? f16_to_float(operand.bits[i]) : bf16_to_float(operand.bits[i]);
  }
  return operand;
}

std::vector<double> as_double(const std::vector<float>& values) { return {values.begin(), values.end()}; }

struct GpuResult {
  AttentionPath path;
  bool ragged = false;  // cuDNN's packed-documents layout (false: one sequence per row)
  std::vector<float> out, logsumexp, dq, dk, dv;
};

// attention then attention_backward (reading the forward's out and logsumexp) in one plan.
GpuResult run_on_gpu(const Case& c, const std::vector<int32_t>& documents, const Operand& q, const Operand& k,
                     const Operand& v, const Operand& dout) {
  GpuResult result;
  cuda::CudnnAttentionShape shape{.batch = c.rows,
                                  .sequence = c.sequence,
                                  .q_heads = c.q_heads,
                                  .kv_heads = c.kv_heads,
                                  .head_dim = c.head_dim,
                                  .window = c.window,
                                  .scale = static_cast<float>(1.0 / std::sqrt(double(c.head_dim))),
                                  .documents = c.documents,
                                  .half = c.half,
                                  .causal = c.causal};
  result.path = attention_path(shape);
  result.ragged = shape.documents;
  const graph::OpRegistry registry = ops::make_model_registry();
  graph::GraphBuilder b(registry);
  const DType dtype = c.half ? DType::F16 : DType::BF16;
  const int64_t q_width = c.q_heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  std::vector<graph::TensorId> inputs = {b.parameter("q", dtype, {c.rows, c.sequence, q_width}, false),
                                         b.parameter("k", dtype, {c.rows, c.sequence, kv_width}, false),
                                         b.parameter("v", dtype, {c.rows, c.sequence, kv_width}, false)};
  if (c.documents) inputs.push_back(b.parameter("documents", DType::I32, {c.rows, c.sequence}, false));
  const graph::TensorId d_out = b.parameter("d_out", dtype, {c.rows, c.sequence, q_width}, false);
  const nlohmann::json attrs{{"query_heads", c.q_heads}, {"kv_heads", c.kv_heads}, {"head_dim", c.head_dim},
                           {"window", c.window}, {"causal", c.causal}};
  auto forward = b.op("attention", inputs, attrs, "attention");
  std::vector<graph::TensorId> backward_inputs = inputs;
  for (graph::TensorId id : {forward[0], forward[1], d_out}) backward_inputs.push_back(id);
  auto backward = b.op("attention_backward", backward_inputs, attrs, "attention_backward");
  const std::vector<graph::TensorId> outputs = {forward[0], forward[1], backward[0], backward[1], backward[2]};
  for (graph::TensorId id : outputs) b.mark_output(id);
  const compiler::ExecutionPlan plan = compiler::compile_forward(b.finish(), registry);
  CudaBackend backend;
  backend.load(plan, registry);
  auto write_bits = [&](const char* name, const std::vector<uint16_t>& bits) {
    backend.write(plan.tensor(name), std::as_bytes(std::span<const uint16_t>(bits)));
  };
  write_bits("q", q.bits);
  write_bits("k", k.bits);
  write_bits("v", v.bits);
  write_bits("d_out", dout.bits);
  if (c.documents) backend.write(plan.tensor("documents"), std::as_bytes(std::span<const int32_t>(documents)));
  backend.execute({});
  auto read = [&](graph::TensorId id) {
    const graph::TensorType& type = plan.graph.tensor(id).type;
    std::vector<float> values(static_cast<size_t>(type.numel()));
    if (type.dtype == DType::F32) {
      backend.read(id, std::as_writable_bytes(std::span<float>(values)));
      return values;
    }
    std::vector<uint16_t> bits(values.size());
    backend.read(id, std::as_writable_bytes(std::span<uint16_t>(bits)));
    for (size_t i = 0; i < bits.size(); ++i) values[i] = c.half ? f16_to_float(bits[i]) : bf16_to_float(bits[i]);
    return values;
  };
  result.out = read(outputs[0]);
  result.logsumexp = read(outputs[1]);
  result.dq = read(outputs[2]);
  result.dk = read(outputs[3]);
  result.dv = read(outputs[4]);
  return result;
}

// The CPU logsumexp [B, Hq, T] in the layout the path wrote: cuDNN's [B, Hq, T] or, in its
// packed-documents layout, [B·T, Hq]; our kernels' [Hq, B·T].
std::vector<double> in_path_layout(const std::vector<double>& lse, const Case& c, const GpuResult& gpu) {
  std::vector<double> laid(lse.size());
  const int64_t tokens = c.rows * c.sequence;
  for (int64_t b = 0; b < c.rows; ++b)
    for (int64_t h = 0; h < c.q_heads; ++h)
      for (int64_t t = 0; t < c.sequence; ++t) {
        const double value = lse[static_cast<size_t>((b * c.q_heads + h) * c.sequence + t)];
        const int64_t token = b * c.sequence + t;
        const int64_t at = !gpu.path.cudnn ? h * tokens + token
                           : gpu.ragged    ? token * c.q_heads + h
                                           : (b * c.q_heads + h) * c.sequence + t;
        laid[static_cast<size_t>(at)] = value;
      }
  return laid;
}

struct Errors {
  double out = 0, logsumexp = 0, dq = 0, dk = 0, dv = 0;
};

// Segments (documents and padding runs) of the busiest row, as data::most_segments_per_row counts them.
int64_t most_segments(const Case& c, const std::vector<int32_t>& documents) {
  int64_t most = 0;
  for (int64_t row = 0; row < c.rows; ++row) {
    int64_t count = 0;
    for (int64_t t = 0; t < c.sequence; ++t) {
      const size_t at = static_cast<size_t>(row * c.sequence + t);
      count += t == 0 || documents[at] != documents[at - 1] ? 1 : 0;
    }
    most = std::max(most, count);
  }
  return most;
}

// How the run bounds cuDNN's document slots: by its data's busiest row (what a training run
// sets), one short of it (a batch with more segments than the bound), or not at all (a slot per token).
enum class SlotBound { BusiestRow, OneShort, PerToken };

// Runs the case on the GPU and the CPU op; checks the tolerances (skipped for OneShort, which must
// give NaN); returns the GPU result.
GpuResult check_case(const Case& c, std::mt19937& rng, SlotBound bound = SlotBound::BusiestRow) {
  const int64_t tokens = c.rows * c.sequence;
  const size_t q_count = static_cast<size_t>(tokens * c.q_heads * c.head_dim);
  const size_t kv_count = static_cast<size_t>(tokens * c.kv_heads * c.head_dim);
  const std::vector<int32_t> documents = c.documents ? make_documents(c, rng) : std::vector<int32_t>{};
  const Operand q = random_operand(q_count, c.half, rng), k = random_operand(kv_count, c.half, rng),
                v = random_operand(kv_count, c.half, rng), dout = random_operand(q_count, c.half, rng);
  AttentionSettings settings = attention_settings();
  const int64_t busiest = c.documents ? most_segments(c, documents) : 0;
  settings.segments_per_row = bound == SlotBound::PerToken ? 0 : bound == SlotBound::OneShort ? busiest - 1 : busiest;
  const AttentionSettings saved = attention_settings();
  set_attention_settings(settings);
  GpuResult gpu = run_on_gpu(c, documents, q, k, v, dout);
  set_attention_settings(saved);
  if (bound == SlotBound::OneShort) return gpu;

  ops::AttentionShape shape{c.rows, c.sequence, c.q_heads, c.kv_heads, c.head_dim, 0.0, c.window};
  shape.causal = c.causal;
  const int32_t* ids = c.documents ? documents.data() : nullptr;
  std::vector<double> out(q_count), lse(static_cast<size_t>(tokens * c.q_heads)), dq(q_count), dk(kv_count),
      dv(kv_count);
  ops::attention_forward(shape, as_double(q.values).data(), as_double(k.values).data(), as_double(v.values).data(),
                         ids, out.data(), lse.data());
  // The backward reads the GPU's own (rounded) out, as in a plan; the reference uses the same.
  ops::attention_backward(shape, as_double(q.values).data(), as_double(k.values).data(), as_double(v.values).data(),
                          ids, as_double(gpu.out).data(), lse.data(), as_double(dout.values).data(), dq.data(),
                          dk.data(), dv.data());
  const Errors e{relative_error(gpu.out, out), relative_error(gpu.logsumexp, in_path_layout(lse, c, gpu)),
                 relative_error(gpu.dq, dq), relative_error(gpu.dk, dk), relative_error(gpu.dv, dv)};
  std::printf("[cudnn attention] %s: %s | max relative error out %.2e lse %.2e dq %.2e dk %.2e dv %.2e\n",
              describe(c).c_str(), gpu.path.description.c_str(), e.out, e.logsumexp, e.dq, e.dk, e.dv);
  const std::string where = describe(c) + " on " + gpu.path.description;
  EXPECT_LT(e.out, 1e-2) << where;
  EXPECT_LT(e.logsumexp, 1e-4) << where;
  EXPECT_LT(e.dq, 2e-2) << where;
  EXPECT_LT(e.dk, 2e-2) << where;
  EXPECT_LT(e.dv, 2e-2) << where;
  return gpu;
}

// Restores the process-wide settings the tests change.
struct SettingsScope {
  AttentionSettings saved = attention_settings();
  explicit SettingsScope(const AttentionSettings& settings) { set_attention_settings(settings); }
  ~SettingsScope() { set_attention_settings(saved); }
};

TEST(CudnnAttentionCuda, MatchesTheCpuOp) {
  SKIP_WITHOUT_GPU();
  const cuda::CudnnAvailability& cudnn = cuda::cudnn_availability();
  std::printf("[cudnn attention] library: %s (%s)\n", cudnn.description.c_str(), cudnn.usable ? "usable" : "not used");
  if (!cudnn.usable) GTEST_SKIP() << "no cuDNN attention here: " << cudnn.description;
  SettingsScope scope({AttentionBackend::Cudnn, false});
  std::mt19937 rng(47);
  const std::vector<Case> cases = {
      {2, 256, 8, 2, 128, 0, false, false, false},  // GQA 4:1, one sequence per row
      {2, 300, 4, 4, 64, 0, true, false, false},    // packed documents, MHA, a row not a multiple of 128
      {4, 200, 8, 2, 128, 0, true, true, false},    // documents and padding tokens
      {2, 256, 4, 1, 256, 0, true, false, false},   // head_dim 256, one kv head
      {2, 256, 4, 1, 256, 0, false, false, false},  // the same, one sequence per row (no documents)
      {2, 320, 8, 4, 128, 64, true, true, false},   // sliding window with documents and padding
      {1, 512, 4, 2, 64, 100, false, false, true},  // fp16, window, no documents
      {2, 192, 4, 2, 128, 0, true, true, true},     // fp16 with documents and padding
      {1, 384, 2, 1, 256, 0, false, false, true},   // fp16, head_dim 256
      {2, 256, 8, 2, 128, 0, true, false, false, true, 256},  // documents, each filling its row
  };
  for (const Case& c : cases) {
    const GpuResult gpu = check_case(c, rng);
    // cudnn_attention.cpp's precheck: before 9.19 head dims above 128 over documents run our kernels.
    const bool refused = c.documents && c.head_dim > 128 && cudnn.version < 91900;
    EXPECT_EQ(gpu.path.cudnn, !refused) << describe(c) << ": " << (refused ? "expected our kernels" : "expected cuDNN")
                                        << ", ran " << gpu.path.description;
    // One document a row (the data's bound is 1) runs the rows layout; several, the ragged one.
    if (gpu.path.cudnn) EXPECT_EQ(gpu.ragged, c.documents && c.segment != c.sequence) << describe(c);
  }
  // Forced without a bound from data: a slot per token.
  const GpuResult per_token = check_case({2, 200, 8, 2, 128, 0, true, true, false}, rng, SlotBound::PerToken);
  EXPECT_TRUE(per_token.path.cudnn) << per_token.path.description;
}

// Bidirectional attention (causal: false) as the vision towers run it: documents of fixed length
// (Qwen2.5-VL's windows of 64 patches, the last one shorter), one document per row (a frame's
// full-attention block), random documents with padding tokens; GQA; bf16 and fp16; head dims 64, 80
// (the Qwen2.5-VL-7B tower's) and 128 on cuDNN where it takes them and on our kernels: the flash
// kernels' bidirectional mask (64 / 128), the flash kernels on zero-padded heads (80 → 128, 40 → 64,
// 8 → 32) and the plain kernel (12, 144). Each path must match the CPU op within the tolerances above.
std::vector<Case> bidirectional_cases(const std::vector<int>& head_dims) {
  std::vector<Case> cases;
  for (const int d : head_dims) {
    cases.push_back({1, 500, 4, 4, d, 0, true, false, false, false, 64});   // windows of 64, the last of 52
    cases.push_back({2, 256, 4, 4, d, 0, false, false, false, false});      // a frame per row (no documents)
    cases.push_back({2, 300, 8, 2, d, 0, true, true, false, false});        // random documents, padding, GQA
    cases.push_back({1, 320, 2, 2, d, 0, true, false, true, false, 16});    // fp16, windows of 16
  }
  return cases;
}

TEST(BidirectionalAttentionCuda, OurKernelsMatchTheCpuOp) {
  SKIP_WITHOUT_GPU();
  SettingsScope scope({AttentionBackend::Surogate, false});
  std::mt19937 rng(41);
  for (const Case& c : bidirectional_cases({64, 80, 128, 8, 40, 12, 144})) {
    const GpuResult gpu = check_case(c, rng);
    EXPECT_FALSE(gpu.path.cudnn) << gpu.path.description;
  }
}

TEST(BidirectionalAttentionCuda, CudnnMatchesTheCpuOp) {
  SKIP_WITHOUT_GPU();
  if (!cuda::cudnn_availability().usable) GTEST_SKIP() << cuda::cudnn_availability().description;
  SettingsScope scope({AttentionBackend::Cudnn, false});
  std::mt19937 rng(43);
  for (const Case& c : bidirectional_cases({64, 80, 128})) {
    const GpuResult gpu = check_case(c, rng);
    EXPECT_TRUE(gpu.path.cudnn) << describe(c) << ": expected cuDNN, ran " << gpu.path.description;
  }
}

// Left to choose (auto) with the data's bound set: bidirectional attention within documents (a
// tower's windows, which the text data's bound does not count) runs our kernels, saying why, and
// would take a slot per token. (Without documents, one frame per row, it takes cuDNN unless cuDNN's
// workspace is more than the memory plan counts: printed, not asserted.)
TEST(BidirectionalAttentionCuda, AutoKeepsWindowsOffTheDataBound) {
  SKIP_WITHOUT_GPU();
  if (!cuda::cudnn_availability().usable) GTEST_SKIP() << cuda::cudnn_availability().description;
  SettingsScope scope({AttentionBackend::Auto, false, 16});
  cuda::CudnnAttentionShape windows{.batch = 1, .sequence = 6440, .q_heads = 16, .kv_heads = 16, .head_dim = 80,
                                    .scale = 0.112f, .documents = true, .causal = false};
  cuda::CudnnAttentionShape frame = windows;
  frame.documents = false;
  const AttentionPath window_path = attention_path(windows), frame_path = attention_path(frame);
  std::printf("[cudnn attention] auto, vision 6440 d80: windows -> %s; frame rows -> %s\n",
              window_path.description.c_str(), frame_path.description.c_str());
  EXPECT_FALSE(window_path.cudnn) << window_path.description;
  EXPECT_NE(window_path.description.find("bidirectional"), std::string::npos) << window_path.description;
  EXPECT_EQ(windows.slots, 6440);
}

// A batch with more segments than the run's bound gives NaN everywhere (the step's finite check
// stops the run), never numbers computed over a wrong layout.
TEST(CudnnAttentionCuda, MoreSegmentsThanTheBoundGiveNaN) {
  SKIP_WITHOUT_GPU();
  if (!cuda::cudnn_availability().usable) GTEST_SKIP() << cuda::cudnn_availability().description;
  SettingsScope scope({AttentionBackend::Cudnn, false});
  std::mt19937 rng(5);
  const GpuResult gpu = check_case({2, 256, 8, 2, 128, 0, true, true, false}, rng, SlotBound::OneShort);
  ASSERT_TRUE(gpu.path.cudnn) << gpu.path.description;
  auto all_nan = [](const std::vector<float>& values) {
    return std::all_of(values.begin(), values.end(), [](float value) { return std::isnan(value); });
  };
  EXPECT_TRUE(all_nan(gpu.out));
  EXPECT_TRUE(all_nan(gpu.logsumexp));
  EXPECT_TRUE(all_nan(gpu.dq));
  EXPECT_TRUE(all_nan(gpu.dk));
  EXPECT_TRUE(all_nan(gpu.dv));
}

// The deterministic backward: two runs give the same gradient bits, within the same tolerances.
TEST(CudnnAttentionCuda, DeterministicBackwardRepeatsBitForBit) {
  SKIP_WITHOUT_GPU();
  if (!cuda::cudnn_availability().usable) GTEST_SKIP() << cuda::cudnn_availability().description;
  SettingsScope scope({AttentionBackend::Cudnn, true});
  for (const Case& c : {Case{2, 512, 8, 2, 128, 0, true, false, false}, Case{1, 640, 4, 4, 64, 0, false, false, true}}) {
    std::mt19937 first_rng(7), second_rng(7);
    const GpuResult first = check_case(c, first_rng);
    const GpuResult second = check_case(c, second_rng);
    EXPECT_TRUE(first.path.cudnn) << first.path.description;
    EXPECT_NE(first.path.description.find("deterministic backward: on"), std::string::npos) << first.path.description;
    auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    };
    EXPECT_TRUE(same_bits(first.dq, second.dq)) << describe(c) << ": dq differs between runs";
    EXPECT_TRUE(same_bits(first.dk, second.dk)) << describe(c) << ": dk differs between runs";
    EXPECT_TRUE(same_bits(first.dv, second.dv)) << describe(c) << ": dv differs between runs";
  }
}

// Where cuDNN is not taken our kernels run, with their own logsumexp layout, and still match: a head
// dim cuDNN is not used for here (32), and every shape under the Surogate backend (SUROGATE_ATTENTION=surogate).
TEST(CudnnAttentionCuda, FallsBackToOurKernelsWhereCudnnIsNotTaken) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  {
    SettingsScope scope({AttentionBackend::Cudnn, false});
    const GpuResult gpu = check_case({2, 130, 4, 2, 32, 0, true, true, false}, rng);
    EXPECT_FALSE(gpu.path.cudnn) << gpu.path.description;
    EXPECT_NE(gpu.path.description.find("Surogate's attention kernels"), std::string::npos) << gpu.path.description;
  }
  {
    SettingsScope scope({AttentionBackend::Surogate, false});
    const GpuResult gpu = check_case({2, 256, 8, 2, 128, 0, true, false, false}, rng);
    EXPECT_FALSE(gpu.path.cudnn) << gpu.path.description;
    EXPECT_NE(gpu.path.description.find("SUROGATE_ATTENTION=surogate"), std::string::npos) << gpu.path.description;
  }
}

// Left to choose (auto): packed documents take cuDNN once the run's data bounds their segments per
// row, and run our kernels without that bound, saying why; one sequence per row takes cuDNN; each
// with a workspace within what the memory plan counts (runtime::planned_attention_workspace_bytes).
TEST(CudnnAttentionCuda, AutoTakesPackedDocumentsOnceTheDataBoundsThem) {
  SKIP_WITHOUT_GPU();
  if (!cuda::cudnn_availability().usable) GTEST_SKIP() << cuda::cudnn_availability().description;
  for (const int head_dim : {64, 128}) {
    for (const int q_heads : {16, 32}) {
      cuda::CudnnAttentionShape documents{.batch = 2, .sequence = 2048, .q_heads = q_heads, .kv_heads = 8,
                                          .head_dim = head_dim, .scale = 0.088f, .documents = true};
      cuda::CudnnAttentionShape unbounded = documents, rows = documents;
      rows.documents = false;
      AttentionPath bounded_path, unbounded_path, rows_path;
      {
        SettingsScope scope({AttentionBackend::Auto, false, 16});
        bounded_path = attention_path(documents);
        rows_path = attention_path(rows);
      }
      {
        SettingsScope scope({AttentionBackend::Auto, false, 0});
        unbounded_path = attention_path(unbounded);
      }
      std::printf("[cudnn attention] auto, 2x2048 %d/8 d%d: documents (16 per row) -> %s; unbounded -> %s; rows -> "
                  "%s\n",
                  q_heads, head_dim, bounded_path.description.c_str(), unbounded_path.description.c_str(),
                  rows_path.description.c_str());
      EXPECT_TRUE(bounded_path.cudnn) << bounded_path.description;
      EXPECT_EQ(documents.slots, 32);
      EXPECT_FALSE(unbounded_path.cudnn) << unbounded_path.description;
      EXPECT_NE(unbounded_path.description.find("no bound"), std::string::npos) << unbounded_path.description;
      EXPECT_TRUE(rows_path.cudnn) << rows_path.description;
    }
  }
}

// The choice alone (no GPU needed: runs in CI too): our kernels under the Surogate setting, for head
// dims cuDNN is not used for, and everywhere when no cuDNN is usable here (no GPU, no library, an
// older GPU), each with its reason; cuDNN only where it is usable.
TEST(CudnnAttentionPath, OurKernelsWhereCudnnIsNotTakenWithTheReason) {
  auto path_for = [](AttentionBackend backend, int head_dim) {
    SettingsScope scope({backend, false});
    cuda::CudnnAttentionShape shape{
        .batch = 2, .sequence = 64, .q_heads = 4, .kv_heads = 2, .head_dim = head_dim, .scale = 0.125f, .documents = true};
    return attention_path(shape);
  };
  const AttentionPath surogate = path_for(AttentionBackend::Surogate, 128);
  EXPECT_FALSE(surogate.cudnn);
  EXPECT_EQ(surogate.description, "Surogate's attention kernels (SUROGATE_ATTENTION=surogate)");
  const AttentionPath small = path_for(AttentionBackend::Cudnn, 32);
  // Documents each filling its row (the data's bound is one segment a row) take the rows layout,
  // which has the same causal mask; more segments keep the packed-documents layout and its slots.
  for (const int64_t segments : {1, 3}) {
    SettingsScope scope({AttentionBackend::Auto, false, segments});
    cuda::CudnnAttentionShape shape{
        .batch = 2, .sequence = 64, .q_heads = 4, .kv_heads = 2, .head_dim = 128, .scale = 0.125f, .documents = true};
    attention_path(shape);
    EXPECT_EQ(shape.documents, segments > 1) << segments << " segments a row";
    if (segments > 1) EXPECT_EQ(shape.slots, 6);
  }
  EXPECT_FALSE(small.cudnn);
  EXPECT_NE(small.description.find("Surogate's attention kernels"), std::string::npos) << small.description;
  const cuda::CudnnAvailability& cudnn = cuda::cudnn_availability();
  if (!cudnn.usable) {
    const AttentionPath refused = path_for(AttentionBackend::Auto, 128);
    EXPECT_FALSE(refused.cudnn);
    EXPECT_EQ(refused.description, "Surogate's attention kernels (" + cudnn.description + ")");
  } else {
    EXPECT_NE(small.description.find("head_dim 32"), std::string::npos) << small.description;
  }
}

}  // namespace
}  // namespace surogate::runtime
