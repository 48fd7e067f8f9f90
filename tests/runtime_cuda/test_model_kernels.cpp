// The model ops' own small kernels (cuda/kernels/elementwise_16bit.h, rope_tables.h,
// plain_attention.h, reductions.h, piece_copy.h) against the CPU reference
// ops (src/ops, double) on fresh random inputs at several shapes, odd sizes included. The
// src/cuda kernels they wrap are tested in tests/cuda.
// Error measure: max |gpu − ref| / max |ref| (tests/cuda/test_helpers.h); a NaN fails.
// Tolerances:
//   rope tables (F32 out)          1e-5  (fp32 angle and cosf/sinf vs double of the same fp32 angle)
//   rope apply, bf16 adds/accumulate 4e-3  (one bf16 rounding of the output, ≤ 2^-9 relative)
//   bias gradient                  4e-3  (fp32 column sum, one bf16 rounding)
//   plain attention out            1e-2; logsumexp 1e-4; dq/dk/dv 2e-2  (as the flash kernels:
//                                  bf16 inputs, fp32 math, bf16 outputs; dS·K sums of many terms)
//   cu_seqlens, argmax hits        exact
// The fused norm ops through the CUDA backend's binders (a one-node BF16 plan per op):
//   fused_rmsnorm_rope out, d_x      1e-2  (bf16 in/out, one or two bf16 roundings, fp32 math)
//                      rstd          1e-5  (fp32 sum of squares over head_dim, rsqrtf)
//                      d_weight      1e-2  (fp32 sum over all rows, one bf16 rounding)
//   fused_residual_rmsnorm           the same bounds; residual_out 4e-3 (one rounding of a sum)
//   linear_add, linear_backward_input_add  1e-2  (bf16 operands, fp32 accumulation of product and
//                                    addend in cuBLASLt, one bf16 rounding; as tests/cuda matmul)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "compiler/execution_plan.h"
#include "cuda/kernels/elementwise_16bit.h"
#include "cuda/kernels/piece_copy.h"
#include "cuda/kernels/plain_attention.h"
#include "cuda/kernels/reductions.h"
#include "cuda/kernels/rope_tables.h"
#include "cuda/test_helpers.h"
#include "graph/builder.h"
#include "ops/attention.h"
#include "ops/linear.h"
#include "ops/defs/register_ops.h"
#include "ops/rmsnorm.h"
#include "ops/rmsnorm_rope.h"
#include "ops/rope.h"
#include "runtime/cuda_backend.h"
#include "runtime_cuda/cuda_node_plan.h"

