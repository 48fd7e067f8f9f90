#include "config/config_rules.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "config/feature_support.h"
#include "config/grpo_rules.h"
#include "core/error.h"

namespace surogate {
namespace {

// Sets `target` to true because `cause` is true, noting it when it changes anything.
void imply(Config& config, bool cause, const char* cause_name, bool& target, const char* target_name) {
  if (cause && !target) {
    target = true;
    config.sources.notes.push_back(fmt::format("{}: true ⇒ {}: true", cause_name, target_name));
  }
}

void require(bool ok, const Config& config, const std::string& key, const std::string& message) {
  if (!ok) fail_user("{}: option '{}' {}", config.sources.of(key), key, message);
}

void require_positive(const Config& config, const std::string& key, int64_t value) {
  require(value >= 1, config, key, fmt::format("must be at least 1 (got {})", value));
}

void require_fraction(const Config& config, const std::string& key, double value) {
  require(value >= 0.0 && value <= 1.0, config, key, fmt::format("must be between 0 and 1 (got {})", value));
}

template <typename T>
bool one_of(T value, std::initializer_list<T> allowed) {
  return std::find(allowed.begin(), allowed.end(), value) != allowed.end();
}

// An instruction prompt format may use {system}, {instruction}, {input} and {output}; any other
// {name} would stay in the prompt as literal text, so a misspelt placeholder (say {instrution})
// would silently drop the field from every sample. {instruction} itself must be there.
void validate_prompt_format(const Config& config, const std::string& key, const std::optional<std::string>& format) {
  if (!format) return;
  const std::string& text = *format;
  for (size_t open = text.find('{'); open != std::string::npos; open = text.find('{', open + 1)) {
    size_t end = open + 1;
    while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) ++end;
    if (end == open + 1 || end >= text.size() || text[end] != '}' || std::isdigit(static_cast<unsigned char>(text[open + 1]))) {
      continue;  // not {identifier}: literal text
    }
    const std::string name = text.substr(open + 1, end - open - 1);
    require(one_of<std::string>(name, {"system", "instruction", "input", "output"}), config, key,
            fmt::format("uses the placeholder {{{}}}, which is not one of {{system}}, {{instruction}}, {{input}}, "
                        "{{output}}", name));
  }
  require(text.find("{instruction}") != std::string::npos, config, key,
          "must contain {instruction} (otherwise the instruction is left out of every sample)");
}

void validate_dataset(const Config& config, const DatasetConfig& dataset, const std::string& key) {
  validate_prompt_format(config, key + ".prompt_format", dataset.prompt_format);
  validate_prompt_format(config, key + ".prompt_format_no_input", dataset.prompt_format_no_input);
  require(!dataset.path.empty(), config, key + ".path", "is required: a local file or folder, or a hub dataset id");
  for (const char* scheme : {"s3://", "gs://"}) {
    if (dataset.path.starts_with(scheme)) {
      const std::string bucket = dataset.path.substr(5, dataset.path.find('/', 5) - 5);
      require(!bucket.empty(), config, key + ".path",
              fmt::format("'{}' names no bucket: write {}BUCKET/KEY (an object, or a prefix of objects)", dataset.path,
                          scheme));
    }
  }
  if (dataset.samples) require_positive(config, key + ".samples", *dataset.samples);
  if (dataset.type == DatasetType::Instruction) {
    require(dataset.instruction_field.has_value(), config, key + ".instruction_field",
            "is required for type: instruction (the column holding the instruction)");
    require(dataset.output_field.has_value(), config, key + ".output_field",
            "is required for type: instruction (the column holding the expected answer)");
  }
  if (dataset.system_prompt_type == SystemPromptType::Field) {
    require(dataset.system_prompt_field.has_value(), config, key + ".system_prompt_field",
            "is required when system_prompt_type is field");
  }
  if (dataset.system_prompt_type == SystemPromptType::Fixed) {
    require(dataset.system_prompt.has_value(), config, key + ".system_prompt",
            "is required when system_prompt_type is fixed");
  }
}

}  // namespace

