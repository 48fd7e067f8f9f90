// The k-quants (256-value super-blocks): Q4_K, Q5_K, Q6_K. Internal to gguf/quantize.cpp; one
// super-block at a time.
#pragma once

#include <cstdint>

namespace surogate::gguf::detail {

void quantize_q4_k_block(const float* x, uint8_t* block);
void quantize_q5_k_block(const float* x, uint8_t* block);
void quantize_q6_k_block(const float* x, uint8_t* block);
void dequantize_q4_k_block(const uint8_t* block, float* y);
void dequantize_q5_k_block(const uint8_t* block, float* y);
void dequantize_q6_k_block(const uint8_t* block, float* y);

// ggml's nearest_int: round half to even through the float adder (the magic constant 1.5 · 2^23),
// exactly as the reference quantizers round. |value| must stay below 2^22.
int nearest_int(float value);

}  // namespace surogate::gguf::detail
