// Preference-tuning kernels; see preference_loss.h. The loss formulas repeat ops/preference_loss.cpp
// line for line (device code cannot call the host reference); tests/runtime_cuda compare the two.
#include "cuda/kernels/preference_loss.h"

#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/kernels/element_type.cuh"

namespace surogate::cuda {
namespace {

using kernels::to_float;

constexpr int kSequenceThreads = 256;

// Fixed-order block sum of one double per thread (deterministic).
__device__ double block_sum(double value) {
  __shared__ double partial[kSequenceThreads];
  partial[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kSequenceThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  return partial[0];
}

__device__ bool is_scored(const int32_t* targets, const int32_t* sequence_ids, int64_t row, int64_t vocab, int64_t sequence) {
  return sequence_ids[row] == sequence && targets[row] >= 0 && targets[row] < vocab;
}

__global__ void logps_kernel(const float* row_losses, const int32_t* targets, const int32_t* sequence_ids, int64_t rows,
                             int64_t vocab, float* logps) {
  const int64_t sequence = blockIdx.x;
  double sum = 0.0;
  for (int64_t row = threadIdx.x; row < rows; row += kSequenceThreads) {
    if (is_scored(targets, sequence_ids, row, vocab, sequence)) sum -= static_cast<double>(row_losses[row]);
  }
  const double total = block_sum(sum);
  if (threadIdx.x == 0) logps[sequence] = static_cast<float>(total);
}

__global__ void token_weights_kernel(const float* d_logps, const int32_t* sequence_ids, int64_t rows, float* weights, float* one) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row == 0) one[0] = 1.0f;
  if (row >= rows) return;
  weights[row] = sequence_ids[row] >= 0 ? -d_logps[sequence_ids[row]] : 0.0f;
}

template <typename E>
__global__ void column_means_kernel(const E* weight, int64_t channels, int64_t vocab, float* column_means) {
  const int64_t column = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (column >= channels) return;
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += static_cast<double>(to_float(weight[v * channels + column]));
  column_means[column] = static_cast<float>(sum / static_cast<double>(vocab));
}

template <typename E>
__global__ void logit_sums_kernel(const E* hidden, const int32_t* targets, const int32_t* sequence_ids, int64_t rows,
                                  int64_t channels, int64_t vocab, const float* column_means, float* logit_sums) {
  const int64_t sequence = blockIdx.x;
  double sum = 0.0;
  for (int64_t row = 0; row < rows; ++row) {
    if (!is_scored(targets, sequence_ids, row, vocab, sequence)) continue;
    for (int64_t c = threadIdx.x; c < channels; c += kSequenceThreads) {
      sum += static_cast<double>(to_float(hidden[row * channels + c])) * static_cast<double>(column_means[c]);
    }
  }
  const double total = block_sum(sum);
  if (threadIdx.x == 0) logit_sums[sequence] = static_cast<float>(total);
}

__device__ double sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }
__device__ double log_sigmoid(double x) { return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x)); }

// One pair's (row's) loss and derivatives: ops/preference_loss.cpp's pair_terms / kto_terms.
__device__ void pair_terms(const PreferenceLossParams& o, double c, double r, double c0, double r0, double lc, double lr,
                           double label, double kl, double& loss, double& d_chosen, double& d_rejected) {
  const double ref_c = o.reference_free ? 0.0 : c0, ref_r = o.reference_free ? 0.0 : r0;
  lc = lc > 1.0 ? lc : 1.0;
  lr = lr > 1.0 ? lr : 1.0;
  d_rejected = 0.0;
  if (o.type == 0 || o.type == 2) {  // dpo, simpo: −(1−ε)·ln σ(z) − ε·ln σ(−z)
    double nc = 1.0 / lc, nr = 1.0 / lr, z = 0.0;
    if (o.type == 0) {
      if (!o.length_norm) nc = nr = 1.0;
      z = o.beta * ((c - ref_c) * nc - (r - ref_r) * nr) - o.target_margin;
    } else {
      z = o.beta * (c * nc - r * nr) - o.simpo_gamma;
    }
    loss = -(1.0 - o.label_smoothing) * log_sigmoid(z) - o.label_smoothing * log_sigmoid(-z);
    const double d_z = -(1.0 - o.label_smoothing) * sigmoid(-z) + o.label_smoothing * sigmoid(z);
    d_chosen = d_z * o.beta * nc;
    d_rejected = -d_z * o.beta * nr;
  } else if (o.type == 1) {  // ipo
    const double delta = (c - ref_c) / lc - (r - ref_r) / lr - 1.0 / (2.0 * o.beta);
    loss = delta * delta;
    d_chosen = 2.0 * delta / lc;
    d_rejected = -2.0 * delta / lr;
  } else if (o.type == 3) {  // orpo
    const double ac = c / lc, ar = r / lr;
    const double log_odds = (ac - ar) - (log1p(-exp(ac)) - log1p(-exp(ar)));
    loss = -o.orpo_beta * log_sigmoid(log_odds);
    const double d_odds = -o.orpo_beta * sigmoid(-log_odds);
    d_chosen = d_odds / (1.0 - exp(ac)) / lc;
    d_rejected = -d_odds / (1.0 - exp(ar)) / lr;
  } else {  // kto
    const double ratio = c - ref_c;
    const bool desirable = label > 0.5;
    const double weight = desirable ? o.desirable_weight : o.undesirable_weight;
    const double s = sigmoid(desirable ? o.beta * (ratio - kl) : o.beta * (kl - ratio));
    loss = weight * (1.0 - s);
    d_chosen = -weight * s * (1.0 - s) * o.beta * (desirable ? 1.0 : -1.0);
  }
}