void apply_implications(Config& config) {
  // recompute_lora only means something with LoRA; it requires (and sets) recompute_block.
  if (config.lora.enabled)
    imply(config, config.recompute.recompute_lora, "recompute_lora", config.recompute.recompute_block,
          "recompute_block");
  imply(config, config.recompute.recompute_block, "recompute_block", config.recompute.recompute_att, "recompute_att");
  imply(config, config.recompute.recompute_block, "recompute_block", config.recompute.recompute_ffn, "recompute_ffn");
  imply(config, config.recompute.recompute_block, "recompute_block", config.recompute.recompute_rmsnorm,
        "recompute_rmsnorm");
  imply(config, config.recompute.recompute_att, "recompute_att", config.recompute.recompute_qkv, "recompute_qkv");
  imply(config, config.recompute.recompute_ffn, "recompute_ffn", config.recompute.recompute_swiglu, "recompute_swiglu");
  imply(config, config.parallel.zero_level >= 2, "zero_level >= 2", config.parallel.shard_gradients, "shard_gradients");
  imply(config, config.parallel.zero_level >= 3, "zero_level 3", config.parallel.shard_weights, "shard_weights");

  // lora_dtype: bf16 keeps the adapters (every trainable tensor of a LoRA run) and their
  // optimizer inputs in bf16: no fp32 masters, bf16 gradient accumulators. An error naming either
  // dtype then also names lora_dtype, where the value came from.
  if (config.lora.enabled && config.lora.lora_dtype == LoraDtype::Bf16) {
    const std::string origin = config.sources.of("lora_dtype") + " (lora_dtype: bf16 ⇒ ";
    if (!config.precision.master_dtype) {
      config.precision.master_dtype = MasterDtype::Bf16;
      config.sources["master_dtype"] = origin + "master_dtype: bf16)";
      config.sources.notes.push_back("lora_dtype: bf16 ⇒ master_dtype: bf16");
    }
    if (!config.precision.gradient_dtype) {
      config.precision.gradient_dtype = GradientDtype::Bf16;
      config.sources["gradient_dtype"] = origin + "gradient_dtype: bf16)";
      config.sources.notes.push_back("lora_dtype: bf16 ⇒ gradient_dtype: bf16");
    }
  }
  if (!config.checkpoint.checkpoint_dir) {
    config.checkpoint.checkpoint_dir = config.run.output_dir;
    config.sources.notes.push_back("checkpoint_dir unset ⇒ checkpoint_dir: output_dir");
  }
  if (!config.data.max_length && config.model.sequence_len) {
    config.data.max_length = config.model.sequence_len;
    config.sources.notes.push_back("max_length unset ⇒ max_length: sequence_len");
  }
  bool qlora = config.quant.qlora_fp4 || config.quant.qlora_fp8 || config.quant.qlora_bnb;
  if (config.kernels.use_cuda_graphs && qlora) {
    config.kernels.use_cuda_graphs = false;
    config.sources.notes.push_back("QLoRA ⇒ use_cuda_graphs: false");
  }
  // The exchange ops of sequence parallelism run NCCL all-to-alls inside the micro-batch's plan; a
  // captured graph of them stalled both GPUs on the first replay (2 × H200, 2026-11-27), so the
  // plan runs eagerly, as every micro-batch that reduces gradients already does.
  if (config.kernels.use_cuda_graphs && config.parallel.sequence_parallel_size > 1) {
    config.kernels.use_cuda_graphs = false;
    config.sources.notes.push_back("sequence_parallel_size > 1 ⇒ use_cuda_graphs: false");
  }
  if (config.kernels.use_cuda_graphs && config.lora.enabled && config.recompute.recompute_lora &&
      config.offload.offload_residual) {
    config.kernels.use_cuda_graphs = false;
    config.sources.notes.push_back("recompute_lora with offload_residual ⇒ use_cuda_graphs: false");
  }
  if (config.schedule.warmup_steps > 0 && config.schedule.warmup_ratio > 0.0) {
    config.sources.notes.push_back("warmup_steps > 0 ⇒ warmup_ratio is not used");
  }
}