namespace surogate::runtime {
namespace {

using namespace cuda::testing;
namespace k = cuda;
using bf16 = __nv_bfloat16;

std::vector<double> as_double(const std::vector<float>& values) { return {values.begin(), values.end()}; }

// Packed documents: random lengths per row (each row of `sequence` tokens starts a document).
std::vector<int32_t> random_documents(int64_t rows, int64_t sequence, std::vector<int32_t>* positions) {
  std::vector<int32_t> documents;
  std::uniform_int_distribution<int64_t> length(1, std::max<int64_t>(1, sequence / 2));
  for (int64_t row = 0; row < rows; ++row) {
    int64_t t = 0;
    int32_t id = 0;
    while (t < sequence) {
      const int64_t end = std::min(sequence, t + length(generator()));
      for (int64_t i = t; i < end; ++i) {
        documents.push_back(id);
        if (positions) positions->push_back(static_cast<int32_t>(i - t));
      }
      t = end;
      ++id;
    }
  }
  return documents;
}

// The packer's padding (data/packing.h): id −1 over the last third of odd rows (right padding) and
// the first quarter of rows 2, 6, ... (left padding).
std::vector<int32_t> with_padding(std::vector<int32_t> documents, int64_t rows, int64_t sequence) {
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t begin = row % 2 == 1 ? sequence - sequence / 3 : 0;
    const int64_t end = row % 2 == 1 ? sequence : (row % 4 == 2 ? sequence / 4 : 0);
    for (int64_t t = begin; t < end; ++t) documents[static_cast<size_t>(row * sequence + t)] = -1;
  }
  return documents;
}

// A document starts at every row start, wherever the id changes and at every padding token.
TEST(CudaModelKernels, CuSeqlensFromDocuments) {
  SKIP_WITHOUT_GPU();
  for (auto [rows, sequence] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 37}, {3, 129}, {2, 2048}, {5, 333}}) {
    for (bool padded : {false, true}) {
      std::vector<int32_t> documents = random_documents(rows, sequence, nullptr);
      if (padded) documents = with_padding(std::move(documents), rows, sequence);
      std::vector<int32_t> expected{0};
      for (int64_t t = 1; t < rows * sequence; ++t) {
        if (t % sequence == 0 || documents[t] != documents[t - 1] || documents[t] < 0)
          expected.push_back(static_cast<int32_t>(t));
      }
      const int64_t tokens = rows * sequence;
      expected.resize(static_cast<size_t>(tokens + 1), static_cast<int32_t>(tokens));
      auto device_documents = cuda::to_device(documents);
      cuda::DeviceBuffer<int32_t> cu(static_cast<size_t>(tokens + 1));
      cu.poison();
      k::cu_seqlens_from_documents(cu.data(), device_documents.data(), rows, sequence, nullptr);
      EXPECT_EQ(cu.download(), expected) << rows << "x" << sequence;
      k::cu_seqlens_from_documents(cu.data(), nullptr, rows, sequence, nullptr);  // one document per row
      std::vector<int32_t> per_row;
      for (int64_t r = 0; r < rows; ++r) per_row.push_back(static_cast<int32_t>(r * sequence));
      per_row.resize(static_cast<size_t>(tokens + 1), static_cast<int32_t>(tokens));
      EXPECT_EQ(cu.download(), per_row) << rows << "x" << sequence;
    }
  }
}

// concat / split in one launch: joined rows are the pieces' rows side by side, byte for byte, in
// every copy unit (16-byte pieces of LoRA's batched products, odd widths, an empty piece), also for
// pieces that start inside the joined row (a binder's second launch past 8 pieces: the bytes around
// them stay untouched), and a split of the joined tensor gives the pieces back.
TEST(CudaModelKernels, PieceCopyConcatsAndSplitsByteForByte) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t outer;
    std::vector<int64_t> widths;  // bytes per row of each piece
    int64_t before = 0, after = 0;  // joined bytes per row outside the pieces
  };
  for (const Case& c : {Case{4096, {32, 32, 32}}, Case{7, {8, 24}}, Case{5, {6, 10, 4}}, Case{3, {3, 0, 5}},
                        Case{1, {16}}, Case{33, {4, 4, 4, 4, 4, 4, 4, 12}}, Case{9, {32, 32}, 64, 32},
                        Case{4, {2, 6}, 6, 2}}) {
    std::vector<int64_t> offsets{c.before};
    for (int64_t width : c.widths) offsets.push_back(offsets.back() + width);
    const int64_t row = offsets.back() + c.after;
    std::mt19937 generator(static_cast<uint32_t>(row * 131 + c.outer));
    std::vector<std::vector<uint8_t>> pieces;
    std::vector<cuda::DeviceBuffer<uint8_t>> device_pieces;
    std::vector<uint8_t> expected(static_cast<size_t>(c.outer * row), 0xA5);  // the joined buffer's poison
    for (size_t p = 0; p < c.widths.size(); ++p) {
      std::vector<uint8_t> bytes(static_cast<size_t>(std::max<int64_t>(c.outer * c.widths[p], 1)));
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(generator());
      for (int64_t r = 0; r < c.outer; ++r) {
        std::copy_n(bytes.begin() + r * c.widths[p], c.widths[p], expected.begin() + r * row + offsets[p]);
      }
      device_pieces.push_back(cuda::to_device(bytes));
      pieces.push_back(std::move(bytes));
    }
    cuda::DeviceBuffer<uint8_t> joined(expected.size());
    CUDA_CHECK(cudaMemset(joined.data(), 0xA5, expected.size()));
    k::PieceCopy copy;
    copy.pieces = static_cast<int>(c.widths.size());
    copy.outer = c.outer;
    copy.joined_row = row;
    copy.joined = joined.data();
    for (size_t p = 0; p <= c.widths.size(); ++p) {
      if (p < c.widths.size()) copy.piece_data[p] = device_pieces[p].data();
      copy.offsets[p] = offsets[p];
    }
    k::copy_pieces(copy, true, nullptr);
    EXPECT_EQ(joined.download(), expected) << "concat, row of " << row << " bytes";
    for (auto& piece : device_pieces) piece.poison();
    k::copy_pieces(copy, false, nullptr);
    for (size_t p = 0; p < c.widths.size(); ++p) {
      if (c.widths[p] > 0) EXPECT_EQ(device_pieces[p].download(), pieces[p]) << "split, piece " << p << " of row " << row;
    }
  }
}

