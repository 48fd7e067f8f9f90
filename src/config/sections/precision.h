// Configuration section: number formats: the recipe, master and gradient dtypes, FP8/FP4 and fp16
// loss scaling.
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

#include <cstdint>
#include <optional>

#include "config/config_enums.h"

namespace surogate::config {

struct Precision {
  Recipe recipe = Recipe::Bf16;
  std::optional<GradientDtype> gradient_dtype;      // the matmul dtype when unset
  std::optional<MasterDtype> master_dtype;          // the model dtype when unset
  int64_t fp8_amax_history = 1024;
  Fp4Backend fp4_backend = Fp4Backend::Cutlass;
  int64_t skip_quant_first_layers = 0;
  int64_t skip_quant_last_layers = 0;
  double fp16_loss_scale = 65536.0;                 // addition: fp16's initial dynamic loss scale
  int64_t fp16_loss_scale_window = 2000;            // addition: clean fp16 steps before the scale doubles
};

}  // namespace surogate::config
