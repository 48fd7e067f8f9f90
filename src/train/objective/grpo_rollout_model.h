// `surogate grpo`'s rollout model, as the objective opens it (grpo_objective.h: a KV cache model
// reading the trainer's weights in place, generate/kv_cache_model.h) and as the training plan
// counts it before anything loads (training_plan.cpp, so the recompute choice and `--dry-run`
// leave it room): one KV cache slot per completion generated at once — the step's completions
// (per_device_train_batch_size × gradient_accumulation_steps), at most grpo.generation_batch_size
// (unset: kGrpoRolloutSlots) — each
// holding max_prompt_length + max_completion_length tokens, and the decode and prefill plans'
// activations. Every data-parallel rank holds its own.
#pragma once

#include <cstddef>
#include <cstdint>

#include "config/config.h"
#include "generate/kv_cache_plans.h"
#include "generate/next_token_model.h"
#include "io/model_config.h"
#include "models/lora.h"

namespace surogate::train {

// The most completions generated at once (KV cache slots) unless grpo.generation_batch_size says
// otherwise; a step with more runs them in waves.
inline constexpr int64_t kGrpoRolloutSlots = 64;

// The tokens of a GRPO row: the prompt's and the completion's at most.
int64_t grpo_row_length(const Config& config);

// The slots: the step's completions, at most grpo.generation_batch_size (unset: kGrpoRolloutSlots).
int64_t grpo_rollout_slots(const Config& config);

// The rollout model's options on the CUDA backend (bf16) or the CPU's (fp32).
generate::ModelOptions grpo_rollout_model_options(const Config& config, bool cuda);

// The prompt tokens a rollout model's prefill round computes (rows × chunk): the KV cache model's
// default plan's (4 × 256).
inline constexpr int64_t kGrpoPrefillTokens = 1024;

// The rollout model's prefill plan: rows of max_prompt_length tokens (at most 256; a prompt is cut
// to max_prompt_length, so each takes one row with no padding past that), as many rows as make
// kGrpoPrefillTokens (at least 4, at most the slots): 64-token prompts go 16 to a round, where the
// default plan's 4 rows of 256 computed 16 times the tokens.
generate::PrefillShape grpo_prefill_shape(const Config& config);

// How the trainer holds the weights the rollouts read: the LoRA adapter `lora` (null: full
// fine-tuning), QLoRA's quantized base (qlora_* with LoRA), the fp8_hybrid recipe's FP8 weights.
generate::WeightForms grpo_weight_forms(const Config& config, const io::ModelConfig& model,
                                        const models::LoraOptions* lora);

// What the rollout model holds beside the trainer's weights (generate/kv_cache_plans.h).
generate::KvCacheMemory predict_grpo_rollout_memory(const Config& config, const io::ModelConfig& model,
                                                    const models::LoraOptions* lora, bool cuda);

// GRPO's KL reference model beside the rollout model (beta ≠ 0; grpo_objective.cpp opens it): its
// own KV caches and plans (the rollout model's shape), reading the trainer's base in place under
// LoRA, and under full fine-tuning holding a frozen copy of the starting weights — every parameter
// in the graph's dtype (bf16 on CUDA, fp32 on the CPU). Nothing with beta 0.
struct GrpoReferenceMemory {
  size_t weights = 0;
  generate::KvCacheMemory model;
};
GrpoReferenceMemory predict_grpo_reference_memory(const Config& config, const io::ModelConfig& model,
                                                  const models::LoraOptions* lora, bool cuda);

}  // namespace surogate::train