namespace {

// Sequence and pipeline parallelism (distributed/parallel_layout.h): the sizes and the stages'
// layer counts on their own; what they compose with is in the feature-support table.
void validate_model_parallel(const Config& config) {
  require_positive(config, "sequence_parallel_size", config.parallel.sequence_parallel_size);
  require_positive(config, "pipeline_parallel_size", config.parallel.pipeline_parallel_size);
  for (int64_t layers : config.parallel.pipeline_stage_layers) {
    require(layers >= 1, config, "pipeline_stage_layers",
            fmt::format("gives a stage {} layers; every stage needs at least one", layers));
  }
}

// The multi-GPU transport options of the reference's own threads backend, and where Ray is.
void validate_distributed(const Config& config) {
  require(!config.parallel.use_all_to_all_reduce, config, "use_all_to_all_reduce",
          "is not offered: gradients are summed by the collective library's own all-reduce and reduce-scatter "
          "(NCCL on GPUs, which picks ring, tree or NVLS by size and topology — NCCL_ALGO chooses one; gloo on CPU "
          "ranks); an all-to-all exchange built beside them would be a second transport that sums in another order. "
          "Remove the option");
  require(!config.parallel.memcpy_all_gather, config, "memcpy_all_gather",
          "is not offered: it belongs to a threads-only backend that copies shards between the GPUs of one process "
          "with cudaMemcpy; here every all-gather is NCCL's, the same within a machine (where NCCL moves data over "
          "NVLink or PCIe itself) and across processes and machines. Remove the option");
  require(!config.parallel.memcpy_send_recv, config, "memcpy_send_recv",
          "is not offered: it belongs to a threads-only backend that copies between the GPUs of one process with "
          "cudaMemcpy; here every transfer between ranks is an NCCL collective, within a machine and across "
          "machines alike. Remove the option");
  const std::string& address = config.distributed.ray_address;
  const size_t colon = address.rfind(':');
  const bool host_and_port = colon != std::string::npos && colon > 0 && colon + 1 < address.size() &&
                             address.find_first_not_of("0123456789", colon + 1) == std::string::npos;
  require(address == "auto" || address == "local" || (address.starts_with("ray://") && address.size() > 6) ||
              host_and_port,
          config, "distributed.ray_address",
          fmt::format("must be auto (the Ray cluster running here), local (start Ray on this machine), "
                      "ray://host:port (a cluster's Ray client server) or a cluster's host:port (got '{}')", address));
  require(!config.distributed.worker_output_dir || !config.distributed.worker_output_dir->empty(), config,
          "distributed.worker_output_dir", "must name a folder when set (or leave it unset for /tmp/surogate-<run_name>)");
}

// fp16's dynamic loss scale (train/fp16_loss_scaler.h); that it only applies to torch_dtype:
// float16 is in the feature-support table.
void validate_fp16_loss_scale(const Config& config) {
  require(std::isfinite(config.precision.fp16_loss_scale) && config.precision.fp16_loss_scale >= 1.0, config,
          "fp16_loss_scale",
          fmt::format("must be a finite number of at least 1 (got {}); powers of two keep the scaling exact",
                      config.precision.fp16_loss_scale));
  require_positive(config, "fp16_loss_scale_window", config.precision.fp16_loss_scale_window);
}

// The `loss` mapping (surogate dpo): the type's name and each value's range, as TRL checks them.
void validate_loss(const Config& config) {
  const config::Loss& loss = config.loss;
  const bool known = loss.type == "dpo" || loss.type == "ipo" || loss.type == "simpo" || loss.type == "orpo" ||
                     loss.type == "kto";
  require(known, config, "loss.type", fmt::format("must be dpo, ipo, simpo, orpo or kto (got '{}')", loss.type));
  require(loss.dpo_beta > 0.0, config, "loss.dpo_beta", fmt::format("must be positive (got {})", loss.dpo_beta));
  require(loss.beta > 0.0, config, "loss.beta", fmt::format("must be positive (got {})", loss.beta));
  require(loss.label_smoothing >= 0.0 && loss.label_smoothing < 0.5, config, "loss.label_smoothing",
          fmt::format("must be in [0, 0.5) (got {})", loss.label_smoothing));
  require(loss.desirable_weight > 0.0, config, "loss.desirable_weight", "must be positive");
  require(loss.undesirable_weight > 0.0, config, "loss.undesirable_weight", "must be positive");
}

}  // namespace