TEST(CudaModelKernels, RopeTablesAndApplyMatchCpu) {
  SKIP_WITHOUT_GPU();
  struct Case { int64_t tokens; int heads, head_dim, rotary_dim; };
  for (Case c : {Case{7, 3, 8, 8}, Case{129, 4, 64, 64}, Case{333, 2, 128, 64}, Case{1, 1, 32, 32}}) {
    std::vector<int32_t> positions;
    random_documents(1, c.tokens, &positions);
    ops::RopeFrequencies<double> frequencies;
    std::vector<float> inverse(static_cast<size_t>(c.rotary_dim / 2));
    for (size_t i = 0; i < inverse.size(); ++i) {
      inverse[i] = static_cast<float>(1.0 / std::pow(10000.0, 2.0 * static_cast<double>(i) / c.rotary_dim));
      frequencies.inverse_frequency.push_back(inverse[i]);
    }
    frequencies.attention_scaling = 1.25;
    const size_t half = inverse.size(), table = static_cast<size_t>(c.tokens) * half;
    // CPU tables from the same fp32 angle the kernel forms.
    std::vector<double> cos(table), sin(table);
    for (int64_t t = 0; t < c.tokens; ++t) {
      for (size_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(positions[t]) * inverse[i];
        cos[t * half + i] = std::cos(static_cast<double>(angle)) * 1.25;
        sin[t * half + i] = std::sin(static_cast<double>(angle)) * 1.25;
      }
    }
    auto device_positions = cuda::to_device(positions);
    auto device_inverse = cuda::to_device(inverse);
    cuda::DeviceBuffer<float> gpu_cos(table), gpu_sin(table);
    gpu_cos.poison();
    gpu_sin.poison();
    k::rope_tables(gpu_cos.data(), gpu_sin.data(), device_positions.data(), device_inverse.data(), c.tokens,
                   static_cast<int>(half), 1.25f, nullptr);
    EXPECT_LT(relative_error(gpu_cos.download(), cos), 1e-5);
    EXPECT_LT(relative_error(gpu_sin.download(), sin), 1e-5);

    const size_t count = static_cast<size_t>(c.tokens * c.heads * c.head_dim);
    std::vector<float> x = random_floats(count);
    std::vector<double> cos_used(table), sin_used(table);  // the GPU's fp32 tables, exactly
    std::vector<float> cos_f = gpu_cos.download(), sin_f = gpu_sin.download();
    std::copy(cos_f.begin(), cos_f.end(), cos_used.begin());
    std::copy(sin_f.begin(), sin_f.end(), sin_used.begin());
    std::vector<double> expected(count), expected_back(count);
    ops::rope_forward(as_double(x).data(), cos_used.data(), sin_used.data(), c.tokens, c.heads, c.head_dim, c.rotary_dim,
                      expected.data());
    ops::rope_backward(as_double(x).data(), cos_used.data(), sin_used.data(), c.tokens, c.heads, c.head_dim,
                       c.rotary_dim, expected_back.data());
    auto device_x = device_bf16(x);
    cuda::DeviceBuffer<Bf16> out(count);
    for (float sign : {1.0f, -1.0f}) {
      out.poison();
      k::rope_apply(bf16_ptr(out), bf16_ptr(device_x), gpu_cos.data(), gpu_sin.data(), c.tokens, c.heads, c.head_dim,
                    static_cast<int>(half), sign, nullptr);
      EXPECT_LT(relative_error(download_bf16(out), sign > 0 ? expected : expected_back), 4e-3)
          << c.tokens << " tokens, sign " << sign;
    }
  }
}

