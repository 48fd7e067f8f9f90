#include "config/config_rules.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate {
namespace {

// Sets `target` to true because `cause` is true, noting it when it changes anything.
void imply(Config& config, bool cause, const char* cause_name, bool& target, const char* target_name) {
  if (cause && !target) {
    target = true;
    config.notes.push_back(fmt::format("{}: true ⇒ {}: true", cause_name, target_name));
  }
}

void require(bool ok, const Config& config, const std::string& key, const std::string& message) {
  if (!ok) fail_user("{}: option '{}' {}", config.source_of(key), key, message);
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
  if (config.lora) imply(config, config.recompute_lora, "recompute_lora", config.recompute_block, "recompute_block");
  imply(config, config.recompute_block, "recompute_block", config.recompute_att, "recompute_att");
  imply(config, config.recompute_block, "recompute_block", config.recompute_ffn, "recompute_ffn");
  imply(config, config.recompute_block, "recompute_block", config.recompute_rmsnorm, "recompute_rmsnorm");
  imply(config, config.recompute_att, "recompute_att", config.recompute_qkv, "recompute_qkv");
  imply(config, config.recompute_ffn, "recompute_ffn", config.recompute_swiglu, "recompute_swiglu");
  imply(config, config.zero_level >= 2, "zero_level >= 2", config.shard_gradients, "shard_gradients");
  imply(config, config.zero_level >= 3, "zero_level 3", config.shard_weights, "shard_weights");

  // lora_dtype: bf16 keeps the adapters (every trainable tensor of a LoRA run) and their
  // optimizer inputs in bf16: no fp32 masters, bf16 gradient accumulators. An error naming either
  // dtype then also names lora_dtype, where the value came from.
  if (config.lora && config.lora_dtype == LoraDtype::Bf16) {
    const std::string origin = config.source_of("lora_dtype") + " (lora_dtype: bf16 ⇒ ";
    if (!config.master_dtype) {
      config.master_dtype = MasterDtype::Bf16;
      config.sources["master_dtype"] = origin + "master_dtype: bf16)";
      config.notes.push_back("lora_dtype: bf16 ⇒ master_dtype: bf16");
    }
    if (!config.gradient_dtype) {
      config.gradient_dtype = GradientDtype::Bf16;
      config.sources["gradient_dtype"] = origin + "gradient_dtype: bf16)";
      config.notes.push_back("lora_dtype: bf16 ⇒ gradient_dtype: bf16");
    }
  }
  if (!config.checkpoint_dir) {
    config.checkpoint_dir = config.output_dir;
    config.notes.push_back("checkpoint_dir unset ⇒ checkpoint_dir: output_dir");
  }
  if (!config.max_length && config.sequence_len) {
    config.max_length = config.sequence_len;
    config.notes.push_back("max_length unset ⇒ max_length: sequence_len");
  }
  bool qlora = config.qlora_fp4 || config.qlora_fp8 || config.qlora_bnb;
  if (config.use_cuda_graphs && qlora) {
    config.use_cuda_graphs = false;
    config.notes.push_back("QLoRA ⇒ use_cuda_graphs: false");
  }
  // The exchange ops of sequence parallelism run NCCL all-to-alls inside the micro-batch's plan; a
  // captured graph of them stalled both GPUs on the first replay (2 × H200, 2026-11-27), so the
  // plan runs eagerly, as every micro-batch that reduces gradients already does.
  if (config.use_cuda_graphs && config.sequence_parallel_size > 1) {
    config.use_cuda_graphs = false;
    config.notes.push_back("sequence_parallel_size > 1 ⇒ use_cuda_graphs: false");
  }
  if (config.use_cuda_graphs && config.lora && config.recompute_lora && config.offload_residual) {
    config.use_cuda_graphs = false;
    config.notes.push_back("recompute_lora with offload_residual ⇒ use_cuda_graphs: false");
  }
  if (config.warmup_steps > 0 && config.warmup_ratio > 0.0) {
    config.notes.push_back("warmup_steps > 0 ⇒ warmup_ratio is not used");
  }
}

namespace {

// The fp8_hybrid recipe's options (models/fp8_recipe.h). The recipe itself combines with every
// training mode (LoRA, QLoRA, full fine-tuning, pt) and with data parallelism.
void validate_fp8_recipe(const Config& config) {
  const bool fp8 = config.recipe == Recipe::Fp8Hybrid;
  const char* only_fp8 = "only applies to recipe: fp8_hybrid (the quantized recipe this version implements); "
                         "set recipe: fp8_hybrid or remove the option";
  require(fp8 || config.fp8_amax_history == 1024, config, "fp8_amax_history", only_fp8);
  require(fp8 || config.skip_quant_first_layers == 0, config, "skip_quant_first_layers", only_fp8);
  require(fp8 || config.skip_quant_last_layers == 0, config, "skip_quant_last_layers", only_fp8);
  const bool fp8_gradients = config.gradient_dtype && (*config.gradient_dtype == GradientDtype::Fp8E4M3 ||
                                                       *config.gradient_dtype == GradientDtype::Fp8E5M2);
  require(fp8 || !fp8_gradients, config, "gradient_dtype",
          "fp8_e4m3 / fp8_e5m2 are the fp8_hybrid recipe's backward-matmul formats; set recipe: fp8_hybrid, or "
          "use bf16 / fp32");
}

// Sequence and pipeline parallelism (distributed/parallel_layout.h): what each composes with.
// They compose with each other on CPU ranks (gpus = data × sequence × pipeline); the CUDA backend
// refuses the two together (train/device/backend_selection.cpp). That the ranks (gpus) are a
// multiple of their product, that the heads and sequence_len split
// over the sequence group, and that pipeline_stage_layers add up to the model's layers depend on
// the machine or the model: the layout and the graph passes check those, naming the options.
void validate_model_parallel(const Config& config) {
  require_positive(config, "sequence_parallel_size", config.sequence_parallel_size);
  require_positive(config, "pipeline_parallel_size", config.pipeline_parallel_size);
  const bool sequence = config.sequence_parallel_size > 1, pipeline = config.pipeline_parallel_size > 1;
  for (const auto& [key, set] : {std::pair{"sequence_parallel_size", sequence}, std::pair{"pipeline_parallel_size", pipeline}}) {
    require(!set || config.recipe != Recipe::Fp8Hybrid, config, key,
            "cannot be combined with recipe: fp8_hybrid yet (its quantizers scale by one amax over a whole "
            "micro-batch's tensor, which the split ranks do not hold); use recipe: bf16");
    require(!set || !config.offload_residual, config, key,
            "cannot be combined with offload_residual yet (the residual checkpoints' host copies are not built for "
            "split graphs); remove one of the two");
  }
  // ZeRO-3 shards the weights over all data × sequence ranks (the data-parallel devices); the
  // pipeline devices gather no weights yet.
  const bool zero3 = config.zero_level >= 3 || config.shard_weights;
  require(!pipeline || !zero3, config, "pipeline_parallel_size",
          fmt::format("cannot be combined with {} yet (ZeRO-3's weight gathering is built for data and sequence "
                      "parallelism); use zero_level 1 or 2 with it",
                      config.zero_level >= 3 ? "zero_level: 3" : "shard_weights"));
  if (!config.pipeline_stage_layers.empty()) {
    require(static_cast<int64_t>(config.pipeline_stage_layers.size()) == config.pipeline_parallel_size, config,
            "pipeline_stage_layers",
            fmt::format("lists {} stages, but pipeline_parallel_size is {}: give one layer count per stage, or leave "
                        "it unset to balance the stages by the memory plan's per-layer cost",
                        config.pipeline_stage_layers.size(), config.pipeline_parallel_size));
    for (int64_t layers : config.pipeline_stage_layers) {
      require(layers >= 1, config, "pipeline_stage_layers",
              fmt::format("gives a stage {} layers; every stage needs at least one", layers));
    }
  }
}

// The offload_* options of the CUDA backend (train/device/host_offload_plan.h).
void validate_offload(const Config& config) {
  const bool offload = config.offload_master || config.offload_optimizer || config.offload_grads;
  for (const char* key : {"use_zero_copy", "use_write_combined"}) {
    const bool set = std::string(key) == "use_zero_copy" ? config.use_zero_copy : config.use_write_combined;
    require(!set || offload, config, key,
            "only applies to offloaded buffers: set offload_master, offload_optimizer or offload_grads, or remove it");
  }
  require(!config.offload_master || config.master_dtype != MasterDtype::Bf16, config, "offload_master",
          "offloads the fp32 master weights, and master_dtype: bf16 keeps none; remove one of the two");
  // Staging (use_zero_copy off) cuts the step into chunks of whole tensors, each with its own
  // optimizer: NorMuon groups matrices across tensors, and bf16 masters key their stochastic
  // rounding by a tensor's place in the one optimizer's list.
  const bool staged = (config.offload_master || config.offload_optimizer) && !config.use_zero_copy;
  require(!staged || config.optimizer != Optimizer::NorMuon, config, config.offload_master ? "offload_master" : "offload_optimizer",
          "with optimizer: normuon needs use_zero_copy: true (the staged step, use_zero_copy: false, is implemented "
          "for adamw and adamw_8bit)");
  require(!staged || !config.offload_optimizer || config.master_dtype != MasterDtype::Bf16, config, "offload_optimizer",
          "with master_dtype: bf16 needs use_zero_copy: true (the staged step, use_zero_copy: false, is implemented "
          "with fp32 master weights)");
}

// NVFP4: qlora_fp4 stores the frozen base in it on any GPU (dequantized to bf16 for the products);
// the nvfp4 recipe, whose products run on FP4 tensor cores, waits for a Blackwell GPU to run and
// test it on (its quantizer, quant/nvfp4.h, is built and emulated exactly on the CPU).
void validate_fp4(const Config& config) {
  require(config.recipe != Recipe::Nvfp4, config, "recipe",
          "nvfp4 is not implemented yet: its matmuls run on FP4 tensor cores, which need a Blackwell GPU (SM100+) "
          "to run and test them on (its NVFP4 quantizer is built, emulated exactly on the CPU). Use recipe: bf16 "
          "or fp8_hybrid; for NVFP4's memory saving on the frozen base, qlora_fp4: true works on any GPU");
  require(config.fp4_backend == Fp4Backend::Cutlass, config, "fp4_backend",
          "only applies to recipe: nvfp4 (the FP4 tensor-core matmul's library, Blackwell only), which this "
          "version does not run; qlora_fp4 dequantizes to bf16 and uses no FP4 matmul: remove the option");
  require(config.qlora_fp4 || config.qlora_four_over_six, config, "qlora_four_over_six",
          "only applies to qlora_fp4 (the NVFP4 base's block scale rule); set qlora_fp4: true or remove the option");
}

// The multi-GPU transport options of the reference's own threads backend, ZeRO-3's limits, and
// where Ray is.
void validate_distributed(const Config& config) {
  // The FP8 copies of trained weights (models/fp8_recipe.h) are rewritten from each whole weight
  // after every step, on every rank; ZeRO-3 keeps no rank's whole weights between uses.
  require(!config.shard_weights || config.recipe != Recipe::Fp8Hybrid || config.lora, config,
          config.zero_level >= 3 ? "zero_level" : "shard_weights",
          "with recipe: fp8_hybrid needs lora: true: full fine-tuning in FP8 keeps an FP8 copy of every trained weight "
          "on every rank, which sharded weights cannot give. Use zero_level 1 or 2 with fp8_hybrid, or recipe: bf16");
  require(!config.use_all_to_all_reduce, config, "use_all_to_all_reduce",
          "is not offered: gradients are summed by the collective library's own all-reduce and reduce-scatter "
          "(NCCL on GPUs, which picks ring, tree or NVLS by size and topology — NCCL_ALGO chooses one; gloo on CPU "
          "ranks); an all-to-all exchange built beside them would be a second transport that sums in another order. "
          "Remove the option");
  require(!config.memcpy_all_gather, config, "memcpy_all_gather",
          "is not offered: it belongs to a threads-only backend that copies shards between the GPUs of one process "
          "with cudaMemcpy; here every all-gather is NCCL's, the same within a machine (where NCCL moves data over "
          "NVLink or PCIe itself) and across processes and machines. Remove the option");
  require(!config.memcpy_send_recv, config, "memcpy_send_recv",
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

// fp16's dynamic loss scale (train/fp16_loss_scaler.h): only with torch_dtype: float16, the option
// that asks for fp16 training.
void validate_fp16_loss_scale(const Config& config) {
  require(std::isfinite(config.fp16_loss_scale) && config.fp16_loss_scale >= 1.0, config, "fp16_loss_scale",
          fmt::format("must be a finite number of at least 1 (got {}); powers of two keep the scaling exact",
                      config.fp16_loss_scale));
  require_positive(config, "fp16_loss_scale_window", config.fp16_loss_scale_window);
  const bool not_fp16 = config.torch_dtype != TorchDtype::Float16;
  const char* only_fp16 = "only applies to fp16 training (torch_dtype: float16); remove it or set torch_dtype: float16";
  if (!not_fp16) {
    require(config.recipe == Recipe::Bf16, config, "torch_dtype",
            "float16 (fp16 training with loss scaling) does not combine with recipe: fp8_hybrid; use one of them");
  }
  // Set to anything but its default (a dumped configuration lists every option at its value).
  require(!not_fp16 || config.fp16_loss_scale == Config{}.fp16_loss_scale, config, "fp16_loss_scale", only_fp16);
  require(!not_fp16 || config.fp16_loss_scale_window == Config{}.fp16_loss_scale_window, config,
          "fp16_loss_scale_window", only_fp16);
}

}  // namespace

void validate_config(const Config& config, const std::string& file_label) {
  if (config.model.empty()) {
    fail_user("{}: option 'model' is required: a local Hugging Face model folder or a hub id like Qwen/Qwen3-0.6B",
              file_label);
  }
  require_positive(config, "num_epochs", config.num_epochs);
  require_positive(config, "save_steps", config.save_steps);
  require_positive(config, "save_total_limit", config.save_total_limit);
  require(config.max_restarts >= 0, config, "max_restarts", "must not be negative (0: a failed run stays stopped)");
  require(config.max_nonfinite_steps >= 0, config, "max_nonfinite_steps",
          "must not be negative (0: the first non-finite step stops the run)");
  if (config.sequence_len) require_positive(config, "sequence_len", *config.sequence_len);
  if (config.max_model_len) require_positive(config, "max_model_len", *config.max_model_len);
  if (config.max_length) require_positive(config, "max_length", *config.max_length);
  require(one_of<int64_t>(config.zero_level, {1, 2, 3}), config, "zero_level",
          fmt::format("must be 1, 2 or 3 (got {})", config.zero_level));
  require(config.gpus >= 0, config, "gpus", fmt::format("must be 0 (all GPUs) or a positive count (got {})", config.gpus));
  require_positive(config, "distributed.num_nodes", config.distributed.num_nodes);
  require(config.distributed.gpus_per_node >= 0, config, "distributed.gpus_per_node", "must not be negative");
  validate_distributed(config);
  require_positive(config, "fp8_amax_history", config.fp8_amax_history);
  require(config.skip_quant_first_layers >= 0, config, "skip_quant_first_layers", "must not be negative");
  require(config.skip_quant_last_layers >= 0, config, "skip_quant_last_layers", "must not be negative");
  validate_fp8_recipe(config);
  validate_fp16_loss_scale(config);
  validate_fp4(config);

  require(config.learning_rate > 0.0, config, "learning_rate", fmt::format("must be positive (got {})", config.learning_rate));
  require_fraction(config, "warmup_ratio", config.warmup_ratio);
  require(config.warmup_steps >= 0, config, "warmup_steps", "must not be negative");
  require(config.cooldown_steps >= 0, config, "cooldown_steps", "must not be negative");
  require(config.cooldown_steps == 0 || config.lr_scheduler_type == LrScheduler::Wsd, config, "cooldown_steps",
          "only applies to lr_scheduler_type: wsd (linear and cosine decay over the whole run)");
  require_fraction(config, "final_lr_fraction", config.final_lr_fraction);
  require(config.weight_decay >= 0.0, config, "weight_decay", "must not be negative");
  require(config.max_grad_norm >= 0.0, config, "max_grad_norm", "must not be negative (0 disables clipping)");
  for (auto [key, value] : {std::pair{"adamw_beta1", config.adamw_beta1}, std::pair{"adamw_beta2", config.adamw_beta2},
                            std::pair{"normuon_momentum", config.normuon_momentum},
                            std::pair{"normuon_beta2", config.normuon_beta2}}) {
    require(value >= 0.0 && value < 1.0, config, key, fmt::format("must be in [0, 1) (got {})", value));
  }
  require(config.adamw_epsilon > 0.0, config, "adamw_epsilon", "must be positive");

  require_positive(config, "per_device_train_batch_size", config.per_device_train_batch_size);
  require_positive(config, "gradient_accumulation_steps", config.gradient_accumulation_steps);
  require(config.max_steps == -1 || config.max_steps >= 1, config, "max_steps",
          fmt::format("must be -1 (derive from num_epochs) or at least 1 (got {})", config.max_steps));
  require_positive(config, "eval_steps", config.eval_steps);
  require_fraction(config, "validation_split_ratio", config.validation_split_ratio);
  if (config.dataloader_num_workers) {
    require(*config.dataloader_num_workers >= 0, config, "dataloader_num_workers", "must not be negative");
  }
  require_positive(config, "lmhead_chunks", config.lmhead_chunks);
  require_positive(config, "attn_bwd_chunks", config.attn_bwd_chunks);
  require(config.attn_bwd_chunks <= config.per_device_train_batch_size, config, "attn_bwd_chunks",
          fmt::format("splits the attention backward over the micro-batch's rows, so it can be at most "
                      "per_device_train_batch_size ({}), got {}",
                      config.per_device_train_batch_size, config.attn_bwd_chunks));
  validate_model_parallel(config);
  require(config.log_gpu_util >= 0, config, "log_gpu_util", "must not be negative");

  require_positive(config, "lora_rank", config.lora_rank);
  require_positive(config, "lora_alpha", config.lora_alpha);
  require(config.lora_dropout >= 0.0 && config.lora_dropout < 1.0, config, "lora_dropout",
          fmt::format("must be in [0, 1) (got {})", config.lora_dropout));
  require(!config.merge_adapter || config.lora, config, "merge_adapter", "needs lora: true (there is no adapter to merge)");
  if (config.lora_dtype == LoraDtype::Bf16) {
    require(config.lora, config, "lora_dtype", "bf16 applies to LoRA adapters; with lora: false remove it");
    require(config.recipe != Recipe::Fp8Hybrid, config, "lora_dtype",
            "bf16 does not combine with recipe: fp8_hybrid yet (there gradient_dtype is the FP8 backward format); "
            "use lora_dtype: fp32 with it");
    require(config.master_dtype == MasterDtype::Bf16 && config.gradient_dtype == GradientDtype::Bf16, config,
            "lora_dtype",
            "bf16 keeps the adapters' masters and gradients in bf16, but master_dtype or gradient_dtype is set to "
            "another dtype; remove one of them");
  }

  int qlora_modes = int(config.qlora_fp4) + int(config.qlora_fp8) + int(config.qlora_bnb);
  require(qlora_modes <= 1, config, config.qlora_bnb ? "qlora_bnb" : "qlora_fp8",
          "cannot be combined with another qlora_* mode: choose one of qlora_fp4, qlora_fp8, qlora_bnb");
  if (qlora_modes == 1) {
    std::string mode = config.qlora_fp4 ? "qlora_fp4" : config.qlora_fp8 ? "qlora_fp8" : "qlora_bnb";
    require(config.lora, config, mode, "needs lora: true (QLoRA trains LoRA adapters on a quantized base model)");
  }
  require(one_of<int64_t>(config.qlora_block_size, {64, 128, 256}), config, "qlora_block_size",
          fmt::format("must be 64, 128 or 256 (got {})", config.qlora_block_size));
  require(one_of<int64_t>(config.qlora_bnb_block_size, {64, 128, 256, 512}), config, "qlora_bnb_block_size",
          fmt::format("must be 64, 128, 256 or 512 (got {})", config.qlora_bnb_block_size));

  validate_offload(config);
  require(!config.offload_quants || config.persistent_quants, config, "offload_quants",
          "requires persistent_quants: true (only persistent quantized weights can live in host memory)");
  require(!config.persistent_quants || config.shard_weights, config, "persistent_quants",
          "requires shard_weights: true (or zero_level: 3)");
  // offload_quants runs the ZeRO-3 device, a world of one on one GPU, which keeps the fp32 masters
  // and the accumulators in GPU memory (train/device/quantized_base_shards.h).
  for (const auto& [key, set] : {std::pair{"offload_master", config.offload_master},
                                 std::pair{"offload_grads", config.offload_grads},
                                 std::pair{"master_dtype: bf16", config.master_dtype == MasterDtype::Bf16}}) {
    require(!config.offload_quants || !set, config, "offload_quants",
            fmt::format("cannot be combined with {} yet (the quantized base is streamed by the ZeRO-3 device, which "
                        "keeps the masters and gradient accumulators in GPU memory); remove one of the two",
                        key));
  }

  if (config.datasets.empty()) {
    fail_user("{}: option 'datasets' needs at least one entry with path and type", file_label);
  }
  for (size_t i = 0; i < config.datasets.size(); ++i) {
    validate_dataset(config, config.datasets[i], fmt::format("datasets[{}]", i));
  }
  for (size_t i = 0; i < config.validation_datasets.size(); ++i) {
    validate_dataset(config, config.validation_datasets[i], fmt::format("validation_datasets[{}]", i));
  }
}

void validate_for_hardware(const Config& config, int best_sm) {
  auto need = [&](bool used, const std::string& key, int min_sm, const char* family) {
    if (!used || best_sm >= min_sm) return;
    std::string have = best_sm == 0 ? "no GPU" : fmt::format("SM{}", best_sm);
    fail_user("{}: option '{}' needs a GPU of compute capability SM{}+ ({}), but this machine has {}",
              config.source_of(key), key, min_sm, family, have);
  };
  need(config.recipe == Recipe::Fp8Hybrid, "recipe", 89, "Ada, Hopper or Blackwell");
  need(config.qlora_fp8, "qlora_fp8", 89, "Ada, Hopper or Blackwell");
  need(config.recipe == Recipe::Nvfp4, "recipe", 100, "Blackwell");
}

bool evaluates(const Config& config) {
  return !config.validation_datasets.empty() || config.validation_split_ratio > 0.0;
}

}  // namespace surogate
