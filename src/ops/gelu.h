// GELU, the MLP activation of GPT-2, GPT-NeoX, Phi, StarCoder2, Gemma (GeGLU), ... in the two forms
// transformers uses (torch.nn.functional.gelu's `approximate`):
//   none (hidden_act "gelu"):   y = x · Φ(x) = ½ x (1 + erf(x / √2))
//   tanh ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
//                               y = ½ x (1 + tanh(k)),  k = √(2/π) (x + 0.044715 x³)
//   quick ("quick_gelu", QuickGELUActivation: CLIP and Qwen2-VL's vision MLP):
//                               y = x · σ(1.702 x)
// Backward (torch's formulas, evaluated in T):
//   none:  d_x = d_y · (Φ(x) + x · φ(x)),  φ(x) = exp(−x²/2) / √(2π)
//   tanh:  d_x = d_y · (½ (1 + t) + ½ x (1 − t²) √(2/π) (1 + 3 · 0.044715 x²)),  t = tanh(k)
//   quick: d_x = d_y · (s + 1.702 x s (1 − s)),  s = σ(1.702 x)
// Elementwise over `count` values; d_x is WRITTEN and may alias d_y. Nothing is saved but x.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace surogate::ops {

enum class GeluApproximation { None, Tanh, Quick };

// "none" / "tanh" (the op attribute and torch's spelling) / "quick"; nullopt for anything else.
std::optional<GeluApproximation> gelu_approximation_from_name(std::string_view name);

template <typename T>
void gelu_forward(const T* x, int64_t count, GeluApproximation approximation, T* y);

template <typename T>
void gelu_backward(const T* d_y, const T* x, int64_t count, GeluApproximation approximation, T* d_x);

}  // namespace surogate::ops
