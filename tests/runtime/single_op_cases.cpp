// The single-op cases; see single_op_cases.h. Shapes are small but keep the CUDA kernels' fast
// paths reachable (channels multiples of 8, head_dim 32, in / out multiples of 8 for the grouped
// GEMMs); values are uniform in [-1, 1] unless a builder says otherwise.
#include "runtime/single_op_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/token_draw.h"

namespace surogate::testing {
namespace {

using graph::TensorType;
constexpr DType kBf16 = DType::BF16;
constexpr DType kF32 = DType::F32;
constexpr DType kI32 = DType::I32;
constexpr DType kU8 = DType::U8;
constexpr DType kF8 = DType::F8_E4M3;

constexpr int64_t kRows = 6, kChannels = 64, kOut = 32, kVocab = 96;
constexpr int64_t kHeads = 2, kHeadDim = 32, kTopK = 2, kExperts = 4;

InputValues uniform(double low, double high) {
  return [low, high](size_t count, std::mt19937& random) {
    std::uniform_real_distribution<double> distribution(low, high);
    std::vector<double> values(count);
    for (double& value : values) value = distribution(random);
    return values;
  };
}
// Integers in [low, high).
InputValues integers(int64_t low, int64_t high) {
  return [low, high](size_t count, std::mt19937& random) {
    std::uniform_int_distribution<int64_t> distribution(low, high - 1);
    std::vector<double> values(count);
    for (double& value : values) value = static_cast<double>(distribution(random));
    return values;
  };
}
InputValues fixed(std::vector<double> given) {
  return [given](size_t count, std::mt19937&) {
    std::vector<double> values(count);
    for (size_t i = 0; i < count; ++i) values[i] = given[i % given.size()];
    return values;
  };
}
// Labels below the vocabulary, one ignored (−100).
InputValues labels() {
  return [](size_t count, std::mt19937& random) {
    std::vector<double> values = integers(0, kVocab)(count, random);
    values[count / 2] = -100;
    return values;
  };
}

// The 8 I32 words of a RowSampling (sample_tokens' params), floats by their bits.
InputValues row_sampling_words(const RowSampling& row) {
  int32_t words[kRowSamplingWords];
  std::memcpy(words, &row, sizeof(words));
  return fixed(std::vector<double>(words, words + kRowSamplingWords));
}

// E4M3 byte codes of finite values: any sign and mantissa, exponent fields 0..11 (magnitudes
// below 2^5), so never the NaN codes 0x7F / 0xFF.
InputValues e4m3_codes() {
  return [](size_t count, std::mt19937& random) {
    std::uniform_int_distribution<int> sign(0, 1), exponent(0, 11), mantissa(0, 7);
    std::vector<double> values(count);
    for (double& value : values) value = sign(random) * 128 + exponent(random) * 8 + mantissa(random);
    return values;
  };
}

// A routing table of kRows tokens × kTopK distinct experts, and moe_dispatch's answer for it
// (a stable sort of the assignments by expert): order [M], position [tokens, k], offsets [E + 1].
struct Routing {
  std::vector<double> indices, order, position, offsets;
};
Routing routing() {
  Routing r;
  r.indices = {0, 1, 2, 3, 1, 0, 3, 2, 0, 2, 1, 3};
  const size_t assignments = r.indices.size();
  r.position.assign(assignments, 0);
  for (int64_t expert = 0; expert < kExperts; ++expert) {
    r.offsets.push_back(static_cast<double>(r.order.size()));
    for (size_t a = 0; a < assignments; ++a) {
      if (r.indices[a] != static_cast<double>(expert)) continue;
      r.position[a] = static_cast<double>(r.order.size());
      r.order.push_back(static_cast<double>(a));
    }
  }
  r.offsets.push_back(static_cast<double>(assignments));
  return r;
}

std::vector<double> inverse_frequencies(int64_t head_dim = kHeadDim) {
  std::vector<double> values;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    values.push_back(static_cast<float>(1.0 / std::pow(10000.0, 2.0 * static_cast<double>(i) / head_dim)));
  }
  return values;
}

// Three sections over the head_dim / 2 frequencies, as mrope_section splits them.
std::vector<int64_t> mrope_section() {
  const int64_t half = kHeadDim / 2, temporal = half / 4, height = (half - temporal) / 2;
  return {temporal, height, half - temporal - height};
}

std::vector<SingleOpCase> make_cases() {
  const TensorType x{kBf16, {kRows, kChannels}};
  const TensorType narrow{kBf16, {kRows, kOut}};
  const TensorType weight{kBf16, {kOut, kChannels}};
  const TensorType norm_weight{kBf16, {kChannels}};
  const TensorType rstd{kF32, {kRows}};
  const TensorType f32_x{kF32, {kRows, kChannels}};
  const TensorType positions{kI32, {kRows}};
  const TensorType tables{kBf16, {kRows, kHeadDim / 2}};  // rope's tables take x's dtype
  const TensorType hidden{kBf16, {kRows, kChannels}};
  const TensorType head{kBf16, {kVocab, kChannels}};
  const TensorType targets{kI32, {kRows}};
  const TensorType scalar{kF32, {}};
  const TensorType q{kBf16, {1, 8, kHeads, kHeadDim}};
  const TensorType kv{kBf16, {1, 8, 1, kHeadDim}};
  const Routing table = routing();
  const int64_t assignments = kRows * kTopK;
  const TensorType indices{kI32, {kRows, kTopK}};
  const TensorType order{kI32, {assignments}};
  const TensorType offsets{kI32, {kExperts + 1}};
  const TensorType permuted{kBf16, {assignments, kChannels}};
  const TensorType expert_weight{kBf16, {kExperts, kOut, kChannels}};
  const TensorType route_weights{kF32, {kRows, kTopK}};
  const TensorType probs{kF32, {kRows, 8}};
  const nlohmann::json rope_attrs{{"heads", kHeads}, {"head_dim", kHeadDim}, {"inv_freq", inverse_frequencies()},
                                  {"attention_scaling", 1.0}};
  nlohmann::json norm_rope_attrs = rope_attrs;
  norm_rope_attrs["eps"] = 1e-6;
  nlohmann::json qk_norm_rope_attrs = norm_rope_attrs;
  qk_norm_rope_attrs["kv_heads"] = 1;
  const InputValues token_positions = fixed({0, 1, 2, 3, 0, 1});
  const InputValues positive = uniform(0.5, 1.5);
  const InputValues angles = uniform(-1.0, 1.0);
  const InputValues unit = {};
  // Logsumexps a little above the largest logit (|hidden · w| stays below ~8 here).
  const InputValues seed = fixed({1234});
  const TensorType fp8_x{kBf16, {16, kChannels}};
  const TensorType fp8_d_out{kBf16, {16, kOut}};
  const TensorType fp8_codes{kF8, {16, kChannels}};
  const TensorType d_codes{kF8, {16, kOut}};
  const TensorType w_t{kF8, {kChannels, kOut}};
  const TensorType scale_inv{kF32, {1}};
  const TensorType state{kF32, {1, 4}};
  const InputValues scales = uniform(0.01, 0.05);
  const InputValues zeros = fixed({0.0});

  return {
      // Core ops (graph/core_ops.cpp): F32, and the bf16 forms the low-precision graphs use.
      {"add", {f32_x, f32_x}},
      {"add", {x, x}},
      {"mul", {f32_x, f32_x}},
      {"mul", {x, x}},
      {"scale", {f32_x}, {{"factor", 0.37}}},
      {"scale", {x}, {{"factor", 0.37}}},
      {"scale_by", {f32_x, TensorType{kF32, {}}}},
      {"scale_rows", {f32_x, TensorType{kF32, {kRows}}}},
      {"scale_rows", {x, TensorType{kBf16, {kRows}}}},
      {"fill", {}, {{"value", 0.25}, {"shape", {kRows, kChannels}}}},
      {"fill", {}, {{"value", 0.25}, {"shape", {kRows, kChannels}}, {"dtype", "BF16"}}},
      {"sum", {f32_x}},
      {"sum", {x}},
      {"broadcast", {TensorType{kF32, {}}}, {{"shape", {kRows, kChannels}}}},
      {"accumulate", {f32_x}},
      {"accumulate", {x}},
      {"scale_by", {x, TensorType{kF32, {}}}},
      // Model ops (src/ops/defs/).
      {"embedding", {TensorType{kI32, {kRows}}, TensorType{kBf16, {kVocab, kChannels}}}, {},
       {integers(0, kVocab), unit}},
      {"embedding_backward", {TensorType{kI32, {kRows}}, x, TensorType{kBf16, {kVocab, kChannels}}}, {},
       {fixed({3, 7, 3, 50, 7, 95}), unit, unit}},
      {"rmsnorm", {x, norm_weight}, {{"eps", 1e-6}}},
      {"rmsnorm_backward", {x, x, norm_weight, rstd}, {}, {unit, unit, unit, positive}},
      {"fused_residual_rmsnorm", {x, x, norm_weight}, {{"eps", 1e-6}}},
      {"fused_residual_rmsnorm_backward", {x, x, norm_weight, rstd}, {}, {unit, unit, unit, positive}},
      {"fused_rmsnorm_rope", {x, TensorType{kBf16, {kHeadDim}}, positions}, norm_rope_attrs,
       {unit, unit, token_positions}},
      // q (2 heads) and k (1 head) of one layer in one pair launch on CUDA.
      {"fused_qk_rmsnorm_rope",
       {x, TensorType{kBf16, {kHeadDim}}, TensorType{kBf16, {kRows, kHeadDim}}, TensorType{kBf16, {kHeadDim}}, positions},
       qk_norm_rope_attrs, {unit, unit, unit, unit, token_positions}},
      {"fused_rmsnorm_rope_backward", {x, x, TensorType{kBf16, {kHeadDim}}, TensorType{kF32, {kRows * kHeads}}, positions},
       norm_rope_attrs, {unit, unit, unit, positive, token_positions}},
      {"linear", {x, weight}},
      {"linear_add", {x, weight, narrow}},
      // A decode step's products (≤ 2 rows, both sides ≥ 256; N = 264 ends in a partial block):
      // on CUDA the decode GEMV (cuda/kernels/decode_gemv.h) with a bias (4 rows per block), a
      // scale (2), an addend (4); the small-M kernel (cuda/kernels/small_m_linear.h) for an LM-head-wide one.
      {"linear", {TensorType{kBf16, {2, 512}}, TensorType{kBf16, {264, 512}}, TensorType{kBf16, {264}}}},
      {"linear", {TensorType{kBf16, {1, 1, 512}}, TensorType{kBf16, {264, 512}}}, {{"scale", 0.5}}},
      {"linear_add", {TensorType{kBf16, {2, 1, 512}}, TensorType{kBf16, {264, 512}}, TensorType{kBf16, {2, 1, 264}}}},
      {"linear", {TensorType{kBf16, {1, 256}}, TensorType{kBf16, {32776, 256}}}},
      {"linear_backward_input", {narrow, weight}},
      {"linear_backward_input_add", {narrow, weight, x}},
      {"linear_backward_weight", {narrow, x}},
      {"linear_backward_weight_accumulate", {narrow, x}},
      {"linear_backward", {narrow, x, weight}},
      {"linear_backward_low_rank", {x, TensorType{kBf16, {kRows, 16}}, TensorType{kBf16, {kChannels, 16}}}},
      {"linear_backward_low_rank_accumulate",
       {x, TensorType{kBf16, {kRows, 16}}, TensorType{kBf16, {kChannels, 16}}}},
      {"bias_gradient", {x}},
      {"concat", {TensorType{kBf16, {kRows, 16}}, TensorType{kBf16, {kRows, 48}}}, {{"axis", -1}}},
      {"split", {x}, {{"axis", -1}, {"sizes", {16, 48}}}},
      {"reshape", {x}, {{"shape", {kRows / 2, 2 * kChannels}}}},
      // Prompt sharing's gathers (data/prompt_sharing.h): 4 shared tokens, 6 packed ones (token 0
      // copied twice, one padding); 16-byte rows and 6-byte ones (the element-wise path).
      {"gather_rows", {TensorType{kBf16, {1, 4, 8, 8}}, TensorType{kI32, {1, 6}}, TensorType{kI32, {1, 4, 2}}}, {},
       {unit, fixed({0, 1, 2, 0, 3, -1}), fixed({0, 3, 1, -1, 2, -1, 4, -1})}},
      {"gather_rows", {TensorType{kBf16, {1, 4, 3}}, TensorType{kI32, {1, 6}}, TensorType{kI32, {1, 4, 2}}}, {},
       {unit, fixed({0, 1, 2, 0, 3, -1}), fixed({0, 3, 1, -1, 2, -1, 4, -1})}},
      {"gather_rows_sum", {TensorType{kBf16, {1, 6, 64}}, TensorType{kI32, {1, 4, 2}}}, {},
       {unit, fixed({0, 3, 1, -1, 2, -1, 4, -1})}},
      {"gather_rows_sum", {TensorType{kBf16, {1, 6, 3}}, TensorType{kI32, {1, 4, 2}}}, {},
       {unit, fixed({0, 3, 1, -1, 2, -1, 4, -1})}},
      {"swiglu", {x, x}},
      {"swiglu_backward", {x, x, x}},
      {"swiglu_fused", {TensorType{kBf16, {kRows, 2 * kChannels}}}},
      {"swiglu_fused_backward", {x, TensorType{kBf16, {kRows, 2 * kChannels}}}},
      {"gelu", {x}},
      {"gelu", {x}, {{"approximate", "tanh"}}},
      {"gelu_backward", {x, x}},
      {"gelu_backward", {x, x}, {{"approximate", "tanh"}}},
      {"gelu", {x}, {{"approximate", "quick"}}},
      {"gelu_backward", {x, x}, {{"approximate", "quick"}}},
      {"layernorm", {x, norm_weight}, {{"eps", 1e-5}}},
      {"layernorm", {x, norm_weight, norm_weight}, {{"eps", 1e-5}}},
      {"layernorm_backward", {x, x, norm_weight, rstd, rstd}, {{"bias_grad", true}},
       {unit, unit, unit, uniform(-0.5, 0.5), positive}},
      {"layernorm_backward", {x, x, norm_weight, rstd, rstd}, {{"weight_grad", false}},
       {unit, unit, unit, uniform(-0.5, 0.5), positive}},
      {"rope_cos_sin", {positions}, {{"inv_freq", inverse_frequencies()}, {"attention_scaling", 1.0}},
       {token_positions}},
      // M-RoPE: an image's 2 x 3 grid after two text tokens, then text again (vision/mrope_positions.h).
      {"mrope_cos_sin", {TensorType{kI32, {3, kRows}}},
       {{"inv_freq", inverse_frequencies()}, {"mrope_section", mrope_section()}},
       {fixed({0, 1, 2, 2, 2, 5, 0, 1, 2, 2, 3, 5, 0, 1, 2, 3, 4, 5})}},
      // Qwen3-VL's interleaved layout over the same positions.
      {"mrope_cos_sin", {TensorType{kI32, {3, kRows}}},
       {{"inv_freq", inverse_frequencies()}, {"mrope_section", mrope_section()}, {"mrope_interleaved", true}},
       {fixed({0, 1, 2, 2, 2, 5, 0, 1, 2, 2, 3, 5, 0, 1, 2, 3, 4, 5})}},
      {"rope", {x, tables, tables}, {{"heads", kHeads}, {"head_dim", kHeadDim}}, {unit, angles, angles}},
      {"rope_backward", {x, tables, tables}, {{"heads", kHeads}, {"head_dim", kHeadDim}}, {unit, angles, angles}},
      {"fused_rope", {x, positions}, rope_attrs, {unit, token_positions}},
      {"fused_rope_backward", {x, positions}, rope_attrs, {unit, token_positions}},
      {"attention", {q, kv, kv}},
      {"attention_backward", {q, kv, kv, q, TensorType{kF32, {1, kHeads, 8}}, q}, {},
       {unit, unit, unit, unit, uniform(1.5, 2.5), unit}},
      // Bidirectional (a vision tower's), whole and within three documents (windows).
      {"attention", {q, kv, kv}, {{"causal", false}}},
      {"attention", {q, kv, kv, TensorType{kI32, {1, 8}}}, {{"causal", false}},
       {unit, unit, unit, fixed({0, 0, 0, 1, 1, 1, 1, 2})}},
      {"attention_backward", {q, kv, kv, q, TensorType{kF32, {1, kHeads, 8}}, q}, {{"causal", false}},
       {unit, unit, unit, unit, uniform(2.0, 3.0), unit}},
      {"attention_backward", {q, kv, kv, TensorType{kI32, {1, 8}}, q, TensorType{kF32, {1, kHeads, 8}}, q},
       {{"causal", false}}, {unit, unit, unit, fixed({0, 0, 0, 1, 1, 1, 1, 2}), unit, uniform(1.0, 2.0), unit}},
      // Two rows over a cache of 3 slots × 16 positions: slot 2 holding 5 tokens gets 4 new ones,
      // slot 0 (empty) 3 and one padding position; the caches are plain inputs here (written in place).
      {"cached_attention",
       {TensorType{kBf16, {2, 4, kHeads, kHeadDim}}, TensorType{kBf16, {2, 4, 1, kHeadDim}},
        TensorType{kBf16, {2, 4, 1, kHeadDim}}, TensorType{kBf16, {3, 16, 1, kHeadDim}},
        TensorType{kBf16, {3, 16, 1, kHeadDim}}, TensorType{kI32, {2}}, TensorType{kI32, {2}}, TensorType{kI32, {2}}},
       {{"window", 6}},
       {unit, unit, unit, unit, unit, fixed({2, 0}), fixed({5, 0}), fixed({4, 3})}},
      // The same with the q/k norm + RoPE before it as one node (decode_fusion.h): through the pair
      // launch and the attention on CUDA (head_dim 32); and one token of one row at head_dim 64 over
      // a slot holding 40, 4 / 2 heads, where the attention's split blocks normalise themselves.
      {"qk_norm_rope_cached_attention",
       {TensorType{kBf16, {2, 4, kHeads, kHeadDim}}, TensorType{kBf16, {2, 4, 1, kHeadDim}},
        TensorType{kBf16, {2, 4, 1, kHeadDim}}, TensorType{kBf16, {3, 16, 1, kHeadDim}},
        TensorType{kBf16, {3, 16, 1, kHeadDim}}, TensorType{kI32, {2}}, TensorType{kI32, {2}}, TensorType{kI32, {2}},
        TensorType{kBf16, {kHeadDim}}, TensorType{kBf16, {kHeadDim}}, TensorType{kI32, {8}}},
       {{"window", 6}, {"eps", 1e-6}, {"inv_freq", inverse_frequencies()}, {"attention_scaling", 1.0}},
       {unit, unit, unit, unit, unit, fixed({2, 0}), fixed({5, 0}), fixed({4, 3}), positive, positive,
        fixed({5, 6, 7, 8, 0, 1, 2, 3})}},
      {"qk_norm_rope_cached_attention",
       {TensorType{kBf16, {1, 1, 4, 64}}, TensorType{kBf16, {1, 1, 2, 64}}, TensorType{kBf16, {1, 1, 2, 64}},
        TensorType{kBf16, {2, 48, 2, 64}}, TensorType{kBf16, {2, 48, 2, 64}}, TensorType{kI32, {1}}, TensorType{kI32, {1}},
        TensorType{kI32, {1}}, TensorType{kBf16, {64}}, TensorType{kBf16, {64}}, TensorType{kI32, {1}}},
       {{"eps", 1e-6}, {"inv_freq", inverse_frequencies(64)}, {"attention_scaling", 1.0}},
       {unit, unit, unit, unit, unit, fixed({1}), fixed({40}), fixed({1}), positive, positive, fixed({40})}},
      // Generation's greedy choice: the same index on both backends for the same (bf16-exact) values.
      {"greedy_tokens", {TensorType{kBf16, {kRows, kVocab}}}},
      {"greedy_tokens", {TensorType{kF32, {2, 1, kVocab}}}},
      // A decode step's fused products (ops/defs/decode_linear_def.cpp): at one or two rows one
      // decode GEMV launch on CUDA (q, k, v-like widths, N = 264 ending in a partial block, adapter
      // addends on some weights); at six rows the cuBLASLt fallback.
      {"linear_group",
       {TensorType{kBf16, {1, 1, 512}}, TensorType{kBf16, {264, 512}}, TensorType{kBf16, {72, 512}},
        TensorType{kBf16, {72, 512}}, TensorType{kBf16, {1, 1, 264}}, TensorType{kBf16, {1, 1, 72}}},
       {{"addends", {1, 0, 1}}}},
      {"linear_group", {x, TensorType{kBf16, {kOut, kChannels}}, TensorType{kBf16, {16, kChannels}}}},
      {"linear_swiglu",
       {TensorType{kBf16, {2, 512}}, TensorType{kBf16, {264, 512}}, TensorType{kBf16, {264, 512}},
        TensorType{kBf16, {2, 264}}, TensorType{kBf16, {2, 264}}},
       {{"addends", {1, 1}}}},
      // 2 · 4102 gate and up rows: 8 rows per block (4 columns), the last block partial.
      {"linear_swiglu", {TensorType{kBf16, {1, 512}}, TensorType{kBf16, {4102, 512}}, TensorType{kBf16, {4102, 512}}}},
      {"linear_swiglu",
       {x, TensorType{kBf16, {kOut, kChannels}}, TensorType{kBf16, {kOut, kChannels}}, TensorType{kBf16, {kRows, kOut}}},
       {{"addends", {0, 1}}}},
      // An unmerged adapter's two products (ops/defs/low_rank_products_def.cpp): on CUDA the two
      // kernels (three adapters of ranks 16, 16, 32 over 37 rows — not a multiple of 16 — widths
      // ending in a partial 128-column chunk; one adapter of rank 64 over 130 rows), and the
      // cuBLASLt fallback (rank 8: not a multiple of 16).
      {"low_rank_products",
       {TensorType{kBf16, {37, 512}}, TensorType{kBf16, {16, 512}}, TensorType{kBf16, {16, 512}},
        TensorType{kBf16, {32, 512}}, TensorType{kBf16, {264, 16}}, TensorType{kBf16, {72, 16}},
        TensorType{kBf16, {136, 32}}},
       {{"scale", 2.0}}},
      {"low_rank_products", {TensorType{kBf16, {2, 65, 256}}, TensorType{kBf16, {64, 256}}, TensorType{kBf16, {1000, 64}}},
       {{"scale", 0.5}}},
      {"low_rank_products", {x, TensorType{kBf16, {8, kChannels}}, TensorType{kBf16, {kOut, 8}}}, {{"scale", 2.0}}},
      // Generation's sampled choice: the same token on both backends (every option on; the
      // context ids include -1 and ids past the vocabulary, which are ignored).
      {"sample_tokens",
       {TensorType{kBf16, {kRows, kVocab}}, TensorType{kI32, {kRows, kRowSamplingWords}}, TensorType{kI32, {kRows, 5}}},
       {},
       {uniform(-4, 4), row_sampling_words({0.7f, 1.3f, 40, 0.9f, std::log(0.01f), 5, 77}), integers(-1, kVocab + 4)}},
      // Output 1, logsumexp, is backend-private: the CUDA loss ops write it as zeros (their backward
      // recomputes it, runtime/cuda_loss_ops.cpp), so only the loss and the gradients are compared.
      {"lm_head_loss", {hidden, head, targets, scalar}, {}, {unit, unit, labels(), fixed({0.25})}, {1}},
      {"lm_head_loss_with_input_grad", {hidden, head, targets, scalar}, {}, {unit, unit, labels(), fixed({0.25})},
       {1}},
      {"lm_head_loss_with_grads", {hidden, head, targets, scalar}, {}, {unit, unit, labels(), fixed({0.25})}, {1}},
      // Preference tuning: two sequences over the rows (one row of none); logsumexp is backend-private as above.
      {"sequence_logps", {hidden, head, targets, targets}, {{"sequences", 2}},
       {unit, unit, labels(), fixed({0, 0, 1, -1, 1, 1})}, {2}},
      {"preference_loss", {TensorType{kF32, {4}}, TensorType{kF32, {4}}, TensorType{kF32, {4}}, TensorType{kF32, {2}},
                           TensorType{kF32, {2}}},
       {{"type", "dpo"}, {"beta", 0.1}},
       {uniform(-3.0, -1.0), uniform(-3.0, -1.0), fixed({3, 2, 4, 1}), fixed({1}), fixed({0.5, 0.1})}},
      {"preference_loss_backward", {TensorType{kF32, {4}}, TensorType{kF32, {4}}, TensorType{kF32, {4}},
                                    TensorType{kF32, {2}}, TensorType{kF32, {2}}, scalar},
       {{"type", "orpo"}, {"beta", 0.1}},
       {uniform(-3.0, -1.0), uniform(-3.0, -1.0), fixed({3, 2, 4, 1}), fixed({1}), fixed({0.5, 0.1}), fixed({1})}},
      {"dropout", {x, TensorType{kI32, {}}}, {{"p", 0.1}, {"stream", 3}}, {unit, seed}},
      {"dropout", {f32_x, TensorType{kI32, {}}}, {{"p", 0.1}, {"stream", 3}}, {unit, seed}},
      {"dropout_add", {x, TensorType{kI32, {}}, x}, {{"p", 0.1}, {"stream", 3}}, {unit, seed, unit}},
      // Quantized frozen weights (QLoRA): random codes are valid blocks, scales positive.
      {"dequantize_nf4", {TensorType{kU8, {kOut * kChannels / 2}}, TensorType{kF32, {kOut * kChannels / 64}}},
       {{"shape", {kOut, kChannels}}, {"block_size", 64}, {"dtype", "BF16"}}, {integers(0, 256), uniform(0.5, 2.0)}},
      {"dequantize_fp8_blocks", {TensorType{kF8, {kOut, kChannels}}, TensorType{kF32, {1, 2}}},
       {{"block_size", 32}, {"dtype", "BF16"}}, {e4m3_codes(), uniform(0.01, 0.1)}},
      {"dequantize_fp4",
       {TensorType{kU8, {kOut, kChannels / 2}}, TensorType{kF8, {kOut, kChannels / 16}}, TensorType{kF32, {1}}},
       {{"shape", {kOut, kChannels}}, {"dtype", "BF16"}}, {integers(0, 256), e4m3_codes(), fixed({0.5})}},
      // The fp8_hybrid recipe's products on given codes and scales (16 rows: FP8 tensor-core shapes);
      // a zero scaling state (no step recorded yet) makes a gradient's quantization use its own amax.
      {"quantize_fp8", {fp8_x}, {{"format", "e4m3"}, {"site", 0}}},
      {"quantize_fp8", {fp8_x, state}, {{"format", "e5m2"}, {"site", 0}}, {unit, zeros}},
      {"quantize_fp8_weight", {weight}},
      {"transpose_fp8", {fp8_codes}, {}, {e4m3_codes()}},
      {"linear_fp8", {fp8_x, fp8_codes, scale_inv, TensorType{kF8, {kOut, kChannels}}, w_t, scale_inv}, {},
       {unit, e4m3_codes(), scales, e4m3_codes(), e4m3_codes(), scales}},
      {"linear_fp8_backward_input", {fp8_d_out, w_t, scale_inv, state}, {{"site", 0}, {"format", "e5m2"}},
       {unit, e4m3_codes(), scales, zeros}},
      {"linear_fp8_backward", {fp8_d_out, fp8_codes, scale_inv, w_t, scale_inv, state}, {{"site", 0}, {"format", "e5m2"}},
       {unit, e4m3_codes(), scales, e4m3_codes(), scales, zeros}},
      {"linear_fp8_backward_accumulate", {fp8_d_out, fp8_codes, scale_inv, w_t, scale_inv, state},
       {{"site", 0}, {"format", "e5m2"}}, {unit, e4m3_codes(), scales, e4m3_codes(), scales, zeros}},
      {"linear_fp8_backward_input_quantized", {fp8_d_out, d_codes, scale_inv, w_t, scale_inv}, {{"format", "e4m3"}},
       {unit, e4m3_codes(), scales, e4m3_codes(), scales}},
      {"linear_fp8_backward_quantized", {fp8_d_out, d_codes, scale_inv, fp8_codes, scale_inv, w_t, scale_inv},
       {{"format", "e4m3"}}, {unit, e4m3_codes(), scales, e4m3_codes(), scales, e4m3_codes(), scales}},
      {"linear_fp8_backward_quantized_accumulate",
       {fp8_d_out, d_codes, scale_inv, fp8_codes, scale_inv, w_t, scale_inv}, {{"format", "e4m3"}},
       {unit, e4m3_codes(), scales, e4m3_codes(), scales, e4m3_codes(), scales}},
      // Mixture of experts: routing tables from routing(), a consistent dispatch of them.
      {"router_topk", {TensorType{kBf16, {kRows, 8}}}, {{"top_k", kTopK}}},
      {"router_topk_backward", {route_weights, probs, indices, route_weights}, {{"logits_dtype", "BF16"}},
       {unit, uniform(0.0, 0.5), fixed(table.indices), uniform(0.0, 1.0)}},
      {"router_statistics", {probs, indices}, {}, {uniform(0.0, 0.5), fixed(table.indices)}},
      {"router_statistics_backward", {TensorType{kF32, {8}}, probs}},
      {"router_aux_loss", {TensorType{kF32, {kExperts}}, TensorType{kF32, {kExperts}}}, {{"scale", 0.5}},
       {uniform(0.0, 2.0), fixed({3, 2, 4, 3})}},
      {"router_aux_loss_backward", {scalar, TensorType{kF32, {kExperts}}}, {{"scale", 0.5}},
       {fixed({1.0}), fixed({3, 2, 4, 3})}},
      {"moe_dispatch", {indices}, {{"experts", kExperts}}, {fixed(table.indices)}},
      {"moe_permute", {x, order, indices}, {}, {unit, fixed(table.order), fixed(table.position)}},
      {"moe_permute_backward", {permuted, indices}, {}, {unit, fixed(table.position)}},
      {"moe_unpermute", {permuted, route_weights, indices}, {}, {unit, unit, fixed(table.position)}},
      {"moe_unpermute_backward", {x, permuted, route_weights, indices}, {}, {unit, unit, unit, fixed(table.position)}},
      {"expert_linear", {permuted, expert_weight, offsets}, {}, {unit, unit, fixed(table.offsets)}},
      {"expert_linear_backward_input", {TensorType{kBf16, {assignments, kOut}}, expert_weight, offsets}, {},
       {unit, unit, fixed(table.offsets)}},
      {"expert_linear_backward_weight", {TensorType{kBf16, {assignments, kOut}}, permuted, offsets}, {},
       {unit, unit, fixed(table.offsets)}},
      {"expert_linear_backward_weight_accumulate", {TensorType{kBf16, {assignments, kOut}}, permuted, offsets}, {},
       {unit, unit, fixed(table.offsets)}},
      {"sigmoid_gated_add", {x, x, TensorType{kBf16, {kRows, 1}}}},
      {"sigmoid_gated_add_backward", {x, x, TensorType{kBf16, {kRows, 1}}}},
  };
}

}  // namespace