TEST(CudaModelKernels, Bf16AddAccumulateAndBiasGradient) {
  SKIP_WITHOUT_GPU();
  for (int64_t count : {1, 7, 8, 1001, 65536}) {
    std::vector<float> a = random_floats(static_cast<size_t>(count)), b = random_floats(static_cast<size_t>(count));
    std::vector<double> sum(static_cast<size_t>(count));
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = double(a[i]) + double(b[i]);
    auto device_a = device_bf16(a), device_b = device_bf16(b);
    cuda::DeviceBuffer<Bf16> out(static_cast<size_t>(count));
    out.poison();
    k::add_16bit(bf16_ptr(device_a), bf16_ptr(device_b), bf16_ptr(out), count, nullptr);
    EXPECT_LT(relative_error(download_bf16(out), sum), 4e-3) << count;
    k::accumulate_16bit(bf16_ptr(device_b), bf16_ptr(device_a), count, nullptr);
    EXPECT_LT(relative_error(download_bf16(device_a), sum), 4e-3) << count;
  }
  for (auto [rows, columns] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {37, 96}, {4096, 1024}, {333, 257}}) {
    std::vector<float> dout = random_floats(static_cast<size_t>(rows * columns));
    std::vector<double> expected(static_cast<size_t>(columns), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < columns; ++c) expected[c] += dout[r * columns + c];
    auto device_dout = device_bf16(dout);
    cuda::DeviceBuffer<Bf16> dbias(static_cast<size_t>(columns));
    dbias.poison();
    k::bias_gradient(bf16_ptr(dbias), bf16_ptr(device_dout), rows, columns, nullptr);
    EXPECT_LT(relative_error(download_bf16(dbias), expected), 4e-3) << rows << "x" << columns;
  }
}

