// The reference log-probabilities' file and the dry run's line; see preference_reference.h.
#include "train/objective/preference_reference.h"

#include <fmt/format.h>

#include "ops/preference_loss.h"
#include "train/objective/preference_objective.h"

namespace surogate::train {

std::filesystem::path preference_reference_file(const Config& config) {
  return std::filesystem::path(config.run.output_dir) / "tokenized" / "reference_logps.json";
}

std::string describe_preference_reference(const Config& config) {
  const ops::PreferenceLossOptions options = preference_loss_options(config.loss);
  if (!ops::preference_loss_uses_reference(options)) {
    return fmt::format("# reference: none ({}{} needs no reference model): no reference pass, no memory\n",
                       config.loss.type, config.loss.reference_free ? " with reference_free" : "");
  }
  // LoRA adapters start at zero (B = 0): the starting weights are the base model, the adapters off.
  const char* weights = config.lora.enabled ? "the base model, LoRA adapters off" : "the loaded model";
  return fmt::format("# reference: log-probabilities precomputed from the starting weights ({})\n"
                     "#   cost: one forward per pair (train and eval), once, before the first step\n"
                     "#   memory: {} bytes per pair on the host (chosen and rejected, fp32), stored in {}; "
                     "no copy of the weights\n",
                     weights, 2 * sizeof(float), preference_reference_file(config).string());
}

}  // namespace surogate::train
