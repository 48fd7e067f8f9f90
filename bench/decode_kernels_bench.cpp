// The kernels of a one-request bf16 decode step of Qwen3-8B (hidden 4096, 32 / 8 heads of 128,
// MLP 12288, vocabulary 151936), each as a decode step runs it: captured in a CUDA graph and
// replayed, so launch gaps are the graph's, not the host's.
//
//   decode_kernels_bench [--rows 1,2] [--repeats 200]
//
// 1. One weight W [N, K] (y = x · Wᵀ, M rows): small_m_linear (the linear op's kernel today),
//    decode_gemv (decode_gemv.h; rows per block chosen by N, and the best of 1, 2, 4) and cuBLASLt
//    (cuda::Matmul), as µs per call and TB/s of the bytes moved (W, x and y). Launches cycle over
//    enough copies of the weights to pass 512 MiB, so W comes from HBM, not the 60 MiB L2.
// 2. The fused forms: q, k and v in one decode_gemv launch against three small_m_linear launches;
//    gate, up and SwiGLU in one decode_gemv_swiglu launch against two small_m_linear or two
//    cuBLASLt products and swiglu_forward; each also with the RMSNorm before it folded in
//    (DecodeGemvNorm) against rmsnorm_forward and the plain launch.
// 3. A layer's linear chain (no attention), today's kernels against the decode GEMVs: rmsnorm,
//    q, k, v (small_m_linear), o (small_m_linear), rmsnorm, gate, up (cuBLASLt), swiglu, down
//    (cuBLASLt) against the same chain of decode GEMVs (o and down with the residual as addend),
//    q/k/v and gate/up/SwiGLU separate (as the linear op runs them) or fused, each with and
//    without the programmatic dependent launch (DecodeGemvShape::overlap_previous); and × 36.
// 4. greedy_tokens over one row of 151936 bf16 logits (in the L2, as after the LM head): the
//    cluster kernel against the one-block one.
// 5. The rest of a layer as the decode graph runs it: the cached attention (append, split-K,
//    combine) at a few context lengths and the q / k norm + RoPE (old: two launches, new:
//    qk_norm_rope_forward_pair's one), and the whole-layer estimate from them and section 3's
//    chains: old (separate GEMVs) and new (fused), × 36 layers + the LM head and greedy_tokens,
//    as steps/s.
// The H200's HBM peak is about 4.8 TB/s. Built beside the CUDA tests (tests/runtime_cuda/CMakeLists.txt).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels/cached_attention.h"
#include "cuda/kernels/decode_gemv.h"
#include "cuda/kernels/greedy_tokens.h"
#include "cuda/kernels/qk_norm_rope.h"
#include "cuda/kernels/rmsnorm.h"
#include "cuda/kernels/small_m_linear.h"
#include "cuda/kernels/swiglu.h"
#include "cuda/matmul.h"
#include "cuda_timing.h"