TEST(CudaModelKernels, PlainAttentionMatchesCpu) {
  SKIP_WITHOUT_GPU();
  struct Case { int64_t rows, sequence; int q_heads, kv_heads, head_dim, window; };
  for (Case c : {Case{1, 1, 1, 1, 8, 0}, Case{2, 37, 4, 2, 8, 0}, Case{3, 64, 4, 1, 24, 5}, Case{1, 129, 2, 2, 96, 0},
                 Case{4, 50, 4, 2, 8, 0}}) {
    const int64_t tokens = c.rows * c.sequence;
    std::vector<int32_t> documents = random_documents(c.rows, c.sequence, nullptr);
    if (c.rows == 4) documents = with_padding(std::move(documents), c.rows, c.sequence);  // padding sees only itself
    const size_t q_count = static_cast<size_t>(tokens * c.q_heads * c.head_dim);
    const size_t kv_count = static_cast<size_t>(tokens * c.kv_heads * c.head_dim);
    std::vector<float> q = random_floats(q_count), kk = random_floats(kv_count), v = random_floats(kv_count),
                       dout = random_floats(q_count);
    ops::AttentionShape shape{c.rows, c.sequence, c.q_heads, c.kv_heads, c.head_dim, 0.0, c.window};
    std::vector<double> out(q_count), lse(static_cast<size_t>(tokens * c.q_heads)), dq(q_count), dk(kv_count),
        dv(kv_count);
    ops::attention_forward(shape, as_double(q).data(), as_double(kk).data(), as_double(v).data(), documents.data(),
                           out.data(), lse.data());
    // CPU logsumexp is [B, Hq, T]; the kernels' is [Hq, B·T].
    std::vector<double> lse_kernel_layout(lse.size());
    for (int64_t b = 0; b < c.rows; ++b)
      for (int h = 0; h < c.q_heads; ++h)
        for (int64_t t = 0; t < c.sequence; ++t)
          lse_kernel_layout[h * tokens + b * c.sequence + t] = lse[(b * c.q_heads + h) * c.sequence + t];

    auto device_documents = cuda::to_device(documents);
    cuda::DeviceBuffer<int32_t> cu(static_cast<size_t>(tokens + 1));
    k::cu_seqlens_from_documents(cu.data(), device_documents.data(), c.rows, c.sequence, nullptr);
    auto device_q = device_bf16(q), device_k = device_bf16(kk), device_v = device_bf16(v), device_dout = device_bf16(dout);
    cuda::DeviceBuffer<Bf16> gpu_out(q_count), gpu_dq(q_count), gpu_dk(kv_count), gpu_dv(kv_count);
    cuda::DeviceBuffer<float> gpu_lse(lse.size());
    for (auto* buffer : {&gpu_out, &gpu_dq, &gpu_dk, &gpu_dv}) buffer->poison();
    gpu_lse.poison();
    k::PlainAttentionShape plain{tokens, c.q_heads, c.kv_heads, c.head_dim, c.window,
                                 static_cast<float>(1.0 / std::sqrt(double(c.head_dim)))};
    k::plain_attention_forward(bf16_ptr(gpu_out), gpu_lse.data(), bf16_ptr(device_q), bf16_ptr(device_k),
                               bf16_ptr(device_v), cu.data(), plain, nullptr);
    std::vector<float> out_bf16 = download_bf16(gpu_out);
    EXPECT_LT(relative_error(out_bf16, out), 1e-2);
    EXPECT_LT(relative_error(gpu_lse.download(), lse_kernel_layout), 1e-4);
    // The backward reads the GPU's own (bf16) out, as in a plan; the reference uses the same.
    std::vector<double> out_used(out_bf16.begin(), out_bf16.end());
    ops::attention_backward(shape, as_double(q).data(), as_double(kk).data(), as_double(v).data(), documents.data(),
                            out_used.data(), lse.data(), as_double(dout).data(), dq.data(), dk.data(), dv.data());
    k::plain_attention_backward(bf16_ptr(gpu_dq), bf16_ptr(gpu_dk), bf16_ptr(gpu_dv), bf16_ptr(device_dout),
                                bf16_ptr(device_q), bf16_ptr(device_k), bf16_ptr(device_v), bf16_ptr(gpu_out),
                                gpu_lse.data(), cu.data(), plain, nullptr);
    EXPECT_LT(relative_error(download_bf16(gpu_dq), dq), 2e-2) << tokens << " tokens";
    EXPECT_LT(relative_error(download_bf16(gpu_dk), dk), 2e-2) << tokens << " tokens";
    EXPECT_LT(relative_error(download_bf16(gpu_dv), dv), 2e-2) << tokens << " tokens";
  }
}

TEST(CudaModelKernels, ArgmaxHitsCountsFirstMaximum) {
  SKIP_WITHOUT_GPU();
  for (auto [rows, vocab] : std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {37, 96}, {129, 1001}, {16, 151936}}) {
    std::vector<float> logits = random_floats(static_cast<size_t>(rows * vocab));
    std::vector<int32_t> labels(static_cast<size_t>(rows));
    int32_t expected = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = logits.data() + r * vocab;
      const int32_t best = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
      labels[r] = r % 3 == 0 ? best : (r % 3 == 1 ? -100 : static_cast<int32_t>((best + 1) % vocab));
      if (r % 3 == 0) ++expected;
    }
    auto device_logits = device_bf16(logits);
    auto device_labels = cuda::to_device(labels);
    cuda::DeviceBuffer<int32_t> hits(1);
    hits.zero(nullptr);
    k::argmax_hits(hits.data(), bf16_ptr(device_logits), device_labels.data(), rows, vocab, nullptr);
    EXPECT_EQ(hits.download()[0], expected) << rows << "x" << vocab;
  }
}

