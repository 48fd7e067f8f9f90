// The run configuration: one field per option of the configuration reference, named exactly as
// the option, with the documented default. Enumerated options are enums (config_enums.h, which
// also converts them to and from their YAML spelling). Values that default to something derived
// from the model or another option are std::optional; load_config() resolves those it can
// (checkpoint_dir, max_length), the rest stay empty until the model is known.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/config_enums.h"

namespace surogate {

struct DatasetConfig {
  std::string path;
  DatasetType type = DatasetType::Auto;  // required in the file; validated present
  std::optional<std::string> subset;
  std::string split = "train";
  std::optional<int64_t> samples;
  // text
  std::string text_field = "text";
  // instruction
  std::optional<std::string> instruction_field;
  std::optional<std::string> output_field;
  std::optional<std::string> input_field;
  std::optional<SystemPromptType> system_prompt_type;
  std::optional<std::string> system_prompt_field;
  std::optional<std::string> system_prompt;
  std::optional<std::string> prompt_format;
  std::optional<std::string> prompt_format_no_input;
  // conversation
  std::string messages_field = "messages";
  std::optional<std::string> system_field;
  std::optional<std::string> tools_field;
  std::map<std::string, std::string> message_property_mappings = {{"role", "role"}, {"content", "content"}};
};

struct DistributedConfig {
  std::string ray_address = "auto";
  int64_t num_nodes = 1;
  int64_t gpus_per_node = 0;
  std::optional<std::string> worker_output_dir;
};

struct Config {
  // General
  std::optional<std::string> run_name;
  bool apply_recommended_values = false;
  int64_t num_epochs = 3;
  std::string output_dir = "output";
  std::optional<std::string> checkpoint_dir;        // resolved to output_dir when unset
  bool resume_from_checkpoint = false;
  int64_t save_steps = 50;
  int64_t save_total_limit = 5;
  int64_t max_restarts = 0;                         // addition: restarts from the latest good checkpoint after a failure
  int64_t max_nonfinite_steps = 1;                  // addition: consecutive non-finite steps skipped before the run fails

  // Model
  std::string model;
  std::optional<std::string> model_type;
  // Addition: a JSON IR file (docs/architecture.md) that replaces the built-in graph builder
  // (models/model_definition.h); the Python DSL writes such files.
  std::optional<std::string> model_definition;
  std::optional<int64_t> sequence_len;              // the model's max when unset
  std::optional<int64_t> max_model_len;
  std::optional<std::string> rope_scaling;
  std::optional<TorchDtype> torch_dtype;            // from the model config when unset

  // Recomputation
  bool recompute_swiglu = true;
  bool recompute_rmsnorm = true;
  bool recompute_ffn = true;
  bool recompute_qkv = true;
  bool recompute_att = true;
  bool recompute_block = true;
  bool recompute_lora = true;

  // Offloading
  bool offload_residual = false;
  bool offload_master = false;
  bool offload_quants = false;
  bool offload_optimizer = false;
  bool offload_grads = false;
  bool persistent_quants = false;
  bool use_zero_copy = false;
  bool use_write_combined = false;

  // Multi-GPU (ZeRO)
  int64_t zero_level = 1;
  bool shard_weights = false;
  bool shard_gradients = false;
  bool use_all_to_all_reduce = false;
  bool memcpy_all_gather = false;
  bool memcpy_send_recv = false;
  DistributedConfig distributed;

  // Hardware
  int64_t gpus = 1;
  bool use_cuda_graphs = true;
  bool deterministic_attention = false;  // cuDNN's deterministic attention backward

  // Mixed precision and recipes
  Recipe recipe = Recipe::Bf16;
  std::optional<GradientDtype> gradient_dtype;      // the matmul dtype when unset
  std::optional<MasterDtype> master_dtype;          // the model dtype when unset
  bool use_fused_rope = false;
  int64_t fp8_amax_history = 1024;
  Fp4Backend fp4_backend = Fp4Backend::Cutlass;
  int64_t skip_quant_first_layers = 0;
  int64_t skip_quant_last_layers = 0;
  double fp16_loss_scale = 65536.0;                 // addition: fp16's initial dynamic loss scale
  int64_t fp16_loss_scale_window = 2000;            // addition: clean fp16 steps before the scale doubles

