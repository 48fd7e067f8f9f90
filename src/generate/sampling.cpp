// The host processors of sampling.h (the reference) and TokenSampler over ops/sample_tokens.h.
// Logits stay float as transformers keeps them (a penalty or a temperature is applied in float);
// the probabilities the host filters use are computed in double.
#include "generate/sampling.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "ops/greedy_tokens.h"
#include "ops/sample_tokens.h"

namespace surogate::generate {
namespace {

constexpr float kFiltered = -std::numeric_limits<float>::infinity();

void check_finite(double value, const char* name) {
  if (!std::isfinite(value)) fail_user("{} must be a finite number, got {}", name, value);
}

void apply_repetition_penalty(float penalty, std::span<float> logits,
                              std::span<const int32_t> context) {
  std::vector<bool> penalised(logits.size(), false);  // each distinct token once
  for (int32_t id : context) {
    if (id < 0 || static_cast<size_t>(id) >= logits.size() || penalised[static_cast<size_t>(id)])
      continue;
    penalised[static_cast<size_t>(id)] = true;
    float& logit = logits[static_cast<size_t>(id)];
    logit = logit < 0 ? logit * penalty : logit / penalty;
  }
}

// transformers' TopKLogitsWarper: every logit below the k-th largest is filtered (ties kept).
// The k-th largest from a min-heap of the k largest (most logits fail one comparison with its
// top), or nth_element on a copy when k is a large share of the vocabulary.
void apply_top_k(int64_t top_k, std::span<float> logits) {
  const size_t k = std::min(static_cast<size_t>(top_k), logits.size());
  float kth = 0.0f;
  if (k <= logits.size() / 16) {
    std::vector<float> heap(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(k));
    std::make_heap(heap.begin(), heap.end(), std::greater<float>());
    for (size_t id = k; id < logits.size(); ++id) {
      if (!(logits[id] > heap.front())) continue;
      std::pop_heap(heap.begin(), heap.end(), std::greater<float>());
      heap.back() = logits[id];
      std::push_heap(heap.begin(), heap.end(), std::greater<float>());
    }
    kth = heap.front();
  } else {
    std::vector<float> sorted(logits.begin(), logits.end());
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k - 1),
                     sorted.end(), std::greater<float>());
    kth = sorted[k - 1];
  }
  for (float& logit : logits) {
    if (logit < kth) logit = kFiltered;
  }
}

// transformers' TopPLogitsWarper sorts ascending (here: ties lower id first) and filters each
// token whose cumulative probability is <= 1 - top_p. The same set, from the top: in descending
// order (ties higher id first), a token stays while the probability of the tokens before it is
// < top_p, so the most likely always stays. Only the tokens not yet filtered are sorted, and only
// as far as the kept ones reach (a partial sort that grows), not the whole vocabulary.
void apply_top_p(double top_p, std::span<float> logits) {
  std::vector<size_t> candidates;
  for (size_t id = 0; id < logits.size(); ++id) {
    if (logits[id] != kFiltered) candidates.push_back(id);
  }
  if (candidates.empty()) return;
  const auto before = [&](size_t a, size_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a > b);
  };
  const float largest = logits[*std::min_element(candidates.begin(), candidates.end(), before)];
  double total = 0.0;
  for (size_t id : candidates) total += std::exp(static_cast<double>(logits[id]) - largest);
  double cumulative = 0.0;
  size_t kept = 0;
  for (size_t sorted = std::min<size_t>(64, candidates.size());;
       sorted = std::min(sorted * 4, candidates.size())) {
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(sorted),
                      candidates.end(), before);
    while (kept < sorted && cumulative < top_p) {
      cumulative += std::exp(static_cast<double>(logits[candidates[kept]]) - largest) / total;
      ++kept;
    }
    if (kept < sorted || sorted == candidates.size()) break;
  }
  for (size_t rank = kept; rank < candidates.size(); ++rank) logits[candidates[rank]] = kFiltered;
}

// transformers' MinPLogitsWarper filters probabilities < min_p × the largest; in logits that is
// logit < largest + log(min_p), with no softmax over the vocabulary.
void apply_min_p(double min_p, std::span<float> logits) {
  const double threshold =
      static_cast<double>(logits[static_cast<size_t>(argmax(logits))]) + std::log(min_p);
  for (float& logit : logits) {
    if (static_cast<double>(logit) < threshold) logit = kFiltered;
  }
}

}  // namespace

void validate(const SamplingOptions& options) {
  check_finite(options.temperature, "temperature");
  check_finite(options.top_p, "top_p");
  check_finite(options.min_p, "min_p");
  check_finite(options.repetition_penalty, "repetition_penalty");
  if (options.temperature < 0) {
    fail_user("temperature must be >= 0 (0 = greedy), got {}", options.temperature);
  }
  if (options.top_k < 0) fail_user("top_k must be >= 0 (0 = off), got {}", options.top_k);
  if (!(options.top_p > 0 && options.top_p <= 1)) {
    fail_user("top_p must be in (0, 1] (1 = off), got {}", options.top_p);
  }
  if (!(options.min_p >= 0 && options.min_p <= 1)) {
    fail_user("min_p must be in [0, 1] (0 = off), got {}", options.min_p);
  }
  if (!(options.repetition_penalty > 0)) {
    fail_user("repetition_penalty must be > 0 (1 = off), got {}", options.repetition_penalty);
  }
}

