// MoE routing reference math; see moe_routing.h.
#include "ops/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops/parallel_for.h"

namespace surogate::ops {

template <typename T>
void router_topk_forward(const T* logits, int64_t tokens, int64_t experts, int64_t top_k, bool normalize,
                         T* weights, int32_t* indices, T* probs) {
  parallel_for(tokens, [&](int64_t t) {
    const T* row = logits + t * experts;
    T* p = probs + t * experts;
    T max = row[0];
    for (int64_t e = 1; e < experts; ++e) max = std::max(max, row[e]);
    T sum = 0;
    for (int64_t e = 0; e < experts; ++e) {
      p[e] = std::exp(row[e] - max);
      sum += p[e];
    }
    for (int64_t e = 0; e < experts; ++e) p[e] /= sum;
    int32_t* chosen = indices + t * top_k;
    T* w = weights + t * top_k;
    T chosen_sum = 0;
    for (int64_t j = 0; j < top_k; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < experts; ++e) {
        if (std::find(chosen, chosen + j, static_cast<int32_t>(e)) != chosen + j) continue;
        if (best < 0 || p[e] > p[best]) best = e;
      }
      chosen[j] = static_cast<int32_t>(best);
      w[j] = p[best];
      chosen_sum += w[j];
    }
    if (normalize) {
      for (int64_t j = 0; j < top_k; ++j) w[j] /= chosen_sum;
    }
  });
}

template <typename T>
void router_topk_backward(const T* d_weights, const T* d_probs, const T* probs, const int32_t* indices,
                          const T* weights, int64_t tokens, int64_t experts, int64_t top_k, bool normalize,
                          T* d_logits) {
  parallel_for(tokens, [&](int64_t t) {
    const T* p = probs + t * experts;
    const T* dw = d_weights + t * top_k;
    const T* w = weights + t * top_k;
    const int32_t* chosen = indices + t * top_k;
    T* g = d_logits + t * experts;  // holds g first, then the logits gradient
    for (int64_t e = 0; e < experts; ++e) g[e] = d_probs != nullptr ? d_probs[t * experts + e] : T(0);
    T weighted = 0, chosen_sum = 0;
    for (int64_t j = 0; j < top_k; ++j) {
      weighted += dw[j] * w[j];
      chosen_sum += p[chosen[j]];
    }
    for (int64_t j = 0; j < top_k; ++j) {
      g[chosen[j]] += normalize ? (dw[j] - weighted) / chosen_sum : dw[j];
    }
    T dot = 0;
    for (int64_t e = 0; e < experts; ++e) dot += g[e] * p[e];
    for (int64_t e = 0; e < experts; ++e) g[e] = p[e] * (g[e] - dot);
  });
}

void moe_dispatch(const int32_t* indices, int64_t assignments, int64_t experts, int32_t* order, int32_t* position,
                  int32_t* offsets) {
  std::fill(offsets, offsets + experts + 1, 0);
  for (int64_t a = 0; a < assignments; ++a) {
    const int32_t expert = indices[a];
    if (expert < 0 || expert >= experts) {
      fail_user("moe_dispatch: assignment {} names expert {}, outside [0, {})", a, expert, experts);
    }
    ++offsets[expert + 1];
  }
  for (int64_t e = 0; e < experts; ++e) offsets[e + 1] += offsets[e];
  std::vector<int32_t> next(offsets, offsets + experts);
  for (int64_t a = 0; a < assignments; ++a) {
    const int32_t row = next[static_cast<size_t>(indices[a])]++;
    order[row] = static_cast<int32_t>(a);
    position[a] = row;
  }
}

template <typename T>
void moe_permute(const T* x, const int32_t* order, int64_t assignments, int64_t top_k, int64_t width, T* out) {
  parallel_for(assignments, [&](int64_t row) {
    const T* source = x + (order[row] / top_k) * width;
    std::copy(source, source + width, out + row * width);
  });
}

template <typename T>
void moe_permute_backward(const T* d_out, const int32_t* position, int64_t tokens, int64_t top_k, int64_t width,
                          T* d_x) {
  parallel_for(tokens, [&](int64_t t) {
    T* target = d_x + t * width;
    std::fill(target, target + width, T(0));
    for (int64_t j = 0; j < top_k; ++j) {
      const T* source = d_out + static_cast<int64_t>(position[t * top_k + j]) * width;
      for (int64_t c = 0; c < width; ++c) target[c] += source[c];
    }
  });
}

template <typename T, typename W>
void moe_unpermute(const T* y, const W* weights, const int32_t* position, int64_t tokens, int64_t top_k,
                   int64_t width, T* out) {
  parallel_for(tokens, [&](int64_t t) {
    T* target = out + t * width;
    std::fill(target, target + width, T(0));
    for (int64_t j = 0; j < top_k; ++j) {
      const T weight = static_cast<T>(weights[t * top_k + j]);
      const T* source = y + static_cast<int64_t>(position[t * top_k + j]) * width;
      for (int64_t c = 0; c < width; ++c) target[c] += weight * source[c];
    }
  });
}

template <typename T, typename W>
void moe_unpermute_backward(const T* d_out, const T* y, const W* weights, const int32_t* position, int64_t tokens,
                            int64_t top_k, int64_t width, T* d_y, W* d_weights) {
  parallel_for(tokens, [&](int64_t t) {
    const T* gradient = d_out + t * width;
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t row = position[t * top_k + j];
      const T weight = static_cast<T>(weights[t * top_k + j]);
      const T* source = y + row * width;
      T* target = d_y + row * width;
      W dot = 0;
      for (int64_t c = 0; c < width; ++c) {
        target[c] = weight * gradient[c];
        dot += static_cast<W>(gradient[c]) * static_cast<W>(source[c]);
      }
      d_weights[t * top_k + j] = dot;
    }
  });
}

template <typename T>
void router_statistics(const T* probs, const int32_t* indices, int64_t tokens, int64_t experts, int64_t top_k,
                       T* probability_sum, T* counts) {
  std::fill(probability_sum, probability_sum + experts, T(0));
  std::fill(counts, counts + experts, T(0));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < experts; ++e) probability_sum[e] += probs[t * experts + e];
    for (int64_t j = 0; j < top_k; ++j) counts[indices[t * top_k + j]] += T(1);
  }
}

#define SUROGATE_INSTANTIATE(T)                                                                                   \
  template void router_topk_forward<T>(const T*, int64_t, int64_t, int64_t, bool, T*, int32_t*, T*);             \
  template void router_topk_backward<T>(const T*, const T*, const T*, const int32_t*, const T*, int64_t, int64_t, \
                                        int64_t, bool, T*);                                                       \
  template void moe_permute<T>(const T*, const int32_t*, int64_t, int64_t, int64_t, T*);                         \
  template void moe_permute_backward<T>(const T*, const int32_t*, int64_t, int64_t, int64_t, T*);                \
  template void moe_unpermute<T, T>(const T*, const T*, const int32_t*, int64_t, int64_t, int64_t, T*);          \
  template void moe_unpermute_backward<T, T>(const T*, const T*, const T*, const int32_t*, int64_t, int64_t,      \
                                             int64_t, T*, T*);                                                    \
  template void router_statistics<T>(const T*, const int32_t*, int64_t, int64_t, int64_t, T*, T*);
SUROGATE_INSTANTIATE(float)
SUROGATE_INSTANTIATE(double)
#undef SUROGATE_INSTANTIATE

}  // namespace surogate::ops
