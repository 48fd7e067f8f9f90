// bitsandbytes' signed 8-bit dynamic map (functional.create_dynamic_map(signed=True)): 256
// increasing float values in [-1, 1] with a dynamic exponent, the code that double quantization
// stores NF4's per-block absmax in (quant/nf4.h). The table is bitsandbytes' own, copied as the
// float32 values it computes (tests/fixtures/nf4/ holds them as bitsandbytes wrote them, and
// tests/quant/test_nf4.cpp compares).
#pragma once

#include <array>
#include <cstdint>

namespace surogate::quant {

extern const std::array<float, 256> kDynamicMap;

// The code of `x` (already divided by its block's absmax, so in [-1, 1]), as bitsandbytes'
// blockwise 8-bit quantizer finds it: a binary search over the map, then the nearer of the two
// neighbours by the midpoint (ties to the lower one when x is above the probe, the upper below).
uint8_t dynamic_map_code(float x);

}  // namespace surogate::quant