// Qwen3's q/k norm + RoPE: the qk_norm_rope kernels (head_dim 64 / 128, full rotary, GQA-sized
// head counts) and the unfused fallback (head_dim 8, and partial rotary), against the CPU op in
// double on the same bf16 inputs. The backward node reads the reference rstd, so both sides
// differentiate at the same point.
TEST(CudaModelKernels, FusedRmsnormRopeBindersMatchCpu) {
  SKIP_WITHOUT_GPU();
  struct Case { int64_t batch, sequence; int heads, head_dim, rotary_dim; };
  for (Case c : {Case{2, 37, 4, 64, 64}, Case{1, 129, 2, 128, 128}, Case{3, 5, 3, 8, 8}, Case{2, 17, 2, 64, 32}}) {
    SCOPED_TRACE(::testing::Message() << c.batch << "x" << c.sequence << " heads " << c.heads << " head_dim "
                                      << c.head_dim << " rotary " << c.rotary_dim);
    const int64_t tokens = c.batch * c.sequence, rows = tokens * c.heads, count = rows * c.head_dim;
    std::vector<int32_t> positions;
    random_documents(c.batch, c.sequence, &positions);
    const TestRopeFrequencies rope = test_rope_frequencies(c.rotary_dim, 1.1f);
    const ops::RopeFrequencies<double>& frequencies = rope.reference;
    const std::vector<double>& inv_freq = rope.inv_freq;
    const std::vector<float> x = random_floats(static_cast<size_t>(count), 2.0f);
    const std::vector<float> d_out = random_floats(static_cast<size_t>(count));
    std::vector<float> weight = random_floats(static_cast<size_t>(c.head_dim), 0.5f);
    for (float& w : weight) w = bf16_to_float(float_to_bf16(w + 1.0f));

    const ops::RmsnormRopeShape shape{tokens, c.heads, c.head_dim};
    std::vector<double> out(count), rstd(rows), d_x(count), d_weight(c.head_dim, 0.0);
    ops::rmsnorm_rope_forward(as_double(x).data(), as_double(weight).data(), frequencies, positions.data(), shape, 1e-6,
                              out.data(), rstd.data());
    ops::rmsnorm_rope_backward(as_double(d_out).data(), as_double(x).data(), as_double(weight).data(), rstd.data(),
                               frequencies, positions.data(), shape, d_x.data(), d_weight.data());

    CudaNodePlan gpu;
    const graph::Shape flat{c.batch, c.sequence, static_cast<int64_t>(c.heads) * c.head_dim};
    const nlohmann::json attrs{{"heads", c.heads}, {"head_dim", c.head_dim}, {"eps", 1e-6}, {"inv_freq", inv_freq},
                               {"attention_scaling", 1.1f}};
    graph::TensorId ids = gpu.builder.input("position_ids", DType::I32, {c.batch, c.sequence});
    graph::TensorId gx = gpu.operand("x", DType::BF16, flat), gw = gpu.operand("w", DType::BF16, {c.head_dim});
    auto forward = gpu.builder.op("fused_rmsnorm_rope", {gx, gw, ids}, attrs);
    auto backward = gpu.builder.op("fused_rmsnorm_rope_backward",
                                   {gpu.operand("d_out", DType::BF16, flat), gx, gw,
                                    gpu.operand("rstd_ref", DType::F32, {rows}), ids}, attrs);
    gpu.load({forward[0], forward[1], backward[0], backward[1]});
    gpu.write("x", x);
    gpu.write("w", weight);
    gpu.write("d_out", d_out);
    gpu.write("rstd_ref", std::vector<float>(rstd.begin(), rstd.end()));
    gpu.run(positions);
    EXPECT_LT(relative_error(gpu.read(forward[0]), out), 1e-2);
    EXPECT_LT(relative_error(gpu.read(forward[1]), rstd), 1e-5);
    EXPECT_LT(relative_error(gpu.read(backward[0]), d_x), 1e-2);
    EXPECT_LT(relative_error(gpu.read(backward[1]), d_weight), 1e-2);
  }
}

