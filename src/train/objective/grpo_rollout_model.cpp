// The GRPO rollout model's shape and memory; see grpo_rollout_model.h.
#include "train/objective/grpo_rollout_model.h"

#include <algorithm>

#include "models/model_spec.h"
#include "train/training_plan.h"

namespace surogate::train {

int64_t grpo_row_length(const Config& config) {
  return config.grpo.max_prompt_length + config.grpo.max_completion_length;
}

int64_t grpo_rollout_slots(const Config& config) {
  const int64_t completions =
      config.schedule.per_device_train_batch_size * std::max<int64_t>(1, config.schedule.gradient_accumulation_steps);
  return std::min(completions, config.grpo.generation_batch_size.value_or(kGrpoRolloutSlots));
}

generate::ModelOptions grpo_rollout_model_options(const Config& config, bool cuda) {
  generate::ModelOptions options;
  options.cuda = cuda;
  options.definition = model_definition(config.model, config.sources);
  options.slots = grpo_rollout_slots(config);
  options.max_context = grpo_row_length(config);
  return options;
}

generate::PrefillShape grpo_prefill_shape(const Config& config) {
  const int64_t chunk = std::clamp<int64_t>(config.grpo.max_prompt_length, 1, 256);
  const int64_t rows = std::min(std::max<int64_t>(kGrpoPrefillTokens / chunk, 4), grpo_rollout_slots(config));
  return {rows, chunk};
}

generate::WeightForms grpo_weight_forms(const Config& config, const io::ModelConfig& model,
                                        const models::LoraOptions* lora) {
  generate::WeightForms forms;
  if (lora != nullptr) {
    forms.lora = *lora;
    forms.qlora = qlora_options(config.quant);  // the trainer quantizes the base only under LoRA
  }
  forms.fp8 = fp8_options(config, model);
  return forms;
}

generate::KvCacheMemory predict_grpo_rollout_memory(const Config& config, const io::ModelConfig& model,
                                                    const models::LoraOptions* lora, bool cuda) {
  return generate::predict_kv_cache_memory(model, grpo_rollout_model_options(config, cuda),
                                           grpo_weight_forms(config, model, lora), grpo_prefill_shape(config));
}

GrpoReferenceMemory predict_grpo_reference_memory(const Config& config, const io::ModelConfig& model,
                                                  const models::LoraOptions* lora, bool cuda) {
  GrpoReferenceMemory memory;
  if (config.grpo.beta == 0.0) return memory;
  const generate::ModelOptions options = grpo_rollout_model_options(config, cuda);
  if (lora != nullptr) {  // the base without the adapter, read in place as the trainer holds it
    generate::WeightForms forms = grpo_weight_forms(config, model, lora);
    forms.lora.reset();
    memory.model = generate::predict_kv_cache_memory(model, options, forms);
    return memory;
  }
  const size_t dtype_bytes = cuda ? 2 : 4;
  memory.weights = static_cast<size_t>(models::parameter_count(models::parameter_specs(model))) * dtype_bytes;
  memory.model = generate::predict_kv_cache_memory(model, options);
  return memory;
}

}  // namespace surogate::train
