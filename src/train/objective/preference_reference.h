// Where `surogate dpo` keeps the reference model's log-probabilities, and what the dry run says
// about the reference (docs/preference-tuning.md, "The reference model"): no second copy of the
// weights, but the summed completion log-probs of every pair (chosen, rejected: two fp32), computed
// once before the first step by a forward of each pair (preference_objective.h).
#pragma once

#include <filesystem>
#include <string>

#include "config/config.h"

namespace surogate::train {

// <output_dir>/tokenized/reference_logps.json, beside the token cache.
std::filesystem::path preference_reference_file(const Config& config);

// The `--dry-run` lines about the reference (YAML comments, as the memory prediction's): which kind (log-probs precomputed from the starting
// weights, or none for simpo / orpo / reference_free), its cost and its memory.
std::string describe_preference_reference(const Config& config);

}  // namespace surogate::train
