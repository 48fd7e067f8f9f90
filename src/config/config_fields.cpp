#include "config/config_fields.h"

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::config_detail {
namespace {

// A list of datasets: each entry a mapping decoded through the dataset table.
Field<Config> dataset_list(std::string name, std::vector<DatasetConfig> Config::*member);

}  // namespace

const FieldTable<DistributedConfig>& distributed_fields() {
  using D = DistributedConfig;
  static const FieldTable<D> table = {
      field("ray_address", &D::ray_address),
      field("num_nodes", &D::num_nodes),
      field("gpus_per_node", &D::gpus_per_node),
      field("worker_output_dir", &D::worker_output_dir),
  };
  return table;
}

const FieldTable<DatasetConfig>& dataset_fields() {
  using D = DatasetConfig;
  static const FieldTable<D> table = {
      field("path", &D::path),
      field("type", &D::type),
      field("subset", &D::subset),
      field("split", &D::split),
      field("samples", &D::samples),
      field("text_field", &D::text_field),
      field("instruction_field", &D::instruction_field),
      field("output_field", &D::output_field),
      field("input_field", &D::input_field),
      field("system_prompt_type", &D::system_prompt_type),
      field("system_prompt_field", &D::system_prompt_field),
      field("system_prompt", &D::system_prompt),
      field("prompt_format", &D::prompt_format),
      field("prompt_format_no_input", &D::prompt_format_no_input),
      field("messages_field", &D::messages_field),
      field("system_field", &D::system_field),
      field("tools_field", &D::tools_field),
      field("message_property_mappings", &D::message_property_mappings),
  };
  return table;
}

const FieldTable<Config>& config_fields() {
  using C = Config;
  static const FieldTable<C> table = {
      // General
      field("run_name", &C::run_name),
      field("apply_recommended_values", &C::apply_recommended_values),
      field("num_epochs", &C::num_epochs),
      field("output_dir", &C::output_dir),
      field("checkpoint_dir", &C::checkpoint_dir),
      field("resume_from_checkpoint", &C::resume_from_checkpoint),
      field("save_steps", &C::save_steps),
      field("save_total_limit", &C::save_total_limit),
      field("max_restarts", &C::max_restarts),
      field("max_nonfinite_steps", &C::max_nonfinite_steps),
      // Model
      field("model", &C::model),
      field("model_type", &C::model_type),
      field("model_definition", &C::model_definition),
      field("sequence_len", &C::sequence_len),
      field("max_model_len", &C::max_model_len),
      field("rope_scaling", &C::rope_scaling),
      field("torch_dtype", &C::torch_dtype),
      // Recomputation
      field("recompute_swiglu", &C::recompute_swiglu),
      field("recompute_rmsnorm", &C::recompute_rmsnorm),
      field("recompute_ffn", &C::recompute_ffn),
      field("recompute_qkv", &C::recompute_qkv),
      field("recompute_att", &C::recompute_att),
      field("recompute_block", &C::recompute_block),
      field("recompute_lora", &C::recompute_lora),
      // Offloading
      field("offload_residual", &C::offload_residual),
      field("offload_master", &C::offload_master),
      field("offload_quants", &C::offload_quants),
      field("offload_optimizer", &C::offload_optimizer),
      field("offload_grads", &C::offload_grads),
      field("persistent_quants", &C::persistent_quants),
      field("use_zero_copy", &C::use_zero_copy),
      field("use_write_combined", &C::use_write_combined),
      // Multi-GPU
      field("zero_level", &C::zero_level),
      field("shard_weights", &C::shard_weights),
      field("shard_gradients", &C::shard_gradients),
      field("use_all_to_all_reduce", &C::use_all_to_all_reduce),
      field("memcpy_all_gather", &C::memcpy_all_gather),
      field("memcpy_send_recv", &C::memcpy_send_recv),
      Field<C>{"distributed",
               [](C& config, const YAML::Node& node, const Where& where) {
                 if (!node.IsMap()) type_error(where, "a mapping", node);
                 decode_fields(distributed_fields(), node, "distributed.", where, config.distributed);
               },
               [](const C& config) { return encode_fields(distributed_fields(), config.distributed); }},
      // Hardware
      field("gpus", &C::gpus),
      field("use_cuda_graphs", &C::use_cuda_graphs),
      field("deterministic_attention", &C::deterministic_attention),
      // Recipes
      field("recipe", &C::recipe),
      field("gradient_dtype", &C::gradient_dtype),
      field("master_dtype", &C::master_dtype),
      field("use_fused_rope", &C::use_fused_rope),
      field("fp8_amax_history", &C::fp8_amax_history),
      field("fp4_backend", &C::fp4_backend),
      field("skip_quant_first_layers", &C::skip_quant_first_layers),
      field("skip_quant_last_layers", &C::skip_quant_last_layers),
      field("fp16_loss_scale", &C::fp16_loss_scale),
      field("fp16_loss_scale_window", &C::fp16_loss_scale_window),
      // Optimizer
      field("optimizer", &C::optimizer),
      field("learning_rate", &C::learning_rate),
      field("lr_scheduler_type", &C::lr_scheduler_type),
      field("warmup_ratio", &C::warmup_ratio),
      field("warmup_steps", &C::warmup_steps),
      field("cooldown_steps", &C::cooldown_steps),
      field("final_lr_fraction", &C::final_lr_fraction),
      field("weight_decay", &C::weight_decay),
      field("max_grad_norm", &C::max_grad_norm),
      field("adamw_beta1", &C::adamw_beta1),
      field("adamw_beta2", &C::adamw_beta2),
      field("adamw_epsilon", &C::adamw_epsilon),
      field("normuon_momentum", &C::normuon_momentum),
      field("normuon_beta2", &C::normuon_beta2),
      field("normuon_cautious_wd", &C::normuon_cautious_wd),
      // Training loop
      field("per_device_train_batch_size", &C::per_device_train_batch_size),
      field("gradient_accumulation_steps", &C::gradient_accumulation_steps),
      field("max_steps", &C::max_steps),
      field("eval_steps", &C::eval_steps),
      // Datasets
      dataset_list("datasets", &C::datasets),
      dataset_list("validation_datasets", &C::validation_datasets),
      field("validation_split_ratio", &C::validation_split_ratio),
      field("train_seed", &C::train_seed),
      field("eval_seed", &C::eval_seed),
      field("dataloader_num_workers", &C::dataloader_num_workers),
      field("sample_packing", &C::sample_packing),
      // Memory
      field("lmhead_chunks", &C::lmhead_chunks),
      field("attn_bwd_chunks", &C::attn_bwd_chunks),
      field("init_projections_to_zero", &C::init_projections_to_zero),
      // LoRA
      field("lora", &C::lora),
      field("lora_rank", &C::lora_rank),
      field("lora_alpha", &C::lora_alpha),
      field("lora_dropout", &C::lora_dropout),
      field("lora_dtype", &C::lora_dtype),
      field("lora_target_modules", &C::lora_target_modules),
      field("merge_adapter", &C::merge_adapter),
      // QLoRA
      field("qlora_fp4", &C::qlora_fp4),
      field("qlora_fp8", &C::qlora_fp8),
      field("qlora_bnb", &C::qlora_bnb),
      field("qlora_block_size", &C::qlora_block_size),
      field("qlora_bnb_block_size", &C::qlora_bnb_block_size),
      field("qlora_bnb_double_quant", &C::qlora_bnb_double_quant),
      field("qlora_four_over_six", &C::qlora_four_over_six),
      // Chat template and lengths
      field("use_chat_template", &C::use_chat_template),
      field("template", &C::template_name),
      field("system", &C::system),
      field("max_length", &C::max_length),
      field("truncation_strategy", &C::truncation_strategy),
      field("padding_side", &C::padding_side),
      field("padding_free", &C::padding_free),
      field("loss_scale", &C::loss_scale),
      field("sequence_parallel_size", &C::sequence_parallel_size),
      field("pipeline_parallel_size", &C::pipeline_parallel_size),
      field("pipeline_stage_layers", &C::pipeline_stage_layers),
      field("response_prefix", &C::response_prefix),
      field("max_pixels", &C::max_pixels),
      field("norm_bbox", &C::norm_bbox),
      field("agent_template", &C::agent_template),
      // Logging
      field("report_to", &C::report_to),
      field("log_file", &C::log_file),
      field("log_gpu_util", &C::log_gpu_util),
      field("wandb_project", &C::wandb_project),
      field("wandb_name", &C::wandb_name),
      field("aim_experiment", &C::aim_experiment),
      field("aim_repo", &C::aim_repo),
      field("aim_name", &C::aim_name),
      // Debugging
      field("debug_time_breakdown", &C::debug_time_breakdown),
      field("debug_memory_breakdown", &C::debug_memory_breakdown),
  };
  return table;
}

namespace {

Field<Config> dataset_list(std::string name, std::vector<DatasetConfig> Config::*member) {
  return Field<Config>{
      name,
      [name, member](Config& config, const YAML::Node& node, const Where& where) {
        auto& list = config.*member;
        list.clear();
        if (node.IsNull()) return;
        if (!node.IsSequence()) type_error(where, "a list of dataset entries", node);
        for (size_t index = 0; index < node.size(); ++index) {
          const YAML::Node& entry = node[index];
          std::string prefix = fmt::format("{}[{}].", name, index);
          Where entry_where{fmt::format("{}[{}]", name, index), source_of_key(where.file, entry, where.source),
                            where.file};
          if (!entry.IsMap()) type_error(entry_where, "a mapping with at least path and type", entry);
          for (const char* required : {"path", "type"}) {
            if (!entry[required]) {
              fail_user("{}: option '{}.{}' is missing: every dataset entry needs path (a local file or folder, "
                        "or a hub dataset id) and type (one of: {})",
                        entry_where.source, entry_where.key, required, join_names(enum_names<DatasetType>()));
            }
          }
          DatasetConfig dataset;
          decode_fields(dataset_fields(), entry, prefix, entry_where, dataset);
          list.push_back(std::move(dataset));
        }
      },
      [member](const Config& config) {
        YAML::Node list(YAML::NodeType::Sequence);
        for (const auto& dataset : config.*member) list.push_back(encode_fields(dataset_fields(), dataset));
        return list;
      }};
}

}  // namespace
}  // namespace surogate::config_detail
