// The run configuration: the options of the configuration reference (docs/configuration.md)
// grouped into sections, one small struct each under config/sections/. Every field is named
// exactly as its option (except where the option names the section itself: `model` is
// model.name_or_path, `optimizer` optimizer.algorithm, `lora` lora.enabled, `template`
// data.template_name), with the documented default. The YAML file stays flat: the field table
// (config_fields.cpp) maps each option to its section and field.
//
// Enumerated options are enums (config_enums.h, which also converts them to and from their YAML
// spelling). Values that default to something derived from the model or another option are
// std::optional; load_config() resolves those it can (checkpoint_dir, max_length), the rest stay
// empty until the model is known.
//
// An owner takes only the sections it reads (the planner config::Parallel, the trackers
// config::Logging, ...) and, when it refuses a value, the ConfigSources lookup beside them.
#pragma once

#include "config/config_sources.h"
#include "config/sections/checkpoint.h"
#include "config/sections/data.h"
#include "config/sections/dataset.h"
#include "config/sections/distributed.h"
#include "config/sections/eval.h"
#include "config/sections/grpo.h"
#include "config/sections/kernels.h"
#include "config/sections/logging.h"
#include "config/sections/lora.h"
#include "config/sections/loss.h"
#include "config/sections/model.h"
#include "config/sections/offload.h"
#include "config/sections/optimizer.h"
#include "config/sections/parallel.h"
#include "config/sections/precision.h"
#include "config/sections/quant.h"
#include "config/sections/recompute.h"
#include "config/sections/run.h"
#include "config/sections/schedule.h"

namespace surogate {

struct Config {
  config::Run run;                // run_name, output_dir, restarts
  config::Checkpoint checkpoint;  // checkpoint_dir, save_steps, resume
  config::Model model;            // model, sequence_len, torch_dtype
  config::Recompute recompute;    // recompute_*
  config::Offload offload;        // offload_*, persistent_quants
  config::Parallel parallel;      // gpus, ZeRO, sequence and pipeline parallelism
  DistributedConfig distributed;  // the `distributed` mapping: multi-node runs
  config::Precision precision;    // recipe, master/gradient dtypes, FP8/FP4, fp16 loss scale
  config::Kernels kernels;        // use_cuda_graphs, use_fused_rope, chunking
  config::Optimizer optimizer;    // optimizer, learning_rate, AdamW / NorMuon settings
  config::Schedule schedule;      // epochs, steps, batch, learning-rate schedule
  config::Data data;              // datasets, templates, lengths, packing
  config::Eval eval;              // eval_steps, validation_datasets
  config::Lora lora;              // lora, lora_rank, ...
  config::Quant quant;            // qlora_*
  config::Logging logging;        // report_to, trackers, log_file, debug breakdowns
  config::Loss loss;              // the `loss` mapping: preference tuning (surogate dpo)
  config::Grpo grpo;              // the `grpo` mapping: surogate grpo

  // Where each explicitly set option came from, and why implications changed values; not an
  // option itself.
  ConfigSources sources;
};

}  // namespace surogate