__global__ void preference_loss_kernel(PreferenceLossParams params, int64_t pairs, const float* logps,
                                       const float* reference_logps, const float* lengths, const float* labels,
                                       const float* scales, const float* d_loss, float* loss, float* d_logps) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  double kl = 0.0;
  if (params.type == 4) {  // ops::kto_reference_point: the rows holding one, not the padding rows
    int64_t counted = 0;
    for (int64_t i = 0; i < pairs; ++i) {
      if (lengths[i] <= 0.0f) continue;
      kl += static_cast<double>(logps[pairs + i]) - static_cast<double>(reference_logps[pairs + i]);
      ++counted;
    }
    kl = counted > 0 ? kl / static_cast<double>(counted) : 0.0;
    kl = kl > 0.0 ? kl : 0.0;
  }
  double sum = 0.0, chosen = 0.0;
  for (int64_t i = 0; i < pairs; ++i) {
    double pair_loss = 0.0, d_chosen = 0.0, d_rejected = 0.0;
    const int64_t j = params.type == 4 ? i : pairs + i;
    if (lengths[i] <= 0.0f) {  // a padding row: no pair
      if (d_logps != nullptr) d_logps[i] = d_logps[pairs + i] = 0.0f;
      continue;
    }
    pair_terms(params, logps[i], logps[j], reference_logps[i], reference_logps[j], lengths[i], lengths[j], labels[i], kl,
               pair_loss, d_chosen, d_rejected);
    sum += pair_loss;
    chosen += logps[i];
    if (d_logps != nullptr) {
      const double upstream = static_cast<double>(d_loss[0]);
      double d_c = upstream * scales[0] * d_chosen;
      if (params.type == 3) d_c -= upstream * scales[1];
      d_logps[i] = static_cast<float>(d_c);
      d_logps[pairs + i] = static_cast<float>(params.type == 4 ? 0.0 : upstream * scales[0] * d_rejected);
    }
  }
  if (loss != nullptr) {
    double value = scales[0] * sum;
    if (params.type == 3) value -= scales[1] * chosen;
    loss[0] = static_cast<float>(value);
  }
}

}  // namespace

void sequence_logps_from_row_losses(const float* row_losses, const int32_t* targets, const int32_t* sequence_ids,
                                    int64_t rows, int64_t vocab, int64_t sequences, float* logps, cudaStream_t stream) {
  if (sequences <= 0) return;
  logps_kernel<<<static_cast<unsigned>(sequences), kSequenceThreads, 0, stream>>>(row_losses, targets, sequence_ids, rows,
                                                                                   vocab, logps);
  CUDA_CHECK_LAUNCH();
}

void sequence_token_weights(const float* d_logps, const int32_t* sequence_ids, int64_t rows, float* weights, float* one,
                            cudaStream_t stream) {
  const int64_t blocks = rows > 0 ? (rows + kSequenceThreads - 1) / kSequenceThreads : 1;
  token_weights_kernel<<<static_cast<unsigned>(blocks), kSequenceThreads, 0, stream>>>(d_logps, sequence_ids, rows,
                                                                                      weights, one);
  CUDA_CHECK_LAUNCH();
}

template <typename E>
void sequence_logit_sums(const E* hidden, const E* weight, const int32_t* targets, const int32_t* sequence_ids,
                         int64_t rows, int64_t channels, int64_t vocab, int64_t sequences, float* column_means,
                         float* logit_sums, cudaStream_t stream) {
  if (sequences <= 0) return;
  column_means_kernel<E><<<static_cast<unsigned>((channels + kSequenceThreads - 1) / kSequenceThreads), kSequenceThreads,
                           0, stream>>>(weight, channels, vocab, column_means);
  CUDA_CHECK_LAUNCH();
  logit_sums_kernel<E><<<static_cast<unsigned>(sequences), kSequenceThreads, 0, stream>>>(
      hidden, targets, sequence_ids, rows, channels, vocab, column_means, logit_sums);
  CUDA_CHECK_LAUNCH();
}

void preference_loss(const PreferenceLossParams& params, int64_t pairs, const float* logps, const float* reference_logps,
                     const float* lengths, const float* labels, const float* scales, const float* d_loss, float* loss,
                     float* d_logps, cudaStream_t stream) {
  preference_loss_kernel<<<1, 32, 0, stream>>>(params, pairs, logps, reference_logps, lengths, labels, scales, d_loss,
                                               loss, d_logps);
  CUDA_CHECK_LAUNCH();
}

#define INSTANTIATE(E)                                                                                               \
  template void sequence_logit_sums(const E*, const E*, const int32_t*, const int32_t*, int64_t, int64_t, int64_t,   \
                                    int64_t, float*, float*, cudaStream_t);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
