// GRPO's reference log-probabilities (beta ≠ 0): each completion token's
// log_softmax(logits / temperature)[token] under the reference model, as TRL computes
// ref_per_token_logps: under LoRA the frozen base without the adapter (PEFT's adapter disabled), a
// KV-cache generation model opened on the trainer's weights without the adapter
// (generate/kv_cache_model.h's open_kv_cache_on_weights, lora unset: no copy of the base); under
// full fine-tuning TRL's frozen ref_model, a KV-cache model holding the starting weights loaded
// again from the model folder (open_kv_cache_model; grpo_objective.cpp). Each
// slot is fed its prompt, then its completion one token at a time, each feed's logits scoring the
// next completion token (ops/grpo_logprobs.h's token_logprobs_forward). A prompt several
// completions share is computed once (NextTokenModel::copy_prefixes, where the model copies).
#pragma once

#include <cstdint>
#include <vector>

#include "generate/next_token_model.h"
#include "train/objective/grpo_iterations.h"
#include "train/objective/grpo_rank_models.h"

namespace surogate::train {

// [B, width] row-major (B = completions.size()), 0 past each completion's end. The slots of
// `model` are cleared before and after. InternalError when a completion is longer than `width`.
std::vector<double> reference_token_logps(generate::NextTokenModel& model,
                                          const std::vector<std::vector<int32_t>>& prompts,
                                          const std::vector<std::vector<int32_t>>& completions, int64_t width,
                                          double temperature);

// The same for a generation in window order (grpo_rank_models.h), every rank at once on its own
// reference model: rank r scores the rows of the micro-batches it trains (m mod ranks = r, `batch`
// rows each).
std::vector<double> rank_reference_logps(GrpoRankModels& models, const GrpoGeneration& generation, int64_t batch,
                                         int64_t width, double temperature);

}  // namespace surogate::train
