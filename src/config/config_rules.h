// What the options imply for each other, and the constraints between them.
#pragma once

#include <string>

#include "config/config.h"

namespace surogate {

// Applies the option implications (recompute hierarchy, ZeRO levels, defaults that follow other
// options) and records each change in config.notes.
void apply_implications(Config& config);

// Checks ranges, enums, required dataset fields, and then the combinations of options the
// feature-support table refuses (feature_support.h). `file_label` names the config file in
// messages about missing options.
void validate_config(const Config& config, const std::string& file_label);

// Checks what needs a particular GPU (the feature-support table's Hardware rows): fp8 needs SM89+,
// the nvfp4 recipe SM100+ (qlora_fp4 runs anywhere). `best_sm` is the compute capability as
// major*10+minor of the best GPU used, or 0 when running on the CPU.
void validate_for_hardware(const Config& config, int best_sm);

// Whether the run evaluates: validation_datasets are named, or validation_split_ratio holds rows
// out (never under surogate grpo, which reads neither). The evaluator (its arena and LM-head
// scratch, on GPU 0) exists only then.
bool evaluates(const Config& config);

}  // namespace surogate