  // Optimizer
  Optimizer optimizer = Optimizer::AdamW8bit;
  double learning_rate = 2e-4;
  LrScheduler lr_scheduler_type = LrScheduler::Linear;
  double warmup_ratio = 0.0;
  int64_t warmup_steps = 0;
  int64_t cooldown_steps = 0;
  double final_lr_fraction = 0.0;
  double weight_decay = 0.1;
  double max_grad_norm = 1.0;
  double adamw_beta1 = 0.9;
  double adamw_beta2 = 0.999;
  double adamw_epsilon = 1e-8;
  double normuon_momentum = 0.95;
  double normuon_beta2 = 0.95;
  bool normuon_cautious_wd = true;

  // Training loop
  int64_t per_device_train_batch_size = 2;
  int64_t gradient_accumulation_steps = 4;
  int64_t max_steps = -1;
  int64_t eval_steps = 100;

  // Datasets
  std::vector<DatasetConfig> datasets;
  std::vector<DatasetConfig> validation_datasets;
  double validation_split_ratio = 0.1;
  int64_t train_seed = 1234;
  int64_t eval_seed = 1234;
  std::optional<int64_t> dataloader_num_workers;
  bool sample_packing = true;

  // Memory
  int64_t lmhead_chunks = 1;
  int64_t attn_bwd_chunks = 1;
  bool init_projections_to_zero = false;

  // LoRA
  bool lora = true;
  int64_t lora_rank = 16;
  int64_t lora_alpha = 32;
  double lora_dropout = 0.05;
  LoraDtype lora_dtype = LoraDtype::Fp32;
  std::vector<std::string> lora_target_modules = {"all-linear"};
  bool merge_adapter = false;

  // QLoRA
  bool qlora_fp4 = false;
  bool qlora_fp8 = false;
  bool qlora_bnb = false;
  int64_t qlora_block_size = 128;
  int64_t qlora_bnb_block_size = 64;
  bool qlora_bnb_double_quant = true;
  bool qlora_four_over_six = true;

  // Chat template and lengths
  bool use_chat_template = true;
  std::optional<std::string> template_name;         // the option `template` (a C++ keyword)
  std::optional<std::string> system;
  std::optional<int64_t> max_length;                // resolved to sequence_len when unset
  TruncationStrategy truncation_strategy = TruncationStrategy::Delete;
  PaddingSide padding_side = PaddingSide::Right;
  bool padding_free = false;
  std::string loss_scale = "default";
  int64_t sequence_parallel_size = 1;
  // Additions (docs/configuration.md): pipeline parallelism, the decoder's layers split into stages.
  int64_t pipeline_parallel_size = 1;
  std::vector<int64_t> pipeline_stage_layers;       // layers of each stage; empty: balanced by cost
  std::optional<std::string> response_prefix;
  std::optional<int64_t> max_pixels;
  std::optional<NormBbox> norm_bbox;
  std::optional<std::string> agent_template;

  // Logging and reporting
  std::vector<ReportTarget> report_to;
  std::optional<std::string> log_file;
  int64_t log_gpu_util = 100;
  std::string wandb_project = "Surogate";
  std::optional<std::string> wandb_name;
  std::string aim_experiment = "Surogate";
  std::optional<std::string> aim_repo;
  std::optional<std::string> aim_name;

  // Debugging
  bool debug_time_breakdown = false;
  bool debug_memory_breakdown = false;

  // Where each explicitly set option came from ("config.yaml:12" or "--key=value"), for
  // error messages raised after loading. Keys are option paths ("datasets[0].path").
  std::map<std::string, std::string> sources;
  // Why option implications changed values, in order ("recompute_block: true ⇒ recompute_att: true").
  std::vector<std::string> notes;

  // "config.yaml:12" for an option set in the file, else "the default".
  std::string source_of(const std::string& key) const;
};

}  // namespace surogate
