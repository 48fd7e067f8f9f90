// The CPU sampled choice of ops/sample_tokens.h, written as the steps read (the CUDA kernel finds
// the same sets with radix selects instead of sorts).
#include "ops/sample_tokens.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <vector>

#include "core/error.h"

namespace surogate::ops {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Step 3: values below the k-th largest become -inf.
void keep_top_k(std::vector<float>& x, int32_t top_k) {
  if (top_k <= 0 || static_cast<size_t>(top_k) >= x.size()) return;
  std::vector<float> sorted = x;
  std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<float>());
  const float kth = sorted[static_cast<size_t>(top_k - 1)];
  for (float& value : x) value = value < kth ? kNegInf : value;
}

// Step 5 over the weights of the tokens still kept: the others' weights become 0.
void keep_top_p(const std::vector<float>& x, std::vector<uint64_t>& weights, float top_p) {
  if (!(top_p < 1.0f)) return;
  std::vector<int32_t> order;
  uint64_t total = 0;
  for (size_t id = 0; id < x.size(); ++id) {
    if (x[id] == kNegInf) continue;
    order.push_back(static_cast<int32_t>(id));
    total += weights[id];
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a > b); });
  const uint64_t limit = std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(top_p) * static_cast<double>(total)));
  uint64_t before = 0;
  for (int32_t id : order) {
    if (before >= limit) weights[static_cast<size_t>(id)] = 0;
    before += weights[static_cast<size_t>(id)];
  }
}

int32_t first_max(const std::vector<float>& x) {
  float best = kNegInf;
  for (float value : x) best = value > best ? value : best;
  return static_cast<int32_t>(std::find(x.begin(), x.end(), best) - x.begin());  // every value -inf: 0
}

template <typename T>
int32_t sample_row(const T* row, int64_t vocab, const RowSampling& p, const int32_t* context, int64_t context_width) {
  if (p.temperature < 0.0f) return kSkippedRow;
  std::vector<float> x(static_cast<size_t>(vocab));
  bool unusable = false;
  for (int64_t i = 0; i < vocab; ++i) {
    x[static_cast<size_t>(i)] = static_cast<float>(row[i]);
    unusable |= !(x[static_cast<size_t>(i)] < std::numeric_limits<float>::infinity());
  }
  if (unusable) return kUnusableRow;
  std::vector<bool> in_context(static_cast<size_t>(vocab), false);
  if (p.repetition_penalty != 1.0f) {
    for (int64_t c = 0; c < context_width; ++c) {
      const int32_t id = context[c];
      if (id >= 0 && id < vocab) in_context[static_cast<size_t>(id)] = true;
    }
  }
  for (size_t i = 0; i < x.size(); ++i) x[i] = processed_logit(x[i], in_context[i], p.repetition_penalty, p.temperature);
  if (p.temperature == 0.0f) return first_max(x);
  if (x[static_cast<size_t>(first_max(x))] == kNegInf) return kNothingToDraw;
  const std::vector<uint64_t> weights = kept_weights(x, p);
  uint64_t total = 0;
  for (uint64_t weight : weights) total += weight;
  const uint64_t target = scale_draw(token_draw_bits(p.seed, p.draw), total);
  uint64_t prefix = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    prefix += weights[i];
    if (prefix > target) return static_cast<int32_t>(i);
  }
  SUROGATE_CHECK(false, "sample_tokens: the draw fell past the row's weights");
  return kNothingToDraw;
}

}  // namespace

std::vector<uint64_t> kept_weights(std::span<const float> processed, const RowSampling& p) {
  std::vector<float> x(processed.begin(), processed.end());
  const float largest = x[static_cast<size_t>(first_max(x))];
  keep_top_k(x, p.top_k);
  std::vector<uint64_t> weights(x.size(), 0);
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] != kNegInf) weights[i] = sampling_weight(x[i] == largest ? 0.0f : x[i] - largest);
  }
  keep_top_p(x, weights, p.top_p);
  const double min_logit = static_cast<double>(largest) + static_cast<double>(p.log_min_p);
  for (size_t i = 0; i < x.size(); ++i) {
    if (static_cast<double>(x[i]) < min_logit) weights[i] = 0;
  }
  return weights;
}

template <typename T>
void sample_tokens(const T* logits, int64_t rows, int64_t vocab, const RowSampling* params, const int32_t* context,
                   int64_t context_width, int32_t* tokens) {
  SUROGATE_CHECK(vocab >= 1 && vocab <= kMaxSampledVocab, "sample_tokens: a vocabulary of {} tokens", vocab);
  for (int64_t r = 0; r < rows; ++r) {
    tokens[r] = sample_row(logits + r * vocab, vocab, params[r], context + r * context_width, context_width);
  }
}

template void sample_tokens(const float*, int64_t, int64_t, const RowSampling*, const int32_t*, int64_t, int32_t*);
template void sample_tokens(const double*, int64_t, int64_t, const RowSampling*, const int32_t*, int64_t, int32_t*);

}  // namespace surogate::ops
