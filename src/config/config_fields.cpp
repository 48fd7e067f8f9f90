#include "config/config_fields.h"

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::config_detail {
namespace {

// A list of datasets: each entry a mapping decoded through the dataset table.
template <typename Section>
Field<Config> dataset_list(std::string name, Section Config::*section,
                           std::vector<DatasetConfig> Section::*member) {
  return Field<Config>{
      name,
      [name, section, member](Config& config, const YAML::Node& node, const Where& where) {
        auto& list = config.*section.*member;
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
      [section, member](const Config& config) {
        YAML::Node list(YAML::NodeType::Sequence);
        for (const auto& dataset : config.*section.*member) list.push_back(encode_fields(dataset_fields(), dataset));
        return list;
      }};
}

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
      field("prompt_field", &D::prompt_field),
      field("chosen_field", &D::chosen_field),
      field("rejected_field", &D::rejected_field),
      field("completion_field", &D::completion_field),
      field("label_field", &D::label_field),
  };
  return table;
}

const FieldTable<config::Grpo>& grpo_fields() {
  using G = config::Grpo;
  static const FieldTable<G> table = {
      field("num_generations", &G::num_generations),
      field("max_prompt_length", &G::max_prompt_length),
      field("max_completion_length", &G::max_completion_length),
      field("temperature", &G::temperature),
      field("top_p", &G::top_p),
      field("top_k", &G::top_k),
      field("beta", &G::beta),
      field("epsilon", &G::epsilon),
      field("epsilon_high", &G::epsilon_high),
      field("loss_type", &G::loss_type),
      field("scale_rewards", &G::scale_rewards),
      field("num_iterations", &G::num_iterations),
      field("mask_truncated_completions", &G::mask_truncated_completions),
      field("reward_functions", &G::reward_functions),
      field("reward_weights", &G::reward_weights),
      field("log_completions", &G::log_completions),
      field("num_completions_to_print", &G::num_completions_to_print),
      field("generation_batch_size", &G::generation_batch_size),
  };
  return table;
}

const FieldTable<config::Loss>& loss_fields() {
  using L = config::Loss;
  static const FieldTable<L> table = {
      field("type", &L::type),
      field("dpo_beta", &L::dpo_beta),
      field("label_smoothing", &L::label_smoothing),
      field("length_norm", &L::length_norm),
      field("reference_free", &L::reference_free),
      field("target_margin", &L::target_margin),
      field("simpo_gamma", &L::simpo_gamma),
      field("beta", &L::beta),
      field("desirable_weight", &L::desirable_weight),
      field("undesirable_weight", &L::undesirable_weight),
      field("share_prompts", &L::share_prompts),
  };
  return table;
}

const FieldTable<Config>& config_fields() {
  using C = Config;
  static const FieldTable<C> table = {
      // General
      field("run_name", &C::run, &config::Run::run_name),
      field("apply_recommended_values", &C::run, &config::Run::apply_recommended_values),
      field("num_epochs", &C::schedule, &config::Schedule::num_epochs),
      field("output_dir", &C::run, &config::Run::output_dir),
      field("checkpoint_dir", &C::checkpoint, &config::Checkpoint::checkpoint_dir),
      field("resume_from_checkpoint", &C::checkpoint, &config::Checkpoint::resume_from_checkpoint),
      field("save_steps", &C::checkpoint, &config::Checkpoint::save_steps),
      field("save_total_limit", &C::checkpoint, &config::Checkpoint::save_total_limit),
      field("max_restarts", &C::run, &config::Run::max_restarts),
      field("max_nonfinite_steps", &C::run, &config::Run::max_nonfinite_steps),
      // Model
      field("model", &C::model, &config::Model::name_or_path),
      field("model_type", &C::model, &config::Model::model_type),
      field("model_definition", &C::model, &config::Model::model_definition),
      field("sequence_len", &C::model, &config::Model::sequence_len),
      field("max_model_len", &C::model, &config::Model::max_model_len),
      field("rope_scaling", &C::model, &config::Model::rope_scaling),
      field("torch_dtype", &C::model, &config::Model::torch_dtype),
      // Recomputation
      field("recompute_swiglu", &C::recompute, &config::Recompute::recompute_swiglu),
      field("recompute_rmsnorm", &C::recompute, &config::Recompute::recompute_rmsnorm),
      field("recompute_ffn", &C::recompute, &config::Recompute::recompute_ffn),
      field("recompute_qkv", &C::recompute, &config::Recompute::recompute_qkv),
      field("recompute_att", &C::recompute, &config::Recompute::recompute_att),
      field("recompute_block", &C::recompute, &config::Recompute::recompute_block),
      field("recompute_lora", &C::recompute, &config::Recompute::recompute_lora),
      // Offloading
      field("offload_residual", &C::offload, &config::Offload::offload_residual),
      field("offload_master", &C::offload, &config::Offload::offload_master),
      field("offload_quants", &C::offload, &config::Offload::offload_quants),
      field("offload_optimizer", &C::offload, &config::Offload::offload_optimizer),
      field("offload_grads", &C::offload, &config::Offload::offload_grads),
      field("persistent_quants", &C::offload, &config::Offload::persistent_quants),
      field("use_zero_copy", &C::offload, &config::Offload::use_zero_copy),
      field("use_write_combined", &C::offload, &config::Offload::use_write_combined),
      // Multi-GPU
      field("zero_level", &C::parallel, &config::Parallel::zero_level),
      field("shard_weights", &C::parallel, &config::Parallel::shard_weights),
      field("shard_gradients", &C::parallel, &config::Parallel::shard_gradients),
      field("use_all_to_all_reduce", &C::parallel, &config::Parallel::use_all_to_all_reduce),
      field("memcpy_all_gather", &C::parallel, &config::Parallel::memcpy_all_gather),
      field("memcpy_send_recv", &C::parallel, &config::Parallel::memcpy_send_recv),
      Field<C>{"distributed",
               [](C& config, const YAML::Node& node, const Where& where) {
                 if (!node.IsMap()) type_error(where, "a mapping", node);
                 decode_fields(distributed_fields(), node, "distributed.", where, config.distributed);
               },
               [](const C& config) { return encode_fields(distributed_fields(), config.distributed); }},
      Field<C>{"grpo",
               [](C& config, const YAML::Node& node, const Where& where) {
                 if (!node.IsMap()) type_error(where, "a mapping", node);
                 decode_fields(grpo_fields(), node, "grpo.", where, config.grpo);
               },
               [](const C& config) { return encode_fields(grpo_fields(), config.grpo); }},
      Field<C>{"loss",
               [](C& config, const YAML::Node& node, const Where& where) {
                 if (!node.IsMap()) type_error(where, "a mapping", node);
                 decode_fields(loss_fields(), node, "loss.", where, config.loss);
               },
               [](const C& config) { return encode_fields(loss_fields(), config.loss); }},
      // Hardware
      field("gpus", &C::parallel, &config::Parallel::gpus),
      field("use_cuda_graphs", &C::kernels, &config::Kernels::use_cuda_graphs),
      field("deterministic_attention", &C::kernels, &config::Kernels::deterministic_attention),
      // Recipes
      field("recipe", &C::precision, &config::Precision::recipe),
      field("gradient_dtype", &C::precision, &config::Precision::gradient_dtype),
      field("master_dtype", &C::precision, &config::Precision::master_dtype),
      field("use_fused_rope", &C::kernels, &config::Kernels::use_fused_rope),
      field("fp8_amax_history", &C::precision, &config::Precision::fp8_amax_history),
      field("fp4_backend", &C::precision, &config::Precision::fp4_backend),
      field("skip_quant_first_layers", &C::precision, &config::Precision::skip_quant_first_layers),
      field("skip_quant_last_layers", &C::precision, &config::Precision::skip_quant_last_layers),
      field("fp16_loss_scale", &C::precision, &config::Precision::fp16_loss_scale),
      field("fp16_loss_scale_window", &C::precision, &config::Precision::fp16_loss_scale_window),
      // Optimizer
      field("optimizer", &C::optimizer, &config::Optimizer::algorithm),
      field("learning_rate", &C::optimizer, &config::Optimizer::learning_rate),
      field("lr_scheduler_type", &C::schedule, &config::Schedule::lr_scheduler_type),
      field("warmup_ratio", &C::schedule, &config::Schedule::warmup_ratio),
      field("warmup_steps", &C::schedule, &config::Schedule::warmup_steps),
      field("cooldown_steps", &C::schedule, &config::Schedule::cooldown_steps),
      field("final_lr_fraction", &C::schedule, &config::Schedule::final_lr_fraction),
      field("weight_decay", &C::optimizer, &config::Optimizer::weight_decay),
      field("max_grad_norm", &C::optimizer, &config::Optimizer::max_grad_norm),
      field("adamw_beta1", &C::optimizer, &config::Optimizer::adamw_beta1),
      field("adamw_beta2", &C::optimizer, &config::Optimizer::adamw_beta2),
      field("adamw_epsilon", &C::optimizer, &config::Optimizer::adamw_epsilon),
      field("normuon_momentum", &C::optimizer, &config::Optimizer::normuon_momentum),
      field("normuon_beta2", &C::optimizer, &config::Optimizer::normuon_beta2),
      field("normuon_cautious_wd", &C::optimizer, &config::Optimizer::normuon_cautious_wd),
      // Training loop
      field("per_device_train_batch_size", &C::schedule, &config::Schedule::per_device_train_batch_size),
      field("gradient_accumulation_steps", &C::schedule, &config::Schedule::gradient_accumulation_steps),
      field("max_steps", &C::schedule, &config::Schedule::max_steps),
      field("eval_steps", &C::eval, &config::Eval::eval_steps),
      // Datasets
      dataset_list("datasets", &C::data, &config::Data::datasets),
      dataset_list("validation_datasets", &C::eval, &config::Eval::validation_datasets),
      field("validation_split_ratio", &C::eval, &config::Eval::validation_split_ratio),
      field("train_seed", &C::data, &config::Data::train_seed),
      field("eval_seed", &C::eval, &config::Eval::eval_seed),
      field("dataloader_num_workers", &C::data, &config::Data::dataloader_num_workers),
      field("sample_packing", &C::data, &config::Data::sample_packing),
      // Memory
      field("lmhead_chunks", &C::kernels, &config::Kernels::lmhead_chunks),
      field("attn_bwd_chunks", &C::kernels, &config::Kernels::attn_bwd_chunks),
      field("init_projections_to_zero", &C::model, &config::Model::init_projections_to_zero),
      // LoRA
      field("lora", &C::lora, &config::Lora::enabled),
      field("lora_rank", &C::lora, &config::Lora::lora_rank),
      field("lora_alpha", &C::lora, &config::Lora::lora_alpha),
      field("lora_dropout", &C::lora, &config::Lora::lora_dropout),
      field("lora_dtype", &C::lora, &config::Lora::lora_dtype),
      field("lora_target_modules", &C::lora, &config::Lora::lora_target_modules),
      field("merge_adapter", &C::lora, &config::Lora::merge_adapter),
      // QLoRA
      field("qlora_fp4", &C::quant, &config::Quant::qlora_fp4),
      field("qlora_fp8", &C::quant, &config::Quant::qlora_fp8),
      field("qlora_bnb", &C::quant, &config::Quant::qlora_bnb),
      field("qlora_block_size", &C::quant, &config::Quant::qlora_block_size),
      field("qlora_bnb_block_size", &C::quant, &config::Quant::qlora_bnb_block_size),
      field("qlora_bnb_double_quant", &C::quant, &config::Quant::qlora_bnb_double_quant),
      field("qlora_four_over_six", &C::quant, &config::Quant::qlora_four_over_six),
      // Chat template and lengths
      field("use_chat_template", &C::data, &config::Data::use_chat_template),
      field("template", &C::data, &config::Data::template_name),
      field("system", &C::data, &config::Data::system),
      field("max_length", &C::data, &config::Data::max_length),
      field("truncation_strategy", &C::data, &config::Data::truncation_strategy),
      field("padding_side", &C::data, &config::Data::padding_side),
      field("padding_free", &C::data, &config::Data::padding_free),
      field("loss_scale", &C::data, &config::Data::loss_scale),
      field("sequence_parallel_size", &C::parallel, &config::Parallel::sequence_parallel_size),
      field("pipeline_parallel_size", &C::parallel, &config::Parallel::pipeline_parallel_size),
      field("pipeline_stage_layers", &C::parallel, &config::Parallel::pipeline_stage_layers),
      field("response_prefix", &C::data, &config::Data::response_prefix),
      field("max_pixels", &C::data, &config::Data::max_pixels),
      field("norm_bbox", &C::data, &config::Data::norm_bbox),
      field("freeze_vision", &C::model, &config::Model::freeze_vision),
      field("agent_template", &C::data, &config::Data::agent_template),
      // Logging
      field("report_to", &C::logging, &config::Logging::report_to),
      field("log_file", &C::logging, &config::Logging::log_file),
      field("log_gpu_util", &C::logging, &config::Logging::log_gpu_util),
      field("wandb_project", &C::logging, &config::Logging::wandb_project),
      field("wandb_name", &C::logging, &config::Logging::wandb_name),
      field("aim_experiment", &C::logging, &config::Logging::aim_experiment),
      field("aim_repo", &C::logging, &config::Logging::aim_repo),
      field("aim_name", &C::logging, &config::Logging::aim_name),
      // Debugging
      field("debug_time_breakdown", &C::logging, &config::Logging::debug_time_breakdown),
      field("debug_memory_breakdown", &C::logging, &config::Logging::debug_memory_breakdown),
  };
  return table;
}

}  // namespace surogate::config_detail