void process_logits(const SamplingOptions& options, std::span<float> logits,
                    std::span<const int32_t> context) {
  if (logits.empty()) return;
  if (options.repetition_penalty != 1.0) {
    apply_repetition_penalty(static_cast<float>(options.repetition_penalty), logits, context);
  }
  if (options.greedy()) return;
  if (options.temperature != 1.0) {
    const float temperature = static_cast<float>(options.temperature);
    for (float& logit : logits) logit /= temperature;
  }
  if (options.top_k != 0) apply_top_k(options.top_k, logits);
  if (options.top_p < 1.0) apply_top_p(options.top_p, logits);
  if (options.min_p > 0.0) apply_min_p(options.min_p, logits);
}

std::vector<double> softmax_probabilities(std::span<const float> logits) {
  std::vector<double> probabilities(logits.size(), 0.0);
  const double largest = logits.empty() ? 0.0 : *std::max_element(logits.begin(), logits.end());
  if (largest == -std::numeric_limits<double>::infinity()) return probabilities;
  double sum = 0.0;
  for (size_t id = 0; id < logits.size(); ++id) {
    if (logits[id] == kFiltered) continue;
    probabilities[id] = std::exp(static_cast<double>(logits[id]) - largest);
    sum += probabilities[id];
  }
  for (double& probability : probabilities) probability /= sum;
  return probabilities;
}

int32_t argmax(std::span<const float> logits) {
  // The largest value first, in 16 independent lanes (a loop the compiler turns into vector max
  // instructions: `x > m ? x : m` is their exact rule, NaN never chosen), then its first index.
  constexpr size_t kLanes = 16;
  std::array<float, kLanes> lanes;
  lanes.fill(-std::numeric_limits<float>::infinity());
  const size_t whole = logits.size() / kLanes * kLanes;
  for (size_t id = 0; id < whole; id += kLanes) {
    for (size_t lane = 0; lane < kLanes; ++lane) {
      const float value = logits[id + lane];
      lanes[lane] = value > lanes[lane] ? value : lanes[lane];
    }
  }
  float best_logit = -std::numeric_limits<float>::infinity();
  for (float lane : lanes) best_logit = lane > best_logit ? lane : best_logit;
  for (size_t id = whole; id < logits.size(); ++id) best_logit = logits[id] > best_logit ? logits[id] : best_logit;
  for (size_t id = 0; id < logits.size(); ++id) {
    if (logits[id] == best_logit) return static_cast<int32_t>(id);  // the first maximum
  }
  return 0;  // every value NaN or -inf: the first, as before
}

int32_t greedy_choice(std::span<const float> logits) {
  int32_t token = 0;
  ops::greedy_tokens(logits.data(), 1, static_cast<int64_t>(logits.size()), &token);
  return token;
}

void fail_unusable_logits() {
  fail_user("the model's logits hold NaN or +inf (a diverged model?): no token can be chosen");
}

RowSampling row_sampling(const SamplingOptions& options, uint64_t seed, uint32_t draw) {
  RowSampling row;
  row.temperature = options.greedy() ? 0.0f : static_cast<float>(options.temperature);
  row.repetition_penalty = static_cast<float>(options.repetition_penalty);
  row.top_k = static_cast<int32_t>(std::min<int64_t>(options.top_k, std::numeric_limits<int32_t>::max()));
  row.top_p = static_cast<float>(options.top_p);
  row.log_min_p = options.min_p > 0.0 ? static_cast<float>(std::log(options.min_p)) : -std::numeric_limits<float>::infinity();
  row.draw = draw;
  row.seed = seed;
  return row;
}

TokenSampler::TokenSampler(const SamplingOptions& options, uint64_t seed) : options_(options), seed_(seed) {
  validate(options_);
}

RowSampling TokenSampler::take_row() {
  const RowSampling row = row_sampling(options_, seed_, draws_);
  if (!options_.greedy()) ++draws_;
  return row;
}

int32_t TokenSampler::check_choice(int32_t token) {
  if (token == ops::kUnusableRow) fail_unusable_logits();
  if (token == ops::kNothingToDraw) fail_user("every logit is -inf: no token can be chosen");
  SUROGATE_CHECK(token >= 0, "the sampling op returned {}", token);
  return token;
}

int32_t TokenSampler::choose(std::span<float> logits, std::span<const int32_t> context) {
  SUROGATE_CHECK(!logits.empty(), "no logits to choose from");
  const RowSampling row = take_row();
  int32_t token = 0;
  ops::sample_tokens(logits.data(), 1, static_cast<int64_t>(logits.size()), &row, context.data(),
                     static_cast<int64_t>(context.size()), &token);
  return check_choice(token);
}

Logprobs log_softmax(std::span<const float> logits, int32_t chosen, int64_t top_n) {
  if (top_n < 0) fail_user("the number of top logprobs must be >= 0, got {}", top_n);
  if (chosen < 0 || static_cast<size_t>(chosen) >= logits.size()) {
    fail_user("token {} is outside the vocabulary [0, {})", chosen, logits.size());
  }
  const double largest = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float logit : logits) sum += std::exp(static_cast<double>(logit) - largest);
  const double log_normalizer = largest + std::log(sum);
  Logprobs result;
  result.chosen = static_cast<double>(logits[static_cast<size_t>(chosen)]) - log_normalizer;
  const size_t count = std::min(static_cast<size_t>(top_n), logits.size());
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(count), ids.end(),
                    [&](int32_t a, int32_t b) {
                      const float la = logits[static_cast<size_t>(a)];
                      const float lb = logits[static_cast<size_t>(b)];
                      return la > lb || (la == lb && a < b);
                    });
  for (size_t rank = 0; rank < count; ++rank) {
    const int32_t id = ids[rank];
    result.top.push_back(
        {id, static_cast<double>(logits[static_cast<size_t>(id)]) - log_normalizer});
  }
  return result;
}

}  // namespace surogate::generate