namespace {

using surogate::cuda::DeviceBuffer;
using Bf16 = __nv_bfloat16;
using surogate::bench::time_graph;

constexpr double kHbmTbs = 4.8;

// `count` copies of `elements` bf16 values (0x3c3c ≈ 0.0115), enough to pass 512 MiB together.
std::vector<DeviceBuffer<Bf16>> weight_copies(int64_t elements, int minimum_copies = 1) {
  const int64_t bytes = elements * 2;
  const int copies = static_cast<int>(std::max<int64_t>(minimum_copies, (int64_t{512} << 20) / bytes + 1));
  std::vector<DeviceBuffer<Bf16>> out;
  for (int i = 0; i < copies; ++i) {
    out.emplace_back(static_cast<size_t>(elements));
    CUDA_CHECK(cudaMemset(out.back().data(), 0x3c, out.back().bytes()));
  }
  return out;
}

DeviceBuffer<Bf16> filled(int64_t elements) {
  DeviceBuffer<Bf16> out(static_cast<size_t>(elements));
  CUDA_CHECK(cudaMemset(out.data(), 0x3c, out.bytes()));
  return out;
}

std::string cell(double us, double bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%8.2f us %5.2f TB/s", us, bytes / us / 1e6);
  return text;
}

struct Single {
  const char* name;
  int64_t out, in;
};

constexpr Single kSingles[] = {{"q_proj/o_proj", 4096, 4096},  {"k_proj/v_proj", 1024, 4096},
                               {"qkv stacked", 6144, 4096},    {"gate+up stacked", 24576, 4096},
                               {"down_proj", 4096, 12288},     {"lm_head", 151936, 4096}};

void single_weights(const std::vector<int64_t>& rows_list, int repeats, surogate::cuda::Matmul& matmul) {
  std::printf("\n1. one weight: small_m_linear | decode_gemv (rows per block by N) | decode_gemv best R | cuBLASLt\n");
  std::printf("%-16s %7s %6s %2s | %-24s | %-24s | %-28s | %-24s\n", "layer", "N", "K", "M", "small_m", "decode_gemv",
              "decode_gemv best", "cublaslt");
  for (const Single& layer : kSingles) {
    const auto weights = weight_copies(layer.out * layer.in);
    const int copies = static_cast<int>(weights.size());
    DeviceBuffer<Bf16> x = filled(surogate::cuda::kDecodeGemvMaxRows * layer.in),
                       out(static_cast<size_t>(surogate::cuda::kDecodeGemvMaxRows * layer.out));
    for (const int64_t rows : rows_list) {
      const double bytes = static_cast<double>(layer.out * layer.in + rows * (layer.in + layer.out)) * 2;
      const double small_m = time_graph(repeats, copies, [&](int copy, cudaStream_t stream) {
        surogate::cuda::small_m_linear(out.data(), x.data(), weights[static_cast<size_t>(copy)].data(),
                                       static_cast<const Bf16*>(nullptr), static_cast<const Bf16*>(nullptr),
                                       {.rows = rows, .out = layer.out, .in = layer.in}, stream);
      });
      const auto gemv = [&](int rows_per_block) {
        return time_graph(repeats, copies, [&](int copy, cudaStream_t stream) {
          const surogate::cuda::DecodeGemvWeight<Bf16> w{
              .weight = weights[static_cast<size_t>(copy)].data(), .out = out.data(), .rows = layer.out};
          surogate::cuda::decode_gemv(&w, 1, x.data(), {.rows = rows, .in = layer.in, .rows_per_block = rows_per_block},
                                      stream);
        });
      };
      const double automatic = gemv(0);
      double best = 1e30;
      int best_rows = 0;
      for (int rows_per_block : {1, 2, 4}) {
        const double us = gemv(rows_per_block);
        if (us < best) {
          best = us;
          best_rows = rows_per_block;
        }
      }
      const double cublas = time_graph(repeats, copies, [&](int copy, cudaStream_t stream) {
        matmul.run({.m = rows, .n = layer.out, .k = layer.in, .transpose_b = true}, out.data(), x.data(),
                   weights[static_cast<size_t>(copy)].data(), nullptr, stream);
      });
      std::printf("%-16s %7lld %6lld %2lld | %s | %s | R=%d %s | %s\n", layer.name, static_cast<long long>(layer.out),
                  static_cast<long long>(layer.in), static_cast<long long>(rows), cell(small_m, bytes).c_str(),
                  cell(automatic, bytes).c_str(), best_rows, cell(best, bytes).c_str(), cell(cublas, bytes).c_str());
    }
  }
}

void fused_forms(const std::vector<int64_t>& rows_list, int repeats, surogate::cuda::Matmul& matmul) {
  constexpr int64_t kHidden = 4096, kQ = 4096, kKv = 1024, kFfn = 12288;
  std::printf("\n2. fused forms (µs per step of the layer, TB/s of the weights read)\n");
  // q, k, v: one buffer per copy holding the three weights end to end.
  const auto qkv = weight_copies((kQ + 2 * kKv) * kHidden);
  const auto gate_up = weight_copies(2 * kFfn * kHidden);
  DeviceBuffer<Bf16> x = filled(surogate::cuda::kDecodeGemvMaxRows * kHidden),
                     out(static_cast<size_t>(surogate::cuda::kDecodeGemvMaxRows * 2 * kFfn)),
                     act(static_cast<size_t>(surogate::cuda::kDecodeGemvMaxRows * kFfn)),
                     norm_weight = filled(kHidden), normed(static_cast<size_t>(surogate::cuda::kDecodeGemvMaxRows * kHidden));
  DeviceBuffer<float> rstd(static_cast<size_t>(surogate::cuda::kDecodeGemvMaxRows));
  const surogate::cuda::DecodeGemvNorm<Bf16> norm{.weight = norm_weight.data()};
  const auto rmsnorm = [&](cudaStream_t stream, int64_t rows) {
    surogate::cuda::rmsnorm_forward(normed.data(), rstd.data(), x.data(), norm_weight.data(), rows, kHidden, 1e-6f, stream);
  };
  for (const int64_t rows : rows_list) {
    const double qkv_bytes = static_cast<double>((kQ + 2 * kKv) * kHidden) * 2;
    const int qkv_copies = static_cast<int>(qkv.size());
    const auto qkv_weight = [&](int copy, int64_t offset) { return qkv[static_cast<size_t>(copy)].data() + offset * kHidden; };
    const double three = time_graph(repeats, qkv_copies, [&](int copy, cudaStream_t stream) {
      for (const auto& [offset, n] : {std::pair{int64_t{0}, kQ}, std::pair{kQ, kKv}, std::pair{kQ + kKv, kKv}}) {
        surogate::cuda::small_m_linear(out.data() + rows * offset, x.data(), qkv_weight(copy, offset),
                                       static_cast<const Bf16*>(nullptr), static_cast<const Bf16*>(nullptr),
                                       {.rows = rows, .out = n, .in = kHidden}, stream);
      }
    });
    const auto qkv_launch = [&](int copy, cudaStream_t stream, const Bf16* input,
                                const surogate::cuda::DecodeGemvNorm<Bf16>& with) {
      const surogate::cuda::DecodeGemvWeight<Bf16> w[3] = {
          {.weight = qkv_weight(copy, 0), .out = out.data(), .rows = kQ},
          {.weight = qkv_weight(copy, kQ), .out = out.data() + rows * kQ, .rows = kKv},
          {.weight = qkv_weight(copy, kQ + kKv), .out = out.data() + rows * (kQ + kKv), .rows = kKv}};
      surogate::cuda::decode_gemv(w, 3, input, {.rows = rows, .in = kHidden}, stream, with);
    };
    const double one = time_graph(repeats, qkv_copies,
                                  [&](int copy, cudaStream_t stream) { qkv_launch(copy, stream, x.data(), {}); });
    const double norm_then_one = time_graph(repeats, qkv_copies, [&](int copy, cudaStream_t stream) {
      rmsnorm(stream, rows);
      qkv_launch(copy, stream, normed.data(), {});
    });
    const double normed_one = time_graph(repeats, qkv_copies,
                                         [&](int copy, cudaStream_t stream) { qkv_launch(copy, stream, x.data(), norm); });
    std::printf("M=%lld q,k,v:        3 x small_m %s | decode_gemv x3 weights %s\n", static_cast<long long>(rows),
                cell(three, qkv_bytes).c_str(), cell(one, qkv_bytes).c_str());
    std::printf("M=%lld norm,q,k,v:   rmsnorm + decode_gemv %s | decode_gemv with the norm %s\n",
                static_cast<long long>(rows), cell(norm_then_one, qkv_bytes).c_str(), cell(normed_one, qkv_bytes).c_str());

    const double mlp_bytes = static_cast<double>(2 * kFfn * kHidden) * 2;
    const int mlp_copies = static_cast<int>(gate_up.size());
    const auto gate = [&](int copy) { return gate_up[static_cast<size_t>(copy)].data(); };
    const auto up = [&](int copy) { return gate_up[static_cast<size_t>(copy)].data() + kFfn * kHidden; };
    const auto unfused = [&](bool cublas) {
      return time_graph(repeats, mlp_copies, [&](int copy, cudaStream_t stream) {
        for (int half = 0; half < 2; ++half) {
          const Bf16* w = half == 0 ? gate(copy) : up(copy);
          Bf16* y = out.data() + half * rows * kFfn;
          if (cublas) {
            matmul.run({.m = rows, .n = kFfn, .k = kHidden, .transpose_b = true}, y, x.data(), w, nullptr, stream);
          } else {
            surogate::cuda::small_m_linear(y, x.data(), w, static_cast<const Bf16*>(nullptr),
                                           static_cast<const Bf16*>(nullptr), {.rows = rows, .out = kFfn, .in = kHidden},
                                           stream);
          }
        }
        surogate::cuda::swiglu_forward(act.data(), out.data(), out.data() + rows * kFfn, rows, kFfn, kFfn, stream);
      });
    };
    const double with_small_m = unfused(false), with_cublas = unfused(true);
    std::printf("M=%lld gate,up,swiglu: small_m x2 + swiglu %s | cublaslt x2 + swiglu %s\n", static_cast<long long>(rows),
                cell(with_small_m, mlp_bytes).c_str(), cell(with_cublas, mlp_bytes).c_str());
    for (int rows_per_block : {0, 2, 4, 8}) {
      const double fused = time_graph(repeats, mlp_copies, [&](int copy, cudaStream_t stream) {
        surogate::cuda::decode_gemv_swiglu(act.data(), x.data(), gate(copy), up(copy), kFfn,
                                           {.rows = rows, .in = kHidden, .rows_per_block = rows_per_block}, stream);
      });
      std::printf("M=%lld   decode_gemv_swiglu R=%d%s %s\n", static_cast<long long>(rows), rows_per_block,
                  rows_per_block == 0 ? " (auto)" : "       ", cell(fused, mlp_bytes).c_str());
    }
    const double norm_then_mlp = time_graph(repeats, mlp_copies, [&](int copy, cudaStream_t stream) {
      rmsnorm(stream, rows);
      surogate::cuda::decode_gemv_swiglu(act.data(), normed.data(), gate(copy), up(copy), kFfn, {.rows = rows, .in = kHidden},
                                         stream);
    });
    const double normed_mlp = time_graph(repeats, mlp_copies, [&](int copy, cudaStream_t stream) {
      surogate::cuda::decode_gemv_swiglu(act.data(), x.data(), gate(copy), up(copy), kFfn, {.rows = rows, .in = kHidden},
                                         stream, norm);
    });
    std::printf("M=%lld norm,gate,up,swiglu: rmsnorm + decode_gemv_swiglu %s | with the norm %s\n",
                static_cast<long long>(rows), cell(norm_then_mlp, mlp_bytes).c_str(), cell(normed_mlp, mlp_bytes).c_str());
  }
}

// Per row count: the linear chain as the decode graph ran it before the fusion (separate decode
// GEMVs with PDL) and as it runs it now (q/k/v and gate/up/SwiGLU fused, PDL), µs per layer.
struct ChainTimes {
  int64_t rows = 0;
  double separate = 0.0, fused = 0.0;
};

std::vector<ChainTimes> layer_chain(const std::vector<int64_t>& rows_list, int repeats, surogate::cuda::Matmul& matmul) {
  std::vector<ChainTimes> chains;
  constexpr int64_t kHidden = 4096, kQ = 4096, kKv = 1024, kFfn = 12288, kLayers = 36;
  // One layer's weights end to end per copy: q, k, v, o, gate, up, down (386 MiB in bf16).
  constexpr int64_t kQkv = (kQ + 2 * kKv) * kHidden, kO = kQ * kHidden, kGate = kFfn * kHidden;
  const auto layers = weight_copies(kQkv + kO + 3 * kGate, 2);
  const int copies = static_cast<int>(layers.size());
  constexpr int64_t kMaxRows = surogate::cuda::kDecodeGemvMaxRows;
  DeviceBuffer<Bf16> x = filled(kMaxRows * kHidden), norm_weight = filled(kHidden), normed = filled(kMaxRows * kHidden),
                     qkv_out(static_cast<size_t>(kMaxRows * (kQ + 2 * kKv))), h = filled(kMaxRows * kHidden),
                     gate_up(static_cast<size_t>(kMaxRows * 2 * kFfn)), act = filled(kMaxRows * kFfn),
                     out(static_cast<size_t>(kMaxRows * kHidden));
  DeviceBuffer<float> rstd(static_cast<size_t>(kMaxRows));
  const double bytes = static_cast<double>(kQkv + kO + 3 * kGate) * 2;
  std::printf("\n3. one layer's linear chain (no attention), %d layer copies\n", copies);
  for (const int64_t rows : rows_list) {
    const auto weight = [&](int copy, int64_t offset) { return layers[static_cast<size_t>(copy)].data() + offset; };
    const auto small_m = [&](Bf16* y, const Bf16* input, const Bf16* w, int64_t n, int64_t k, cudaStream_t stream) {
      surogate::cuda::small_m_linear(y, input, w, static_cast<const Bf16*>(nullptr), static_cast<const Bf16*>(nullptr),
                                     {.rows = rows, .out = n, .in = k}, stream);
    };
    const double today = time_graph(repeats, copies, [&](int copy, cudaStream_t stream) {
      surogate::cuda::rmsnorm_forward(normed.data(), rstd.data(), x.data(), norm_weight.data(), rows, kHidden, 1e-6f,
                                      stream);
      small_m(qkv_out.data(), normed.data(), weight(copy, 0), kQ, kHidden, stream);
      small_m(qkv_out.data() + rows * kQ, normed.data(), weight(copy, kQ * kHidden), kKv, kHidden, stream);
      small_m(qkv_out.data() + rows * (kQ + kKv), normed.data(), weight(copy, (kQ + kKv) * kHidden), kKv, kHidden,
              stream);
      small_m(h.data(), x.data(), weight(copy, kQkv), kHidden, kQ, stream);
      surogate::cuda::rmsnorm_forward(normed.data(), rstd.data(), h.data(), norm_weight.data(), rows, kHidden, 1e-6f,
                                      stream);
      for (int half = 0; half < 2; ++half) {
        matmul.run({.m = rows, .n = kFfn, .k = kHidden, .transpose_b = true}, gate_up.data() + half * rows * kFfn,
                   normed.data(), weight(copy, kQkv + kO + half * kGate), nullptr, stream);
      }
      surogate::cuda::swiglu_forward(act.data(), gate_up.data(), gate_up.data() + rows * kFfn, rows, kFfn, kFfn, stream);
      matmul.run({.m = rows, .n = kHidden, .k = kFfn, .transpose_b = true}, out.data(), act.data(),
                 weight(copy, kQkv + kO + 2 * kGate), nullptr, stream);
    });
    // The decode GEMVs without folded norms (they lost): q, k, v and gate, up, SwiGLU as separate
    // launches (the linear op's route) or fused (three weights in one launch; decode_gemv_swiglu at 8
    // rows per block), o and down at 4 rows per block with the residual as addend; each with and
    // without the programmatic dependent launch (PDL: a GEMV's weight loads overlap the kernel before).
    const auto decode_chain = [&](bool fused, bool overlap) {
      return time_graph(repeats, copies, [&, fused, overlap](int copy, cudaStream_t stream) {
        const auto gemv = [&](Bf16* y, const Bf16* input, const Bf16* w, int64_t n, int64_t k, const Bf16* addend,
                              int rows_per_block) {
          const surogate::cuda::DecodeGemvWeight<Bf16> product{.weight = w, .out = y, .rows = n, .addend = addend};
          surogate::cuda::decode_gemv(&product, 1, input,
                                      {.rows = rows, .in = k, .rows_per_block = rows_per_block, .overlap_previous = overlap},
                                      stream);
        };
        surogate::cuda::rmsnorm_forward(normed.data(), rstd.data(), x.data(), norm_weight.data(), rows, kHidden, 1e-6f,
                                        stream);
        Bf16* const q = qkv_out.data();
        Bf16* const k = q + rows * kQ;
        Bf16* const v = k + rows * kKv;
        if (fused) {
          const surogate::cuda::DecodeGemvWeight<Bf16> qkv[3] = {
              {.weight = weight(copy, 0), .out = q, .rows = kQ},
              {.weight = weight(copy, kQ * kHidden), .out = k, .rows = kKv},
              {.weight = weight(copy, (kQ + kKv) * kHidden), .out = v, .rows = kKv}};
          surogate::cuda::decode_gemv(qkv, 3, normed.data(), {.rows = rows, .in = kHidden, .overlap_previous = overlap},
                                      stream);
        } else {
          gemv(q, normed.data(), weight(copy, 0), kQ, kHidden, nullptr, 4);
          gemv(k, normed.data(), weight(copy, kQ * kHidden), kKv, kHidden, nullptr, 2);
          gemv(v, normed.data(), weight(copy, (kQ + kKv) * kHidden), kKv, kHidden, nullptr, 2);
        }
        gemv(h.data(), x.data(), weight(copy, kQkv), kHidden, kQ, x.data(), 4);
        surogate::cuda::rmsnorm_forward(normed.data(), rstd.data(), h.data(), norm_weight.data(), rows, kHidden, 1e-6f,
                                        stream);
        const Bf16* gate = weight(copy, kQkv + kO);
        const Bf16* up = weight(copy, kQkv + kO + kGate);
        if (fused) {
          surogate::cuda::decode_gemv_swiglu(act.data(), normed.data(), gate, up, kFfn,
                                             {.rows = rows, .in = kHidden, .rows_per_block = 8, .overlap_previous = overlap},
                                             stream);
        } else {
          gemv(gate_up.data(), normed.data(), gate, kFfn, kHidden, nullptr, 4);
          gemv(gate_up.data() + rows * kFfn, normed.data(), up, kFfn, kHidden, nullptr, 4);
          surogate::cuda::swiglu_forward(act.data(), gate_up.data(), gate_up.data() + rows * kFfn, rows, kFfn, kFfn,
                                         stream);
        }
        gemv(out.data(), act.data(), weight(copy, kQkv + kO + 2 * kGate), kHidden, kFfn, h.data(), 4);
      });
    };
    const auto row = [&](const char* name, double us) {
      std::printf("M=%lld %-34s %s (x%lld: %.2f ms)\n", static_cast<long long>(rows), name, cell(us, bytes).c_str(),
                  static_cast<long long>(kLayers), us * kLayers / 1e3);
    };
    row("today's kernels", today);
    row("decode GEMVs, separate", decode_chain(false, false));
    const ChainTimes times{rows, decode_chain(false, true), decode_chain(true, true)};
    row("decode GEMVs, separate, PDL (old)", times.separate);
    row("decode GEMVs, fused q/k/v, SwiGLU", decode_chain(true, false));
    row("decode GEMVs, fused, PDL (new)", times.fused);
    chains.push_back(times);
  }
  return chains;
}

void greedy(int repeats) {
  constexpr int64_t kVocab = 151936;
  std::printf("\n4. greedy_tokens, one row of %lld bf16 logits (in the L2)\n", static_cast<long long>(kVocab));
  DeviceBuffer<Bf16> logits = filled(kVocab);
  DeviceBuffer<int32_t> tokens(1);
  const double bytes = static_cast<double>(kVocab) * 2;
  const double one_block = time_graph(repeats, 1, [&](int, cudaStream_t stream) {
    surogate::cuda::greedy_tokens_one_block(tokens.data(), logits.data(), 1, kVocab, stream);
  });
  const double cluster = time_graph(repeats, 1, [&](int, cudaStream_t stream) {
    surogate::cuda::greedy_tokens(tokens.data(), logits.data(), 1, kVocab, stream);
  });
  std::printf("one block per row %s | greedy_tokens (cluster on sm_90+) %s\n", cell(one_block, bytes).c_str(),
              cell(cluster, bytes).c_str());
}

// Section 5 (see the top): µs per layer of the kernels between the products, and the estimate.
struct RestTimes {
  double attention = 0.0, norm_rope = 0.0, norm_rope_pair = 0.0;
};

// The cached attention of `rows` rows at `context` cached tokens (append, split-K, combine) and the
// q and k norm + RoPE launches, as the decode graph runs them; 36 layers' caches cycled so that the
// keys and values come from HBM as in a step (the weights between them evict the L2).
RestTimes layer_rest(int64_t rows, int64_t context, int repeats) {
  constexpr int kQHeads = 32, kKvHeads = 8, kHeadDim = 128, kLayers = 36;
  surogate::cuda::CachedAttentionShape shape;
  shape.batch = shape.slots = rows;
  shape.sequence = 1;
  shape.capacity = context;
  shape.q_heads = kQHeads;
  shape.kv_heads = kKvHeads;
  shape.head_dim = kHeadDim;
  const int splits = surogate::cuda::cached_attention_splits(shape);
  const int64_t cache = rows * context * kKvHeads * kHeadDim;
  DeviceBuffer<Bf16> k_caches = filled(kLayers * cache), v_caches = filled(kLayers * cache),
                     q = filled(rows * kQHeads * kHeadDim), k = filled(rows * kKvHeads * kHeadDim),
                     v = filled(rows * kKvHeads * kHeadDim), out(static_cast<size_t>(rows * kQHeads * kHeadDim)),
                     q_weight = filled(kHeadDim), k_weight = filled(kHeadDim);
  DeviceBuffer<float> workspace(static_cast<size_t>(surogate::cuda::cached_attention_workspace_floats(shape, splits))),
      rstd(static_cast<size_t>(rows * (kQHeads + kKvHeads))), inv_freq(kHeadDim / 2);
  CUDA_CHECK(cudaMemset(inv_freq.data(), 0, inv_freq.bytes()));
  std::vector<int32_t> slots(static_cast<size_t>(rows)), lengths(slots.size(), static_cast<int32_t>(context - 1)),
      fresh(slots.size(), 1);
  for (int64_t r = 0; r < rows; ++r) slots[static_cast<size_t>(r)] = static_cast<int32_t>(r);
  DeviceBuffer<int32_t> slot_ids(slots.size()), cache_lengths(slots.size()), new_lengths(slots.size()),
      positions(slots.size());
  CUDA_CHECK(cudaMemcpy(slot_ids.data(), slots.data(), slot_ids.bytes(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(cache_lengths.data(), lengths.data(), cache_lengths.bytes(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(new_lengths.data(), fresh.data(), new_lengths.bytes(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(positions.data(), lengths.data(), positions.bytes(), cudaMemcpyHostToDevice));
  RestTimes times;
  times.attention = time_graph(repeats, kLayers, [&](int copy, cudaStream_t stream) {
    Bf16* k_cache = k_caches.data() + copy * cache;
    Bf16* v_cache = v_caches.data() + copy * cache;
    surogate::cuda::cached_attention_append(k_cache, v_cache, k.data(), v.data(), slot_ids.data(), cache_lengths.data(),
                                            new_lengths.data(), shape, stream);
    surogate::cuda::cached_attention_forward(out.data(), workspace.data(), q.data(), k_cache, v_cache, slot_ids.data(),
                                             cache_lengths.data(), new_lengths.data(), shape, splits, stream);
  });
  times.norm_rope = time_graph(repeats, 1, [&](int, cudaStream_t stream) {
    surogate::cuda::qk_norm_rope_forward(q.data(), rstd.data(), q.data(), q_weight.data(), inv_freq.data(),
                                         positions.data(), {.tokens = rows, .heads = kQHeads, .head_dim = kHeadDim},
                                         stream);
    surogate::cuda::qk_norm_rope_forward(k.data(), rstd.data(), k.data(), k_weight.data(), inv_freq.data(),
                                         positions.data(), {.tokens = rows, .heads = kKvHeads, .head_dim = kHeadDim},
                                         stream);
  });
  times.norm_rope_pair = time_graph(repeats, 1, [&](int, cudaStream_t stream) {
    surogate::cuda::qk_norm_rope_forward_pair(
        surogate::cuda::QkNormRopeTensor<Bf16>{q.data(), rstd.data(), q.data(), q_weight.data()},
        surogate::cuda::QkNormRopeTensor<Bf16>{k.data(), rstd.data() + rows * kQHeads, k.data(), k_weight.data()},
        inv_freq.data(), positions.data(), {.tokens = rows, .heads = kQHeads, .head_dim = kHeadDim}, kKvHeads, stream);
  });
  return times;
}

void layer_estimate(const std::vector<ChainTimes>& chains, const std::vector<int64_t>& contexts, int repeats) {
  constexpr int64_t kHidden = 4096, kVocab = 151936, kLayers = 36;
  std::printf("\n5. a whole layer (µs): linear chain (section 3, PDL) + cached attention + q/k norm + RoPE;\n"
              "   old = separate q/k/v and gate/up GEMVs, new = fused; per step: x%lld layers + LM head + greedy\n",
              static_cast<long long>(kLayers));
  const auto head = weight_copies(kVocab * kHidden);
  DeviceBuffer<Bf16> x = filled(surogate::cuda::kDecodeGemvMaxRows * kHidden),
                     logits(static_cast<size_t>(surogate::cuda::kDecodeGemvMaxRows * kVocab));
  DeviceBuffer<int32_t> tokens(static_cast<size_t>(surogate::cuda::kDecodeGemvMaxRows));
  for (const ChainTimes& chain : chains) {
    const double lm_head = time_graph(repeats / 4 + 1, static_cast<int>(head.size()), [&](int copy, cudaStream_t stream) {
      surogate::cuda::small_m_linear(logits.data(), x.data(), head[static_cast<size_t>(copy)].data(),
                                     static_cast<const Bf16*>(nullptr), static_cast<const Bf16*>(nullptr),
                                     {.rows = chain.rows, .out = kVocab, .in = kHidden}, stream);
      surogate::cuda::greedy_tokens(tokens.data(), logits.data(), chain.rows, kVocab, stream);
    });
    std::printf("M=%lld LM head + greedy_tokens %8.2f us\n", static_cast<long long>(chain.rows), lm_head);
    for (const int64_t context : contexts) {
      const RestTimes rest = layer_rest(chain.rows, context, repeats);
      // No new attention kernel yet (old = new); the new norm + RoPE is the pair launch.
      const double old_layer = chain.separate + rest.attention + rest.norm_rope;
      const double new_layer = chain.fused + rest.attention + rest.norm_rope_pair;
      const auto steps = [&](double layer) { return 1e6 / (static_cast<double>(kLayers) * layer + lm_head); };
      std::printf("M=%lld context %5lld: attention old %6.2f new %6.2f | norm+rope old %5.2f new %5.2f | "
                  "chain old %6.2f new %6.2f | layer old %6.2f new %6.2f | steps/s old %6.1f new %6.1f\n",
                  static_cast<long long>(chain.rows), static_cast<long long>(context), rest.attention, rest.attention,
                  rest.norm_rope, rest.norm_rope_pair, chain.separate, chain.fused, old_layer, new_layer, steps(old_layer),
                  steps(new_layer));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> rows_list = {1, 2};
  int repeats = 200;
  // The cached context of section 5: the middle and the end of the 512 + 256 token run of
  // bench/generate_decode.sh, and a long one.
  const std::vector<int64_t> contexts = {640, 768, 4096};
  if (!surogate::bench::parse_rows_and_repeats(argc, argv, "decode_kernels_bench", rows_list, repeats)) return 2;
  for (const int64_t rows : rows_list) {
    if (rows < 1 || rows > surogate::cuda::kDecodeGemvMaxRows) {
      std::fprintf(stderr, "decode_kernels_bench: --rows takes 1 or 2, not %lld\n", static_cast<long long>(rows));
      return 2;
    }
  }
  std::printf("decode_kernels_bench: µs per launch in a replayed CUDA graph; HBM peak ~%.1f TB/s\n", kHbmTbs);
  surogate::cuda::Matmul matmul;
  single_weights(rows_list, repeats, matmul);
  fused_forms(rows_list, repeats, matmul);
  const std::vector<ChainTimes> chains = layer_chain(rows_list, repeats, matmul);
  greedy(repeats);
  layer_estimate(chains, contexts, repeats);
  CUDA_CHECK(cudaDeviceSynchronize());
  return 0;
}
