// Stochastic rounding of fp32 to bf16 driven by a counter-based hash, for `master_dtype: bf16`:
// the optimizer updates bf16 weights in place (read bf16, compute in fp32, write bf16), and a
// round-to-nearest write would drop every update smaller than half a bf16 ulp. Rounding up with
// probability equal to the dropped fraction keeps the expected weight equal to the fp32 result.
//
// The random bits are a pure function of (seed, optimizer step, parameter index, element index)
// (SplitMix64's finaliser, chained), so a run is reproducible and a resumed run rounds exactly as
// the uninterrupted one: no RNG state beyond the step counter and the seed. Host and device share
// these functions (the GPU test recomputes the kernels' results on the host bit for bit).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace surogate {

SUROGATE_HOST_DEVICE inline uint64_t rounding_mix(uint64_t value) {
  value += 0x9e3779b97f4a7c15ull;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
  return value ^ (value >> 31);
}

// The key of one optimizer step (computed on the host once per step) ...
SUROGATE_HOST_DEVICE inline uint64_t rounding_step_key(uint64_t seed, uint64_t step) {
  return rounding_mix(rounding_mix(seed) ^ step);
}
// ... of one parameter in that step (its index in the trainable list) ...
SUROGATE_HOST_DEVICE inline uint64_t rounding_parameter_key(uint64_t step_key, uint64_t parameter) {
  return rounding_mix(step_key ^ parameter);
}
// ... and the 16 random bits of one element.
SUROGATE_HOST_DEVICE inline uint32_t rounding_bits(uint64_t parameter_key, uint64_t element) {
  return static_cast<uint32_t>(rounding_mix(parameter_key ^ element) >> 48);
}

// `value` rounded to bf16 (the bit pattern): the 16 dropped mantissa bits plus `random16`
// (uniform in [0, 65536)) carry into the kept half with probability dropped / 65536, so the
// magnitude rounds away from zero with exactly that probability (unbiased). Values that are
// exact in bf16 are unchanged; infinities stay infinite and NaN stays NaN.
SUROGATE_HOST_DEVICE inline uint16_t stochastic_round_bf16(float value, uint32_t random16) {
  uint32_t bits;
#if defined(__CUDA_ARCH__)
  bits = __float_as_uint(value);
#else
  std::memcpy(&bits, &value, sizeof(bits));
#endif
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // NaN stays NaN
  if ((bits & 0x7fffffffu) == 0x7f800000u) return static_cast<uint16_t>(bits >> 16);
  return static_cast<uint16_t>((bits + (random16 & 0xffffu)) >> 16);
}

}  // namespace surogate