void validate_config(const Config& config, const std::string& file_label) {
  if (config.model.name_or_path.empty()) {
    fail_user("{}: option 'model' is required: a local Hugging Face model folder or a hub id like Qwen/Qwen3-0.6B",
              file_label);
  }
  require_positive(config, "num_epochs", config.schedule.num_epochs);
  require_positive(config, "save_steps", config.checkpoint.save_steps);
  require_positive(config, "save_total_limit", config.checkpoint.save_total_limit);
  require(config.run.max_restarts >= 0, config, "max_restarts", "must not be negative (0: a failed run stays stopped)");
  require(config.run.max_nonfinite_steps >= 0, config, "max_nonfinite_steps",
          "must not be negative (0: the first non-finite step stops the run)");
  if (config.model.sequence_len) require_positive(config, "sequence_len", *config.model.sequence_len);
  if (config.model.max_model_len) require_positive(config, "max_model_len", *config.model.max_model_len);
  if (config.data.max_length) require_positive(config, "max_length", *config.data.max_length);
  require(one_of<int64_t>(config.parallel.zero_level, {1, 2, 3}), config, "zero_level",
          fmt::format("must be 1, 2 or 3 (got {})", config.parallel.zero_level));
  require(config.parallel.gpus >= 0, config, "gpus",
          fmt::format("must be 0 (all GPUs) or a positive count (got {})", config.parallel.gpus));
  require_positive(config, "distributed.num_nodes", config.distributed.num_nodes);
  require(config.distributed.gpus_per_node >= 0, config, "distributed.gpus_per_node", "must not be negative");
  validate_distributed(config);
  require_positive(config, "fp8_amax_history", config.precision.fp8_amax_history);
  require(config.precision.skip_quant_first_layers >= 0, config, "skip_quant_first_layers", "must not be negative");
  require(config.precision.skip_quant_last_layers >= 0, config, "skip_quant_last_layers", "must not be negative");
  validate_fp16_loss_scale(config);

  require(config.optimizer.learning_rate > 0.0, config, "learning_rate",
          fmt::format("must be positive (got {})", config.optimizer.learning_rate));
  require_fraction(config, "warmup_ratio", config.schedule.warmup_ratio);
  require(config.schedule.warmup_steps >= 0, config, "warmup_steps", "must not be negative");
  require(config.schedule.cooldown_steps >= 0, config, "cooldown_steps", "must not be negative");
  require_fraction(config, "final_lr_fraction", config.schedule.final_lr_fraction);
  require(config.optimizer.weight_decay >= 0.0, config, "weight_decay", "must not be negative");
  require(config.optimizer.max_grad_norm >= 0.0, config, "max_grad_norm", "must not be negative (0 disables clipping)");
  for (auto [key, value] :
       {std::pair{"adamw_beta1", config.optimizer.adamw_beta1}, std::pair{"adamw_beta2", config.optimizer.adamw_beta2},
        std::pair{"normuon_momentum", config.optimizer.normuon_momentum},
        std::pair{"normuon_beta2", config.optimizer.normuon_beta2}}) {
    require(value >= 0.0 && value < 1.0, config, key, fmt::format("must be in [0, 1) (got {})", value));
  }
  require(config.optimizer.adamw_epsilon > 0.0, config, "adamw_epsilon", "must be positive");

  require_positive(config, "per_device_train_batch_size", config.schedule.per_device_train_batch_size);
  require_positive(config, "gradient_accumulation_steps", config.schedule.gradient_accumulation_steps);
  require(config.schedule.max_steps == -1 || config.schedule.max_steps >= 1, config, "max_steps",
          fmt::format("must be -1 (derive from num_epochs) or at least 1 (got {})", config.schedule.max_steps));
  require_positive(config, "eval_steps", config.eval.eval_steps);
  require_fraction(config, "validation_split_ratio", config.eval.validation_split_ratio);
  if (config.data.dataloader_num_workers) {
    require(*config.data.dataloader_num_workers >= 0, config, "dataloader_num_workers", "must not be negative");
  }
  require_positive(config, "lmhead_chunks", config.kernels.lmhead_chunks);
  require_positive(config, "attn_bwd_chunks", config.kernels.attn_bwd_chunks);
  validate_model_parallel(config);
  require(config.logging.log_gpu_util >= 0, config, "log_gpu_util", "must not be negative");

  validate_loss(config);
  validate_grpo(config);
  require_positive(config, "lora_rank", config.lora.lora_rank);
  require_positive(config, "lora_alpha", config.lora.lora_alpha);
  require(config.lora.lora_dropout >= 0.0 && config.lora.lora_dropout < 1.0, config, "lora_dropout",
          fmt::format("must be in [0, 1) (got {})", config.lora.lora_dropout));
  require(one_of<int64_t>(config.quant.qlora_block_size, {64, 128, 256}), config, "qlora_block_size",
          fmt::format("must be 64, 128 or 256 (got {})", config.quant.qlora_block_size));
  require(one_of<int64_t>(config.quant.qlora_bnb_block_size, {64, 128, 256, 512}), config, "qlora_bnb_block_size",
          fmt::format("must be 64, 128, 256 or 512 (got {})", config.quant.qlora_bnb_block_size));

  if (config.data.datasets.empty()) {
    fail_user("{}: option 'datasets' needs at least one entry with path and type", file_label);
  }
  for (size_t i = 0; i < config.data.datasets.size(); ++i) {
    validate_dataset(config, config.data.datasets[i], fmt::format("datasets[{}]", i));
  }
  for (size_t i = 0; i < config.eval.validation_datasets.size(); ++i) {
    validate_dataset(config, config.eval.validation_datasets[i], fmt::format("validation_datasets[{}]", i));
  }
  // The combinations of options (feature_support.h), once each option is valid on its own.
  refuse_unsupported(config, SupportStage::Options);
}

void validate_for_hardware(const Config& config, int best_sm) {
  RunShape shape;
  shape.gpu_sm = best_sm;
  refuse_unsupported(config, SupportStage::Hardware, shape);
}

bool evaluates(const Config& config) {
  if (config.grpo.enabled) return false;  // surogate grpo splits no prompts off (train/run/start_prompts.cpp)
  return !config.eval.validation_datasets.empty() || config.eval.validation_split_ratio > 0.0;
}

}  // namespace surogate