// fused_residual_rmsnorm (out, residual_out, rstd) and its backward with and without the
// gradient arriving along the residual stream, against the CPU op in double.
TEST(CudaModelKernels, FusedResidualRmsnormBindersMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (auto [rows, channels] : std::vector<std::pair<int64_t, int64_t>>{{37, 64}, {130, 1024}, {4, 4096}}) {
    SCOPED_TRACE(::testing::Message() << rows << "x" << channels);
    const size_t count = static_cast<size_t>(rows * channels);
    const std::vector<float> residual = random_floats(count, 2.0f), x = random_floats(count), d_out = random_floats(count),
                             d_stream = random_floats(count);
    std::vector<float> weight = random_floats(static_cast<size_t>(channels), 0.5f);
    for (float& w : weight) w = bf16_to_float(float_to_bf16(w + 1.0f));
    std::vector<double> residual_out(count), unrounded_out(count), unrounded_rstd(rows);
    ops::fused_residual_rmsnorm_forward(as_double(residual).data(), as_double(x).data(), as_double(weight).data(), rows,
                                        channels, 1e-6, residual_out.data(), unrounded_out.data(), unrounded_rstd.data());
    // The kernel normalises the stream it stores (bf16-rounded residual_out), so out and rstd are
    // compared with the norm of that; the backward reads it and the reference rstd.
    std::vector<float> stored(count);
    for (size_t i = 0; i < count; ++i) stored[i] = bf16_to_float(float_to_bf16(static_cast<float>(residual_out[i])));
    std::vector<double> stored_rstd(rows), stored_out(count);
    ops::rmsnorm_forward(as_double(stored).data(), as_double(weight).data(), rows, channels, 1e-6, stored_out.data(),
                         stored_rstd.data());
    std::vector<double> d_input(count), d_input_stream(count), d_weight(channels, 0.0), d_weight_stream(channels, 0.0);
    const double* no_stream_gradient = nullptr;
    ops::fused_residual_rmsnorm_backward(as_double(d_out).data(), no_stream_gradient, as_double(stored).data(),
                                         as_double(weight).data(), stored_rstd.data(), rows, channels, d_input.data(),
                                         d_weight.data());
    ops::fused_residual_rmsnorm_backward(as_double(d_out).data(), as_double(d_stream).data(), as_double(stored).data(),
                                         as_double(weight).data(), stored_rstd.data(), rows, channels,
                                         d_input_stream.data(), d_weight_stream.data());

    CudaNodePlan gpu;
    const graph::Shape shape{rows, channels};
    graph::TensorId gw = gpu.operand("w", DType::BF16, {channels});
    auto forward = gpu.builder.op("fused_residual_rmsnorm",
                                  {gpu.operand("r", DType::BF16, shape), gpu.operand("x", DType::BF16, shape), gw},
                                  {{"eps", 1e-6}});
    graph::TensorId g_dout = gpu.operand("d_out", DType::BF16, shape), g_stored = gpu.operand("stored", DType::BF16, shape);
    graph::TensorId g_rstd = gpu.operand("rstd_ref", DType::F32, {rows});
    auto backward = gpu.builder.op("fused_residual_rmsnorm_backward", {g_dout, g_stored, gw, g_rstd});
    auto backward_stream = gpu.builder.op("fused_residual_rmsnorm_backward",
                                          {g_dout, g_stored, gw, g_rstd, gpu.operand("d_stream", DType::BF16, shape)});
    gpu.load({forward[0], forward[1], forward[2], backward[0], backward[1], backward_stream[0], backward_stream[1]});
    gpu.write("r", residual);
    gpu.write("x", x);
    gpu.write("w", weight);
    gpu.write("d_out", d_out);
    gpu.write("stored", stored);
    gpu.write("rstd_ref", std::vector<float>(stored_rstd.begin(), stored_rstd.end()));
    gpu.write("d_stream", d_stream);
    gpu.run({});
    EXPECT_LT(relative_error(gpu.read(forward[0]), stored_out), 1e-2) << "out";
    EXPECT_LT(relative_error(gpu.read(forward[1]), residual_out), 4e-3) << "residual_out";
    EXPECT_LT(relative_error(gpu.read(forward[2]), stored_rstd), 1e-5) << "rstd";
    EXPECT_LT(relative_error(gpu.read(backward[0]), d_input), 1e-2) << "d_input";
    EXPECT_LT(relative_error(gpu.read(backward[1]), d_weight), 1e-2) << "d_weight";
    EXPECT_LT(relative_error(gpu.read(backward_stream[0]), d_input_stream), 1e-2) << "d_input + d_residual_out";
    EXPECT_LT(relative_error(gpu.read(backward_stream[1]), d_weight_stream), 1e-2) << "d_weight";
  }
}

