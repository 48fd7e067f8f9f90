// Per-sequence completion log-probabilities; see preference_logps.h.
#include "ops/preference_logps.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace surogate::ops {

bool scored_row(const SequenceLogpsShape& shape, const int32_t* targets, const int32_t* sequence_ids, int64_t row) {
  const int32_t sequence = sequence_ids[row];
  SUROGATE_CHECK(sequence >= -1 && sequence < shape.sequences, "sequence id in [-1, S)");
  if (sequence < 0 || targets[row] == shape.ignore_index) return false;
  SUROGATE_CHECK(targets[row] >= 0 && targets[row] < shape.vocab, "target inside the vocabulary");
  return true;
}

namespace {

// logits[v] = hidden[row] · weight[v], in double.
template <typename T>
void row_logits(const SequenceLogpsShape& shape, const T* hidden, const T* weight, int64_t row, std::vector<double>& logits) {
  const T* h = hidden + row * shape.hidden;
  for (int64_t v = 0; v < shape.vocab; ++v) {
    const T* w = weight + v * shape.hidden;
    double dot = 0.0;
    for (int64_t d = 0; d < shape.hidden; ++d) dot += static_cast<double>(h[d]) * static_cast<double>(w[d]);
    logits[static_cast<size_t>(v)] = dot;
  }
}

double log_sum_exp(const std::vector<double>& logits) {
  double top = -INFINITY;
  for (double value : logits) top = std::max(top, value);
  double sum = 0.0;
  for (double value : logits) sum += std::exp(value - top);
  return top + std::log(sum);
}

}  // namespace

template <typename T>
void sequence_logps_forward(const SequenceLogpsShape& shape, const T* hidden, const T* weight, const int32_t* targets,
                            const int32_t* sequence_ids, T* logps, T* logit_sums, T* logsumexp) {
  std::vector<double> sums(static_cast<size_t>(shape.sequences), 0.0), means(sums.size(), 0.0);
  std::vector<double> logits(static_cast<size_t>(shape.vocab));
  for (int64_t row = 0; row < shape.rows; ++row) {
    logsumexp[row] = T(0);
    if (!scored_row(shape, targets, sequence_ids, row)) continue;
    row_logits(shape, hidden, weight, row, logits);
    const double lse = log_sum_exp(logits);
    double total = 0.0;
    for (double value : logits) total += value;
    const auto sequence = static_cast<size_t>(sequence_ids[row]);
    sums[sequence] += logits[static_cast<size_t>(targets[row])] - lse;
    means[sequence] += total / static_cast<double>(shape.vocab);
    logsumexp[row] = static_cast<T>(lse);
  }
  for (size_t s = 0; s < sums.size(); ++s) {
    logps[s] = static_cast<T>(sums[s]);
    logit_sums[s] = static_cast<T>(means[s]);
  }
}

template <typename T>
void sequence_logps_backward(const SequenceLogpsShape& shape, const T* hidden, const T* weight, const int32_t* targets,
                             const int32_t* sequence_ids, const T* logsumexp, const T* d_logps, T* d_hidden,
                             T* d_weight) {
  std::vector<double> logits(static_cast<size_t>(shape.vocab));
  std::vector<double> row_gradient(static_cast<size_t>(shape.hidden));
  for (int64_t row = 0; row < shape.rows; ++row) {
    T* dh = d_hidden + row * shape.hidden;
    if (!scored_row(shape, targets, sequence_ids, row)) {
      for (int64_t d = 0; d < shape.hidden; ++d) dh[d] = T(0);
      continue;
    }
    row_logits(shape, hidden, weight, row, logits);
    const double upstream = static_cast<double>(d_logps[sequence_ids[row]]);
    const double lse = static_cast<double>(logsumexp[row]);
    std::fill(row_gradient.begin(), row_gradient.end(), 0.0);
    const T* h = hidden + row * shape.hidden;
    for (int64_t v = 0; v < shape.vocab; ++v) {
      const double d_logit = upstream * ((v == targets[row] ? 1.0 : 0.0) - std::exp(logits[static_cast<size_t>(v)] - lse));
      const T* w = weight + v * shape.hidden;
      for (int64_t d = 0; d < shape.hidden; ++d) row_gradient[static_cast<size_t>(d)] += d_logit * static_cast<double>(w[d]);
      if (d_weight != nullptr) {
        T* dw = d_weight + v * shape.hidden;
        for (int64_t d = 0; d < shape.hidden; ++d) dw[d] = static_cast<T>(static_cast<double>(dw[d]) + d_logit * static_cast<double>(h[d]));
      }
    }
    for (int64_t d = 0; d < shape.hidden; ++d) dh[d] = static_cast<T>(row_gradient[static_cast<size_t>(d)]);
  }
}

#define SUROGATE_INSTANTIATE(T)                                                                                      \
  template void sequence_logps_forward<T>(const SequenceLogpsShape&, const T*, const T*, const int32_t*,             \
                                          const int32_t*, T*, T*, T*);                                               \
  template void sequence_logps_backward<T>(const SequenceLogpsShape&, const T*, const T*, const int32_t*,            \
                                           const int32_t*, const T*, const T*, T*, T*);
SUROGATE_INSTANTIATE(float)
SUROGATE_INSTANTIATE(double)
#undef SUROGATE_INSTANTIATE

}  // namespace surogate::ops
