// Per-token log-probabilities and their gradient (see grpo_logprobs.h). Each row is owned by one
// task of parallel_for, reductions over the vocabulary run in double.
#include "ops/grpo_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "ops/parallel_for.h"

namespace surogate::ops {
namespace {

void check_logprob_shape(const TokenLogprobShape& shape) {
  SUROGATE_CHECK(shape.rows >= 0 && shape.vocab > 0 && shape.temperature > 0.0,
                 "bad token log-prob shape rows={} vocab={} temperature={}", shape.rows, shape.vocab,
                 shape.temperature);
}

// Whether row n is scored; a label outside the vocabulary is a bug upstream.
bool scored_label(const TokenLogprobShape& shape, int32_t label) {
  if (label == shape.ignore_index) return false;
  SUROGATE_CHECK(label >= 0 && label < shape.vocab, "label {} outside [0, {})", label, shape.vocab);
  return true;
}

template <typename T>
double scaled_logsumexp(const T* row, int64_t vocab, double inverse_temperature) {
  double largest = -std::numeric_limits<double>::infinity();
  for (int64_t v = 0; v < vocab; ++v) largest = std::max(largest, static_cast<double>(row[v]) * inverse_temperature);
  double total = 0.0;
  for (int64_t v = 0; v < vocab; ++v) total += std::exp(static_cast<double>(row[v]) * inverse_temperature - largest);
  return largest + std::log(total);
}

}  // namespace

template <typename T>
void token_logprobs_forward(const TokenLogprobShape& shape, const T* logits, const int32_t* labels, T* logp,
                            T* logsumexp) {
  check_logprob_shape(shape);
  const double inverse = 1.0 / shape.temperature;
  parallel_for(shape.rows, [&](int64_t n) {
    const T* row = logits + n * shape.vocab;
    const double normalizer = scaled_logsumexp(row, shape.vocab, inverse);
    logsumexp[n] = static_cast<T>(normalizer);
    logp[n] = scored_label(shape, labels[n])
                  ? static_cast<T>(static_cast<double>(row[labels[n]]) * inverse - normalizer)
                  : T(0);
  });
}

template <typename T>
void token_logprobs_backward(const TokenLogprobShape& shape, const T* logits, const int32_t* labels,
                             const T* logsumexp, const T* d_logp, T* d_logits) {
  check_logprob_shape(shape);
  const double inverse = 1.0 / shape.temperature;
  parallel_for(shape.rows, [&](int64_t n) {
    const T* row = logits + n * shape.vocab;
    T* out = d_logits + n * shape.vocab;
    if (!scored_label(shape, labels[n])) {
      std::fill(out, out + shape.vocab, T(0));
      return;
    }
    const double upstream = static_cast<double>(d_logp[n]) * inverse, normalizer = logsumexp[n];
    for (int64_t v = 0; v < shape.vocab; ++v) {
      const double probability = std::exp(static_cast<double>(row[v]) * inverse - normalizer);
      out[v] = static_cast<T>(upstream * ((v == labels[n] ? 1.0 : 0.0) - probability));
    }
  });
}

#define SUROGATE_INSTANTIATE_TOKEN_LOGPROBS(T)                                                              \
  template void token_logprobs_forward<T>(const TokenLogprobShape&, const T*, const int32_t*, T*, T*);      \
  template void token_logprobs_backward<T>(const TokenLogprobShape&, const T*, const int32_t*, const T*, \
                                           const T*, T*);
SUROGATE_INSTANTIATE_TOKEN_LOGPROBS(float)
SUROGATE_INSTANTIATE_TOKEN_LOGPROBS(double)
#undef SUROGATE_INSTANTIATE_TOKEN_LOGPROBS

}  // namespace surogate::ops