// linear_add (x·Wᵀ + c) and linear_backward_input_add (d·W + c) through the CUDA binders (one
// cuBLASLt matmul each, the addend as C) against the CPU ops in double on the same bf16 inputs,
// at LoRA's B shapes (in = rank) and odd sizes; the addend is as large as the product.
TEST(CudaModelKernels, LinearAddBindersMatchCpu) {
  SKIP_WITHOUT_GPU();
  struct Case { int64_t batch, sequence, in, out; };
  for (Case c : {Case{1, 1, 8, 8}, Case{1, 37, 53, 71}, Case{2, 64, 16, 1024}, Case{3, 43, 1024, 16}}) {
    SCOPED_TRACE(::testing::Message() << c.batch << "x" << c.sequence << " in " << c.in << " out " << c.out);
    const int64_t rows = c.batch * c.sequence;
    const std::vector<float> x = random_floats(static_cast<size_t>(rows * c.in)),
                             w = random_floats(static_cast<size_t>(c.out * c.in)),
                             c_out = random_floats(static_cast<size_t>(rows * c.out), 4.0f),
                             d = random_floats(static_cast<size_t>(rows * c.out)),
                             c_in = random_floats(static_cast<size_t>(rows * c.in), 4.0f);
    std::vector<double> y(rows * c.out), d_x(rows * c.in);
    ops::linear_add_forward(as_double(x).data(), as_double(w).data(), as_double(c_out).data(), rows, c.in, c.out,
                            y.data());
    ops::linear_input_gradient_add(as_double(d).data(), as_double(w).data(), as_double(c_in).data(), rows, c.in, c.out,
                                   d_x.data());

    CudaNodePlan gpu;
    graph::TensorId gw = gpu.operand("w", DType::BF16, {c.out, c.in});
    graph::TensorId forward = gpu.builder.op(
        "linear_add", {gpu.operand("x", DType::BF16, {c.batch, c.sequence, c.in}), gw,
                       gpu.operand("c_out", DType::BF16, {c.batch, c.sequence, c.out})});
    graph::TensorId backward = gpu.builder.op(
        "linear_backward_input_add", {gpu.operand("d", DType::BF16, {c.batch, c.sequence, c.out}), gw,
                                      gpu.operand("c_in", DType::BF16, {c.batch, c.sequence, c.in})});
    gpu.load({forward, backward});
    gpu.write("x", x);
    gpu.write("w", w);
    gpu.write("c_out", c_out);
    gpu.write("d", d);
    gpu.write("c_in", c_in);
    gpu.run({});
    EXPECT_LT(relative_error(gpu.read(forward), y), 1e-2) << "linear_add";
    EXPECT_LT(relative_error(gpu.read(backward), d_x), 1e-2) << "linear_backward_input_add";
    EXPECT_EQ(gpu.read(gpu.plan.tensor("c_out")), c_out) << "the addend was written";
  }
}

}  // namespace
}  // namespace surogate::runtime
