// Options that are valid but not implemented yet in this build. Setting one to anything other
// than its default is rejected with a message naming it, never silently ignored. When a feature
// lands, delete its row (and update docs/configuration.md).
#include <functional>
#include <string>
#include <vector>

#include "config/config_rules.h"
#include "core/error.h"

namespace surogate {
namespace {

struct UnsupportedOption {
  std::string key;
  std::function<bool(const Config&)> is_used;
};

const std::vector<UnsupportedOption>& unsupported_options() {
  static const std::vector<UnsupportedOption> table = {
      // fp8_hybrid is implemented for LoRA (config_rules.cpp says so for full fine-tuning).
      {"recipe", [](const Config& c) { return c.recipe == Recipe::Nvfp4; }},
      {"fp4_backend", [](const Config& c) { return c.fp4_backend != Fp4Backend::Cutlass; }},
      {"offload_residual", [](const Config& c) { return c.offload_residual; }},
      {"offload_master", [](const Config& c) { return c.offload_master; }},
      {"offload_quants", [](const Config& c) { return c.offload_quants; }},
      {"offload_optimizer", [](const Config& c) { return c.offload_optimizer; }},
      {"offload_grads", [](const Config& c) { return c.offload_grads; }},
      {"persistent_quants", [](const Config& c) { return c.persistent_quants; }},
      {"use_zero_copy", [](const Config& c) { return c.use_zero_copy; }},
      {"use_write_combined", [](const Config& c) { return c.use_write_combined; }},
      // ZeRO-1 and ZeRO-2 (shard_gradients) run on CPU ranks and on GPUs; ZeRO-3 does not yet.
      {"zero_level", [](const Config& c) { return c.zero_level == 3; }},
      {"shard_weights", [](const Config& c) { return c.shard_weights; }},
      {"use_all_to_all_reduce", [](const Config& c) { return c.use_all_to_all_reduce; }},
      {"memcpy_all_gather", [](const Config& c) { return c.memcpy_all_gather; }},
      {"memcpy_send_recv", [](const Config& c) { return c.memcpy_send_recv; }},
      {"distributed.num_nodes", [](const Config& c) { return c.distributed.num_nodes != 1; }},
      {"qlora_fp4", [](const Config& c) { return c.qlora_fp4; }},
      {"sequence_parallel_size", [](const Config& c) { return c.sequence_parallel_size != 1; }},
      {"max_pixels", [](const Config& c) { return c.max_pixels.has_value(); }},
      {"norm_bbox", [](const Config& c) { return c.norm_bbox.has_value(); }},
      {"agent_template", [](const Config& c) { return c.agent_template.has_value(); }},
      {"report_to", [](const Config& c) { return !c.report_to.empty(); }},
      {"log_gpu_util", [](const Config& c) { return c.log_gpu_util != 100; }},
  };
  return table;
}

bool is_remote_url(const std::string& path) { return path.starts_with("s3://") || path.starts_with("gs://"); }

}  // namespace

void check_feature_support(const Config& config) {
  for (const auto& option : unsupported_options()) {
    if (option.is_used(config)) {
      fail_user("{}: option '{}' is valid but not implemented yet in this version of Surogate; remove it or "
                "set it back to its default (docs/configuration.md lists what is not implemented yet)",
                config.source_of(option.key), option.key);
    }
  }
  for (const auto* list : {&config.datasets, &config.validation_datasets}) {
    for (size_t i = 0; i < list->size(); ++i) {
      if (is_remote_url((*list)[i].path)) {
        std::string key = (list == &config.datasets ? "datasets[" : "validation_datasets[") + std::to_string(i) + "].path";
        fail_user("{}: option '{}' is an s3:// or gs:// URL, which is not implemented yet in this version of "
                  "Surogate; download the files and give a local path", config.source_of(key), key);
      }
    }
  }
}

}  // namespace surogate
