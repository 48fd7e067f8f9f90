// SwiGLU, the gated MLP activation of Llama/Mistral/Qwen: out = silu(gate) · up with
// silu(g) = g · sigmoid(g) = g / (1 + exp(−g)) (torch's formula, evaluated in T).
// Layouts: gate, up, out [N, I]; the fused variant reads gate_up [N, 2I] with the gate in the
// first I columns of each row and up in the last I (Phi-3 style gate_up_proj).
// Backward, with σ = sigmoid(g):
//   d_gate = d_out · up · σ · (1 + g · (1 − σ)) ;  d_up = d_out · silu(g)
// d_gate, d_up and d_gate_up are WRITTEN. Nothing is saved beyond the inputs.
#pragma once

#include <cstdint>

namespace surogate::ops {

template <typename T>
void swiglu_forward(const T* gate, const T* up, int64_t rows, int64_t intermediate, T* out);

template <typename T>
void swiglu_backward(const T* d_out, const T* gate, const T* up, int64_t rows, int64_t intermediate,
                     T* d_gate, T* d_up);

template <typename T>
void swiglu_fused_forward(const T* gate_up, int64_t rows, int64_t intermediate, T* out);

template <typename T>
void swiglu_fused_backward(const T* d_out, const T* gate_up, int64_t rows, int64_t intermediate,
                           T* d_gate_up);

}  // namespace surogate::ops
