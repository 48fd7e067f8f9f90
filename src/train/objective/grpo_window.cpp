// The GRPO step's micro-batches; see grpo_window.h.
#include "train/objective/grpo_window.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "data/sample.h"

namespace surogate::train {
namespace {

// Rows [first, first + batch) as the op reads them: mask [batch, T], advantages [batch].
struct MicroSlice {
  std::vector<double> mask, advantages, logp, d_logp;
};

MicroSlice micro_slice(const rl::CompletionBatch& completions, const std::vector<double>& advantages, int64_t first,
                       int64_t batch) {
  const int64_t T = completions.tokens;
  MicroSlice slice;
  slice.mask.assign(completions.mask.begin() + first * T, completions.mask.begin() + (first + batch) * T);
  slice.advantages.assign(advantages.begin() + first, advantages.begin() + first + batch);
  slice.logp.assign(static_cast<size_t>(batch * T), 0.0);  // r = 1 whatever logp is: only its gradient matters
  slice.d_logp.assign(slice.logp.size(), 0.0);
  return slice;
}

// Row i: prompt, completion, padding; the completion's masked-in tokens labelled and weighed.
void add_row(data::PackedRows& rows, const std::vector<int32_t>& prompt, const std::vector<int32_t>& completion,
             const rl::CompletionBatch& completions, int64_t row, const double* d_logp, int64_t sequence,
             int32_t pad_id) {
  const int64_t T = completions.tokens;
  const int64_t length = static_cast<int64_t>(completion.size());
  const int64_t used = static_cast<int64_t>(prompt.size()) + length;
  SUROGATE_CHECK(used <= sequence, "a GRPO row of {} tokens fits the plan's {}", used, sequence);
  for (int64_t at = 0; at < sequence; ++at) {
    const int64_t t = at - static_cast<int64_t>(prompt.size());
    const bool in_prompt = t < 0, in_completion = t >= 0 && t < length;
    const int32_t id = in_prompt ? prompt[static_cast<size_t>(at)]
                                 : in_completion ? completion[static_cast<size_t>(t)] : pad_id;
    const bool scored = in_completion && completions.mask[static_cast<size_t>(row * T + t)] > 0.0f;
    rows.input_ids.push_back(id);
    rows.labels.push_back(scored ? id : data::kIgnoreLabel);
    rows.position_ids.push_back(at < used ? static_cast<int32_t>(at) : 0);
    rows.loss_weights.push_back(scored ? static_cast<float>(-d_logp[t]) : 0.0f);
  }
  rows.segment_lengths.push_back(static_cast<int32_t>(used));
  if (used < sequence) rows.segment_lengths.push_back(-static_cast<int32_t>(sequence - used));
  rows.row_segment_offsets.push_back(rows.segment_lengths.size());
}

}  // namespace

GrpoWindow grpo_window(const std::vector<std::vector<int32_t>>& prompts,
                       const std::vector<std::vector<int32_t>>& completion_ids, const rl::CompletionBatch& completions,
                       const std::vector<double>& advantages, ops::GrpoLossOptions options, int64_t batch,
                       int64_t sequence, int32_t pad_id) {
  const int64_t B = completions.sequences, T = completions.tokens;
  SUROGATE_CHECK(batch > 0 && B % batch == 0 && static_cast<int64_t>(prompts.size()) == B &&
                     static_cast<int64_t>(completion_ids.size()) == B &&
                     static_cast<int64_t>(advantages.size()) == B,
                 "a GRPO window of whole micro-batches ({} completions, {} per micro-batch)", B, batch);
  options.token_normalizer = static_cast<double>(std::max<int64_t>(completions.masked_tokens(), 1));
  // The weights are the ratio-1 ones without the KL term; with beta or num_iterations the step
  // trains through grpo_iterations.h, which only takes these rows' layout.
  options.beta = 0.0;
  GrpoWindow window;
  const int64_t micro_batches = B / batch;
  for (int64_t micro = 0; micro < micro_batches; ++micro) {
    MicroSlice slice = micro_slice(completions, advantages, micro * batch, batch);
    const ops::GrpoLossShape shape{batch, T};
    const ops::GrpoLossInputs<double> inputs{slice.logp.data(), nullptr, nullptr, slice.advantages.data(),
                                             slice.mask.data()};
    const ops::GrpoLossResult result = ops::grpo_loss_forward(shape, options, inputs);
    ops::grpo_loss_backward(shape, options, inputs, 1.0, slice.d_logp.data());
    window.loss += result.loss;
    const double share = 1.0 / static_cast<double>(micro_batches);
    window.metrics.kl += share * result.metrics.kl;
    window.metrics.clip_low_mean += share * result.metrics.clip_low_mean;
    window.metrics.clip_high_mean += share * result.metrics.clip_high_mean;
    window.metrics.clip_region_mean += share * result.metrics.clip_region_mean;
    data::PackedRows rows;
    rows.sequence_length = static_cast<size_t>(sequence);
    for (int64_t row = 0; row < batch; ++row) {
      const size_t at = static_cast<size_t>(micro * batch + row);
      add_row(rows, prompts[at], completion_ids[at], completions, micro * batch + row, slice.d_logp.data() + row * T,
              sequence, pad_id);
    }
    std::vector<uint64_t> indices(static_cast<size_t>(batch));
    std::iota(indices.begin(), indices.end(), uint64_t{0});
    data::PackedBatch packed = data::make_batch(data::view_of(rows), indices, pad_id);
    packed.loss_weight_sum = micro == 0 ? 1.0 : 0.0;  // the window's normaliser is 1 (see the header)
    window.batches.push_back(std::move(packed));
  }
  return window;
}

}  // namespace surogate::train