const std::vector<SingleOpCase>& single_op_cases() {
  static const std::vector<SingleOpCase> cases = make_cases();
  return cases;
}

const std::map<std::string, std::string>& ops_not_run_alone() {
  static const std::map<std::string, std::string> reasons = [] {
    std::map<std::string, std::string> r;
    const std::string fp8 =
        "quantizes the op's own output, fp32 on the CPU and bf16 on CUDA, so a code may lie a step (2^-3) "
        "apart legitimately; bit for bit on the same rounded outputs in test_fp8_producers_cuda.cpp";
    for (const char* op : {"rmsnorm_fp8", "fused_residual_rmsnorm_fp8", "swiglu_fp8", "swiglu_backward_fp8",
                           "fused_residual_rmsnorm_backward_fp8", "attention_fp8", "fused_rmsnorm_rope_backward_fp8"}) {
      r[op] = fp8;
    }
    r["lm_head_accuracy"] =
        "counts argmax hits, which a near tie flips between bf16 (CUDA) and fp32 (CPU) logits; the kernel is "
        "exact on the same logits (test_model_kernels.cpp, argmax_hits)";
    const std::string cpu_only = "no CUDA binder: a CPU-only reference form (the CUDA graphs use ";
    r["lm_head_cross_entropy"] = cpu_only + "lm_head_loss)";
    r["lm_head_cross_entropy_backward"] = cpu_only + "lm_head_loss_backward)";
    r["round_fp16"] = cpu_only + "fp16 tensors themselves)";
    r["lm_head_loss_backward"] =
        "reads the logsumexp its forward wrote, which only the CPU backend writes (the CUDA backward recomputes "
        "it from hidden and weight), so inputs built independently cannot agree; checked through the forward by "
        "tests/runtime_cuda/test_lm_head_grads_cuda.cpp and models_cuda_tests";
    r["sequence_logps_backward"] =
        "reads the logsumexp its forward wrote, which only the CPU backend writes (the CUDA backward recomputes the "
        "logits, as lm_head_loss_backward's); checked through the forward by test_preference_ops_cuda.cpp";
    const std::string host = "an asynchronous host copy, not a kernel of the CUDA table (runtime/cuda_host_copies.h); "
                             "checked by the offload tests of runtime_cuda_tests";
    r["offload_to_host"] = host;
    r["fetch_from_host"] = host;
    return r;
  }();
  return reasons;
}

}  // namespace surogate::testing
