// Flash attention forward/backward vs a float64 reference with the same masking (causal,
// packed documents through cu_seqlens, optional sliding window) and GQA.
// Tolerances: output 1e-2 relative (probabilities are rounded to bf16 before P·V, matmul
// class); logsumexp 1e-4 relative (fp32 scores); dq, dk, dv 2e-2 relative (two bf16
// roundings, of P / dS and of the output, over long fp32 accumulations). dk and dv must be
// bitwise reproducible (a group's heads accumulated in a fixed order, or GQA partials summed in a
// fixed order); dq uses atomics and need not be. The backward runs with both key-block widths (4
// and 8 warps) and both work splits (whole group, per q head), with and without batch rows, the
// forward in both occupancy variants (2 and 3 blocks per SM), which must agree bit for bit, and
// both with the exact cu_seqlens and with the padded list the runtime passes (same bits; dq within
// 1e-2 of the exact run's, the spread of its atomics' order).
#include <gtest/gtest.h>

#include <cmath>

#include "cuda/kernels/attention.h"
#include "test_helpers.h"

namespace surogate::cuda::testing {
namespace {

struct Reference {
  std::vector<double> out, logsumexp, dq, dk, dv;
};

Reference reference_attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                              const std::vector<float>& dout, const std::vector<int32_t>& cu_seqlens,
                              const AttentionShape& s) {
  const int64_t T = s.tokens;
  const int D = s.head_dim, group = s.q_heads / s.kv_heads;
  Reference r;
  r.out.assign(T * s.q_heads * D, 0.0);
  r.dq.assign(T * s.q_heads * D, 0.0);
  r.dk.assign(T * s.kv_heads * D, 0.0);
  r.dv.assign(T * s.kv_heads * D, 0.0);
  r.logsumexp.assign(T * s.q_heads, 0.0);
  auto q_at = [&](int64_t t, int h) { return &q[(t * s.q_heads + h) * D]; };
  auto kv_index = [&](int64_t t, int h) { return (t * s.kv_heads + h) * D; };
  for (size_t doc = 0; doc + 1 < cu_seqlens.size(); ++doc) {
    for (int64_t i = cu_seqlens[doc]; i < cu_seqlens[doc + 1]; ++i) {
      const int64_t low = s.window > 0 ? std::max<int64_t>(cu_seqlens[doc], i - s.window + 1) : cu_seqlens[doc];
      for (int h = 0; h < s.q_heads; ++h) {
        const int kvh = h / group;
        std::vector<double> scores(i - low + 1);
        double max = -INFINITY;
        for (int64_t j = low; j <= i; ++j) {
          double dot = 0.0;
          for (int d = 0; d < D; ++d) dot += double(q_at(i, h)[d]) * k[kv_index(j, kvh) + d];
          scores[j - low] = dot * s.softmax_scale;
          max = std::max(max, scores[j - low]);
        }
        double sum = 0.0;
        for (double& score : scores) sum += std::exp(score - max);
        const double lse = max + std::log(sum);
        r.logsumexp[int64_t(h) * T + i] = lse;
        const int64_t o = (i * s.q_heads + h) * D;
        double delta = 0.0;
        std::vector<double> probabilities(scores.size()), dprobabilities(scores.size());
        for (int64_t j = low; j <= i; ++j) {
          const double p = std::exp(scores[j - low] - lse);
          probabilities[j - low] = p;
          double dp = 0.0;
          for (int d = 0; d < D; ++d) {
            r.out[o + d] += p * v[kv_index(j, kvh) + d];
            dp += double(dout[o + d]) * v[kv_index(j, kvh) + d];
          }
          dprobabilities[j - low] = dp;
          delta += p * dp;
        }
        for (int64_t j = low; j <= i; ++j) {
          const double p = probabilities[j - low];
          const double ds = p * (dprobabilities[j - low] - delta);
          for (int d = 0; d < D; ++d) {
            r.dq[o + d] += s.softmax_scale * ds * k[kv_index(j, kvh) + d];
            r.dk[kv_index(j, kvh) + d] += s.softmax_scale * ds * q_at(i, h)[d];
            r.dv[kv_index(j, kvh) + d] += p * dout[o + d];
          }
        }
      }
    }
  }
  return r;
}

struct Case {
  std::vector<int32_t> cu_seqlens;
  int q_heads, kv_heads, head_dim, window;
  int sequence = 0;  // batch row length (AttentionShape::sequence); 0 = not given
};

// A document of 90 tokens, 80 padding tokens (each a document of its own, as the runtime's
// cu_seqlens_from_documents makes them from id −1), then a document to 300.
std::vector<int32_t> padding_run() {
  std::vector<int32_t> cu{0};
  for (int32_t start = 90; start <= 170; ++start) cu.push_back(start);
  cu.push_back(300);
  return cu;
}

TEST(CudaAttention, ForwardBackwardPackedCausalGqaWindow) {
  SKIP_WITHOUT_GPU();
  const Case cases[] = {
      {{0, 1}, 1, 1, 64, 0},
      {{0, 37, 150, 200}, 4, 2, 64, 0},
      {{0, 333}, 6, 2, 128, 50},
      {{0, 64, 65, 130}, 2, 1, 32, 0},
      {{0, 100, 290}, 8, 8, 128, 0},
      {{0, 70, 77, 260}, 4, 1, 128, 33},
      {{0, 1100}, 2, 1, 128, 0},          // many tiles: pipelining and the unmasked fast path
      {{0, 700, 1100}, 4, 2, 64, 300},
      {{0, 300, 512, 700, 1024}, 4, 2, 64, 0, 512},  // two rows: their key blocks interleave
      {{0, 128, 256, 384}, 8, 2, 128, 0, 128},
      {padding_run(), 4, 2, 128, 0},  // a run of one-token documents: how the runtime passes padding
  };
  for (const Case& c : cases) {
    AttentionShape shape{.tokens = c.cu_seqlens.back(), .q_heads = c.q_heads, .kv_heads = c.kv_heads,
                         .head_dim = c.head_dim, .documents = static_cast<int>(c.cu_seqlens.size()) - 1,
                         .window = c.window, .softmax_scale = 1.0f / std::sqrt(float(c.head_dim)),
                         .sequence = c.sequence};
    const int64_t q_count = shape.tokens * c.q_heads * c.head_dim, kv_count = shape.tokens * c.kv_heads * c.head_dim;
    auto q = random_floats(q_count, 2.0f), k = random_floats(kv_count, 2.0f), v = random_floats(kv_count);
    auto dout = random_floats(q_count);
    auto device_q = device_bf16(q), device_k = device_bf16(k), device_v = device_bf16(v),
         device_dout = device_bf16(dout);
    auto device_cu = to_device(c.cu_seqlens);
    DeviceBuffer<Bf16> out(q_count), dq(q_count), dk(kv_count), dv(kv_count);
    // The per-q-head split needs the largest workspace; the default one runs in its own, exact size
    // below (memcheck sees any overrun).
    DeviceBuffer<float> logsumexp(shape.tokens * c.q_heads),
        workspace(attention_backward_workspace_floats(shape, AttentionBackwardBlocks::PerQueryHead)),
        default_workspace(attention_backward_workspace_floats(shape));
    EXPECT_EQ(attention_backward_workspace_floats(shape), shape.tokens * c.q_heads * (c.head_dim + 1))
        << "the default split needs dQ and delta only";
    const Reference r = reference_attention(q, k, v, dout, c.cu_seqlens, shape);
    const std::string where = "tokens=" + std::to_string(shape.tokens) + " heads=" + std::to_string(c.q_heads) + "/" +
                              std::to_string(c.kv_heads) + " head_dim=" + std::to_string(c.head_dim) +
                              " window=" + std::to_string(c.window) + " sequence=" + std::to_string(c.sequence);
    // Both occupancy variants of the forward (3 shares the Q tile with a K buffer) give the same
    // bits: they run the same arithmetic in the same order.
    std::vector<Bf16> outputs[2];
    for (int variant = 0; variant < 2; ++variant) {
      const int blocks_per_sm = variant == 0 ? 2 : 3;  // the default (3) last: the backward reads it
      out.poison();
      logsumexp.poison();
      attention_forward(bf16_ptr(out), logsumexp.data(), bf16_ptr(device_q), bf16_ptr(device_k), bf16_ptr(device_v),
                        device_cu.data(), shape, nullptr, blocks_per_sm);
      synchronize();
      outputs[variant] = out.download();
      const std::string at = where + " blocks_per_sm=" + std::to_string(blocks_per_sm);
      EXPECT_LT(relative_error(from_bf16(outputs[variant]), r.out), 1e-2) << at;
      EXPECT_LT(relative_error(logsumexp.download(), r.logsumexp), 1e-4) << at;
    }
    EXPECT_EQ(outputs[0], outputs[1]) << "the two forward variants differ, " << where;
    for (int variant = 0; variant < 4; ++variant) {
      const int warps = variant % 2 == 0 ? 4 : 8;
      const AttentionBackwardBlocks blocks =
          variant < 2 ? AttentionBackwardBlocks::WholeGroup : AttentionBackwardBlocks::PerQueryHead;
      const std::string at = where + " key_block_warps=" + std::to_string(warps) +
                             (variant < 2 ? " whole group" : " per q head");
      std::vector<Bf16> dk_runs[2], dv_runs[2];
      for (int run = 0; run < 2; ++run) {
        dq.poison();
        dk.poison();
        dv.poison();
        workspace.poison();
        attention_backward(bf16_ptr(dq), bf16_ptr(dk), bf16_ptr(dv), workspace.data(), bf16_ptr(device_dout),
                           bf16_ptr(device_q), bf16_ptr(device_k), bf16_ptr(device_v), bf16_ptr(out),
                           logsumexp.data(), device_cu.data(), shape, nullptr, warps, blocks);
        synchronize();
        dk_runs[run] = dk.download();
        dv_runs[run] = dv.download();
      }
      EXPECT_LT(relative_error(download_bf16(dq), r.dq), 2e-2) << at;
      EXPECT_LT(relative_error(from_bf16(dk_runs[0]), r.dk), 2e-2) << at;
      EXPECT_LT(relative_error(from_bf16(dv_runs[0]), r.dv), 2e-2) << at;
      EXPECT_EQ(dk_runs[0], dk_runs[1]) << "dk not deterministic, " << at;
      EXPECT_EQ(dv_runs[0], dv_runs[1]) << "dv not deterministic, " << at;
    }
    // The runtime passes cu_seqlens padded with `tokens` up to tokens + 1 entries (documents =
    // tokens, an upper bound): the same bits as the exact list, dq within its atomics' rounding.
    attention_backward(bf16_ptr(dq), bf16_ptr(dk), bf16_ptr(dv), default_workspace.data(), bf16_ptr(device_dout),
                       bf16_ptr(device_q), bf16_ptr(device_k), bf16_ptr(device_v), bf16_ptr(out), logsumexp.data(),
                       device_cu.data(), shape, nullptr);
    synchronize();
    const std::vector<Bf16> exact_dk = dk.download(), exact_dv = dv.download();
    const std::vector<float> exact_dq = download_bf16(dq);
    std::vector<int32_t> padded_cu = c.cu_seqlens;
    padded_cu.resize(shape.tokens + 1, static_cast<int32_t>(shape.tokens));
    auto device_padded_cu = to_device(padded_cu);
    AttentionShape padded_shape = shape;
    padded_shape.documents = static_cast<int>(shape.tokens);
    out.poison();
    logsumexp.poison();
    attention_forward(bf16_ptr(out), logsumexp.data(), bf16_ptr(device_q), bf16_ptr(device_k), bf16_ptr(device_v),
                      device_padded_cu.data(), padded_shape, nullptr);
    synchronize();
    EXPECT_EQ(out.download(), outputs[1]) << "padded cu_seqlens change the forward, " << where;
    dq.poison();
    dk.poison();
    dv.poison();
    attention_backward(bf16_ptr(dq), bf16_ptr(dk), bf16_ptr(dv), default_workspace.data(), bf16_ptr(device_dout),
                       bf16_ptr(device_q), bf16_ptr(device_k), bf16_ptr(device_v), bf16_ptr(out), logsumexp.data(),
                       device_padded_cu.data(), padded_shape, nullptr);
    synchronize();
    EXPECT_EQ(dk.download(), exact_dk) << "padded cu_seqlens change dk, " << where;
    EXPECT_EQ(dv.download(), exact_dv) << "padded cu_seqlens change dv, " << where;
    EXPECT_LT(relative_error(download_bf16(dq), exact_dq), 1e-2) << "padded cu_seqlens change dq, " << where;
  }
}

}  // namespace
}  // namespace surogate::cuda::testing
