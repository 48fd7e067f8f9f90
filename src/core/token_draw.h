// The arithmetic of generation's token draw (ops/sample_tokens.h), shared bit for bit by the CPU
// op and the CUDA kernel (cuda/kernels/sample_tokens.cu), so that equal logits give equal tokens:
//   - RowSampling: one row's options as the op reads them (32 bytes, also the 8 I32 words of the
//     graph op's `params` input);
//   - philox4x32_10: the counter-based generator (Salmon et al., "Parallel random numbers: as easy
//     as 1, 2, 3", SC'11; Random123's constants): key = the request's seed, counter = (draw index,
//     0, 0, 0). A draw is a pure function of (seed, draw index): no state to save beyond the count
//     of tokens a sequence has drawn;
//   - sampling_weight: a kept token's unnormalised probability as an integer, 2^40 × exp(y) for
//     y = logit − the row's largest, truncated (exp by a fixed polynomial in fp32 with explicit
//     fma, so both sides round alike). Integer weights add up exactly in any order: the GPU's
//     parallel sums equal the CPU's serial ones, and top_p and the draw compare integers.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace surogate {

// One row's choice. temperature 0: the argmax (after the penalty); < 0: the row is skipped (its
// token is kSkippedRow). top_k 0 = off; top_p 1 = off; log_min_p = log(min_p), -inf = off.
struct RowSampling {
  float temperature = 1.0f;
  float repetition_penalty = 1.0f;  // 1 = off
  int32_t top_k = 0;
  float top_p = 1.0f;
  float log_min_p = -INFINITY;
  uint32_t draw = 0;   // the index of this draw in the sequence's stream
  uint64_t seed = 0;   // the sequence's seed (Philox key)
};
static_assert(sizeof(RowSampling) == 32, "RowSampling is 8 I32 words");
inline constexpr int64_t kRowSamplingWords = 8;

// A kept token's weight is at most 2^kWeightBits (the largest logit's); a row's sum stays below
// 2^64 for vocabularies up to 2^23 tokens.
inline constexpr int kWeightBits = 40;
inline constexpr int64_t kMaxSampledVocab = int64_t{1} << 23;

struct Philox4x32 {
  uint32_t v[4];
};

SUROGATE_HOST_DEVICE inline uint32_t philox_mulhi(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}

// Philox4x32 with 10 rounds (Random123's philox4x32_10).
SUROGATE_HOST_DEVICE inline Philox4x32 philox4x32_10(Philox4x32 counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t* c = counter.v;
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = philox_mulhi(kM0, c[0]), lo0 = kM0 * c[0];
    const uint32_t hi1 = philox_mulhi(kM1, c[2]), lo1 = kM1 * c[2];
    const uint32_t next[4] = {hi1 ^ c[1] ^ key0, lo1, hi0 ^ c[3] ^ key1, lo0};
    c[0] = next[0], c[1] = next[1], c[2] = next[2], c[3] = next[3];
    key0 += kW0;
    key1 += kW1;
  }
  return counter;
}

// The 64 random bits of draw `draw` of the stream `seed`: words 0 and 1 of Philox(counter (draw,
// 0, 0, 0), key (seed low, seed high)).
SUROGATE_HOST_DEVICE inline uint64_t token_draw_bits(uint64_t seed, uint32_t draw) {
  const Philox4x32 out = philox4x32_10(Philox4x32{{draw, 0u, 0u, 0u}}, static_cast<uint32_t>(seed),
                                       static_cast<uint32_t>(seed >> 32));
  return static_cast<uint64_t>(out.v[0]) | (static_cast<uint64_t>(out.v[1]) << 32);
}

// floor(bits × total / 2^64): a uniform integer in [0, total).
SUROGATE_HOST_DEVICE inline uint64_t scale_draw(uint64_t bits, uint64_t total) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(bits, total);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * total) >> 64);
#endif
}

SUROGATE_HOST_DEVICE inline float exact_fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);  // correctly rounded, as the device's
#endif
}

// floor(2^40 × exp(y)) for y <= 0 (0 below e^-28 ≈ 2^-40.4; NaN → 0). exp(y) = 2^k × exp(r) with
// k = rint(y / ln 2), r = y − k ln 2 (ln 2 in two parts), exp(r) by its Taylor polynomial of
// degree 8 (|r| <= 0.35: relative error below 1e-7).
SUROGATE_HOST_DEVICE inline uint64_t sampling_weight(float y) {
  if (!(y > -28.0f)) return 0;
  if (y >= 0.0f) return uint64_t{1} << kWeightBits;
  const float k = rintf(y * 1.44269504088896341f);
  float r = exact_fma(-k, 0.693145751953125f, y);
  r = exact_fma(-k, 1.42860682030941723e-06f, r);
  float p = 2.48015873015873e-05f;  // 1/8!
  p = exact_fma(p, r, 1.98412698412698e-04f);
  p = exact_fma(p, r, 1.38888888888889e-03f);
  p = exact_fma(p, r, 8.33333333333333e-03f);
  p = exact_fma(p, r, 4.16666666666667e-02f);
  p = exact_fma(p, r, 1.66666666666667e-01f);
  p = exact_fma(p, r, 0.5f);
  p = exact_fma(p, r, 1.0f);
  p = exact_fma(p, r, 1.0f);
  return static_cast<uint64_t>(ldexpf(p, kWeightBits + static_cast<int>(k)));
}

// A float's order as an unsigned key: larger float, larger key; equal floats, equal keys (-0 is +0).
SUROGATE_HOST_DEVICE inline uint32_t float_order_key(float value) {
  if (value == 0.0f) value = 0.0f;
  uint32_t bits = 0;
#if defined(__CUDA_ARCH__)
  bits = __float_as_uint(value);
#else
  __builtin_memcpy(&bits, &value, sizeof(bits));
#endif
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

// The processed logit of one token (steps 1 and 2 of ops/sample_tokens.h): the penalty when the
// token is in the context, then / temperature (IEEE division on both sides).
SUROGATE_HOST_DEVICE inline float processed_logit(float logit, bool in_context, float penalty, float temperature) {
  if (in_context) logit = logit < 0.0f ? logit * penalty : logit / penalty;
  return temperature == 0.0f ? logit : logit / temperature;
}

}  // namespace surogate
