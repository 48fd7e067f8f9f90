// Configuration section: state kept in host memory instead of on the GPU.
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

namespace surogate::config {

struct Offload {
  bool offload_residual = false;
  bool offload_master = false;
  bool offload_quants = false;
  bool offload_optimizer = false;
  bool offload_grads = false;
  bool persistent_quants = false;
  bool use_zero_copy = false;
  bool use_write_combined = false;
};

}  // namespace surogate::config
