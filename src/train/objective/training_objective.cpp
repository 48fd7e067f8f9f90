// The configuration's training objective; see training_objective.h.
#include "train/objective/training_objective.h"

#include "data/pipeline.h"
#include "train/objective/grpo_objective.h"
#include "train/objective/preference_objective.h"
#include "train/objective/preference_reference.h"

namespace surogate::train {

std::unique_ptr<TrainingObjective> make_training_objective(const Config& config) {
  if (config.grpo.enabled) return std::make_unique<GrpoObjective>(config);
  if (!config.loss.preference) return nullptr;
  return std::make_unique<PreferenceObjective>(config.loss, preference_reference_file(config), config.model.name_or_path,
                                               static_cast<int64_t>(data::data_settings_from_config(config).sequence_len));
}

}  // namespace surogate::train
