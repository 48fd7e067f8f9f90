// Configuration section: activations recomputed in the backward pass instead of kept.
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

namespace surogate::config {

struct Recompute {
  bool recompute_swiglu = true;
  bool recompute_rmsnorm = true;
  bool recompute_ffn = true;
  bool recompute_qkv = true;
  bool recompute_att = true;
  bool recompute_block = true;
  bool recompute_lora = true;
};

}  // namespace surogate::config
