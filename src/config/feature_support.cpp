// The feature-support table; see feature_support.h. Rows are grouped by topic and, within a stage,
// judged in the order written (the first refusal is the one reported). When a feature lands,
// delete its row (and update docs/configuration.md); tests/config/test_feature_support.cpp fires
// every row and fails for a row it does not know.
#include "config/feature_support.h"

#include <initializer_list>
#include <utility>

#include <fmt/format.h>

#include "config/feature_support_grpo.h"
#include "config/feature_support_preference.h"
#include "config/feature_support_vision.h"
#include "core/error.h"

namespace surogate {
namespace {

using Stage = SupportStage;
using Backend = SupportBackend;

// "<where>: option '<key>' <text>", the form of config_rules.cpp's messages.
std::string option_message(const Config& config, const std::string& key, const std::string& text) {
  return fmt::format("{}: option '{}' {}", config.sources.of(key), key, text);
}

// A row judged from the options alone, refused with option_message.
SupportRow option_row(const char* name, std::function<bool(const Config&)> refuses,
                      std::function<std::string(const Config&)> key, std::function<std::string(const Config&)> text) {
  return {name, Stage::Options, Backend::Any,
          [refuses](const Config& config, const RunShape&) { return refuses(config); },
          [key, text](const Config& config, const RunShape&) { return option_message(config, key(config), text(config)); }};
}

SupportRow option_row(const char* name, std::function<bool(const Config&)> refuses, const std::string& key,
                      const std::string& text) {
  return option_row(name, std::move(refuses), [key](const Config&) { return key; }, [text](const Config&) { return text; });
}

bool fp8_gradient_dtype(const Config& config) {
  return config.precision.gradient_dtype &&
         (*config.precision.gradient_dtype == GradientDtype::Fp8E4M3 || *config.precision.gradient_dtype == GradientDtype::Fp8E5M2);
}

bool zero3(const Config& config) { return config.parallel.zero_level >= 3 || config.parallel.shard_weights; }

// The staged offload step (use_zero_copy off) cuts the step into chunks of whole tensors, each with
// its own optimizer: NorMuon groups matrices across tensors, and bf16 masters key their stochastic
// rounding by a tensor's place in the one optimizer's list.
bool staged_offload(const Config& config) {
  return (config.offload.offload_master || config.offload.offload_optimizer) && !config.offload.use_zero_copy;
}

// The recipes and precisions: fp8_hybrid's options, fp16 training, NVFP4.
void add_precision_rows(std::vector<SupportRow>& rows) {
  // The FP8 copies of trained weights (models/fp8_recipe.h) are rewritten from each whole weight
  // after every step, on every rank; ZeRO-3 keeps no rank's whole weights between uses.
  rows.push_back(option_row(
      "fp8_hybrid full fine-tuning with sharded weights",
      [](const Config& c) { return c.parallel.shard_weights && c.precision.recipe == Recipe::Fp8Hybrid && !c.lora.enabled; },
      [](const Config& c) { return std::string(c.parallel.zero_level >= 3 ? "zero_level" : "shard_weights"); },
      [](const Config&) {
        return std::string("with recipe: fp8_hybrid needs lora: true: full fine-tuning in FP8 keeps an FP8 copy of every "
                           "trained weight on every rank, which sharded weights cannot give. Use zero_level 1 or 2 with "
                           "fp8_hybrid, or recipe: bf16");
      }));
  // The fp8_hybrid recipe's options (models/fp8_recipe.h); the recipe itself combines with every
  // training mode (LoRA, QLoRA, full fine-tuning, pt) and with data parallelism.
  const char* only_fp8 = "only applies to recipe: fp8_hybrid (the quantized recipe this version implements); "
                         "set recipe: fp8_hybrid or remove the option";
  const auto not_fp8 = [](const Config& c) { return c.precision.recipe != Recipe::Fp8Hybrid; };
  rows.push_back(option_row("fp8_amax_history without fp8_hybrid",
                            [not_fp8](const Config& c) { return not_fp8(c) && c.precision.fp8_amax_history != 1024; },
                            "fp8_amax_history", only_fp8));
  rows.push_back(option_row("skip_quant_first_layers without fp8_hybrid",
                            [not_fp8](const Config& c) { return not_fp8(c) && c.precision.skip_quant_first_layers != 0; },
                            "skip_quant_first_layers", only_fp8));
  rows.push_back(option_row("skip_quant_last_layers without fp8_hybrid",
                            [not_fp8](const Config& c) { return not_fp8(c) && c.precision.skip_quant_last_layers != 0; },
                            "skip_quant_last_layers", only_fp8));
  rows.push_back(option_row("fp8 gradient_dtype without fp8_hybrid",
                            [not_fp8](const Config& c) { return not_fp8(c) && fp8_gradient_dtype(c); },
                            "gradient_dtype",
                            "fp8_e4m3 / fp8_e5m2 are the fp8_hybrid recipe's backward-matmul formats; set recipe: "
                            "fp8_hybrid, or use bf16 / fp32"));
  // fp16's dynamic loss scale (train/fp16_loss_scaler.h): only with torch_dtype: float16.
  rows.push_back(option_row(
      "float16 with another recipe",
      [](const Config& c) { return c.model.torch_dtype == TorchDtype::Float16 && c.precision.recipe != Recipe::Bf16; },
      "torch_dtype",
      "float16 (fp16 training with loss scaling) does not combine with recipe: fp8_hybrid; use "
      "one of them"));
  // Set to anything but its default (a dumped configuration lists every option at its value).
  const char* only_fp16 = "only applies to fp16 training (torch_dtype: float16); remove it or set torch_dtype: float16";
  rows.push_back(option_row(
      "fp16_loss_scale without float16",
      [](const Config& c) {
        return c.model.torch_dtype != TorchDtype::Float16 &&
               c.precision.fp16_loss_scale != Config{}.precision.fp16_loss_scale;
      },
      "fp16_loss_scale", only_fp16));
  rows.push_back(option_row("fp16_loss_scale_window without float16",
                            [](const Config& c) {
                              return c.model.torch_dtype != TorchDtype::Float16 &&
                                     c.precision.fp16_loss_scale_window != Config{}.precision.fp16_loss_scale_window;
                            },
                            "fp16_loss_scale_window", only_fp16));
  // NVFP4: qlora_fp4 stores the frozen base in it on any GPU (dequantized to bf16 for the
  // products); the nvfp4 recipe, whose products run on FP4 tensor cores, waits for a Blackwell GPU
  // to run and test it on (its quantizer, quant/nvfp4.h, is built and emulated exactly on the CPU).
  rows.push_back(option_row(
      "recipe nvfp4", [](const Config& c) { return c.precision.recipe == Recipe::Nvfp4; }, "recipe",
      "nvfp4 is not implemented yet: its matmuls run on FP4 tensor cores, which need a Blackwell GPU (SM100+) to run "
      "and test them on (its NVFP4 quantizer is built, emulated exactly on the CPU). Use recipe: bf16 or fp8_hybrid; "
      "for NVFP4's memory saving on the frozen base, qlora_fp4: true works on any GPU"));
  rows.push_back(option_row(
      "fp4_backend without nvfp4", [](const Config& c) { return c.precision.fp4_backend != Fp4Backend::Cutlass; }, "fp4_backend",
      "only applies to recipe: nvfp4 (the FP4 tensor-core matmul's library, Blackwell only), which this version does "
      "not run; qlora_fp4 dequantizes to bf16 and uses no FP4 matmul: remove the option"));
  rows.push_back(option_row(
      "qlora_four_over_six without qlora_fp4", [](const Config& c) { return !c.quant.qlora_fp4 && !c.quant.qlora_four_over_six; },
      "qlora_four_over_six",
      "only applies to qlora_fp4 (the NVFP4 base's block scale rule); set qlora_fp4: true or remove the option"));
}

// The schedule and the micro-batch.
void add_schedule_rows(std::vector<SupportRow>& rows) {
  rows.push_back(option_row(
      "cooldown_steps without wsd",
      [](const Config& c) {
        return c.schedule.cooldown_steps != 0 && c.schedule.lr_scheduler_type != LrScheduler::Wsd;
      },
      "cooldown_steps", "only applies to lr_scheduler_type: wsd (linear and cosine decay over the whole run)"));
  rows.push_back(option_row(
      "attn_bwd_chunks over the micro-batch",
      [](const Config& c) { return c.kernels.attn_bwd_chunks > c.schedule.per_device_train_batch_size; },
      [](const Config&) { return std::string("attn_bwd_chunks"); },
      [](const Config& c) {
        return fmt::format("splits the attention backward over the micro-batch's rows, so it can be at most "
                           "per_device_train_batch_size ({}), got {}",
                           c.schedule.per_device_train_batch_size, c.kernels.attn_bwd_chunks);
      }));
}

// Sequence and pipeline parallelism (distributed/parallel_layout.h): what each composes with.
// They compose with each other on every backend (gpus = data × sequence × pipeline). That the ranks (gpus) are a multiple of their
// product, that the heads and sequence_len split over the sequence group, and that
// pipeline_stage_layers add up to the model's layers depend on the machine or the model: the
// layout and the graph passes check those, naming the options.
void add_model_parallel_rows(std::vector<SupportRow>& rows) {
  struct Split {
    const char* key;
    const char* with_fp8;
    const char* with_offload;
    int64_t config::Parallel::*size;
  };
  for (const Split& split : {Split{"sequence_parallel_size", "sequence_parallel_size with fp8_hybrid",
                                   "sequence_parallel_size with offload_residual", &config::Parallel::sequence_parallel_size},
                             Split{"pipeline_parallel_size", "pipeline_parallel_size with fp8_hybrid",
                                   "pipeline_parallel_size with offload_residual", &config::Parallel::pipeline_parallel_size}}) {
    const auto size = split.size;
    rows.push_back(option_row(
        split.with_fp8,
        [size](const Config& c) { return c.parallel.*size > 1 && c.precision.recipe == Recipe::Fp8Hybrid; }, split.key,
        "cannot be combined with recipe: fp8_hybrid yet (its quantizers scale by one amax over a "
        "whole micro-batch's tensor, which the split ranks do not hold); use recipe: bf16"));
    rows.push_back(option_row(split.with_offload, [size](const Config& c) { return c.parallel.*size > 1 && c.offload.offload_residual; },
                              split.key,
                              "cannot be combined with offload_residual yet (the residual checkpoints' host copies are "
                              "not built for split graphs); remove one of the two"));
  }
  // ZeRO-3 shards the weights over all data × sequence ranks (the data-parallel devices); the
  // pipeline devices gather no weights yet.
  rows.push_back(option_row(
      "pipeline_parallel_size with ZeRO-3", [](const Config& c) { return c.parallel.pipeline_parallel_size > 1 && zero3(c); },
      [](const Config&) { return std::string("pipeline_parallel_size"); },
      [](const Config& c) {
        return fmt::format("cannot be combined with {} yet (ZeRO-3's weight gathering is built for data and sequence "
                           "parallelism); use zero_level 1 or 2 with it",
                           c.parallel.zero_level >= 3 ? "zero_level: 3" : "shard_weights");
      }));
  rows.push_back(option_row(
      "pipeline_stage_layers for another stage count",
      [](const Config& c) {
        return !c.parallel.pipeline_stage_layers.empty() &&
               static_cast<int64_t>(c.parallel.pipeline_stage_layers.size()) != c.parallel.pipeline_parallel_size;
      },
      [](const Config&) { return std::string("pipeline_stage_layers"); },
      [](const Config& c) {
        return fmt::format("lists {} stages, but pipeline_parallel_size is {}: give one layer count per stage, or leave "
                           "it unset to balance the stages by the memory plan's per-layer cost",
                           c.parallel.pipeline_stage_layers.size(), c.parallel.pipeline_parallel_size);
      }));
}

// LoRA and QLoRA.
void add_lora_rows(std::vector<SupportRow>& rows) {
  rows.push_back(option_row("merge_adapter without lora", [](const Config& c) { return c.lora.merge_adapter && !c.lora.enabled; },
                            "merge_adapter", "needs lora: true (there is no adapter to merge)"));
  const auto bf16_adapters = [](const Config& c) { return c.lora.lora_dtype == LoraDtype::Bf16; };
  rows.push_back(option_row("lora_dtype bf16 without lora",
                            [bf16_adapters](const Config& c) { return bf16_adapters(c) && !c.lora.enabled; }, "lora_dtype",
                            "bf16 applies to LoRA adapters; with lora: false remove it"));
  rows.push_back(option_row("lora_dtype bf16 with fp8_hybrid",
                            [bf16_adapters](const Config& c) { return bf16_adapters(c) && c.precision.recipe == Recipe::Fp8Hybrid; },
                            "lora_dtype",
                            "bf16 does not combine with recipe: fp8_hybrid yet (there gradient_dtype is the FP8 backward "
                            "format); use lora_dtype: fp32 with it"));
  rows.push_back(option_row("lora_dtype bf16 with other master or gradient dtypes",
                            [bf16_adapters](const Config& c) {
                              return bf16_adapters(c) && !(c.precision.master_dtype == MasterDtype::Bf16 &&
                                                           c.precision.gradient_dtype == GradientDtype::Bf16);
                            },
                            "lora_dtype",
                            "bf16 keeps the adapters' masters and gradients in bf16, but master_dtype or gradient_dtype "
                            "is set to another dtype; remove one of them"));
  rows.push_back(option_row(
      "several qlora modes", [](const Config& c) { return int(c.quant.qlora_fp4) + int(c.quant.qlora_fp8) + int(c.quant.qlora_bnb) > 1; },
      [](const Config& c) { return std::string(c.quant.qlora_bnb ? "qlora_bnb" : "qlora_fp8"); },
      [](const Config&) {
        return std::string("cannot be combined with another qlora_* mode: choose one of qlora_fp4, qlora_fp8, qlora_bnb");
      }));
  rows.push_back(option_row(
      "qlora without lora",
      [](const Config& c) { return (c.quant.qlora_fp4 || c.quant.qlora_fp8 || c.quant.qlora_bnb) && !c.lora.enabled; },
      [](const Config& c) {
        return std::string(c.quant.qlora_fp4 ? "qlora_fp4" : c.quant.qlora_fp8 ? "qlora_fp8" : "qlora_bnb");
      },
      [](const Config&) {
        return std::string("needs lora: true (QLoRA trains LoRA adapters on a quantized base model)");
      }));
}

// The offload_* options of the CUDA backend (train/device/host_offload_plan.h) and the quantized
// base's.
void add_offload_rows(std::vector<SupportRow>& rows) {
  const auto offloads = [](const Config& c) { return c.offload.offload_master || c.offload.offload_optimizer || c.offload.offload_grads; };
  const char* only_offloaded =
      "only applies to offloaded buffers: set offload_master, offload_optimizer or offload_grads, or remove it";
  rows.push_back(option_row("use_zero_copy without offloading",
                            [offloads](const Config& c) { return c.offload.use_zero_copy && !offloads(c); }, "use_zero_copy",
                            only_offloaded));
  rows.push_back(option_row("use_write_combined without offloading",
                            [offloads](const Config& c) { return c.offload.use_write_combined && !offloads(c); },
                            "use_write_combined", only_offloaded));
  rows.push_back(option_row("offload_master with bf16 masters",
                            [](const Config& c) { return c.offload.offload_master && c.precision.master_dtype == MasterDtype::Bf16; },
                            "offload_master",
                            "offloads the fp32 master weights, and master_dtype: bf16 keeps none; remove one of the two"));
  rows.push_back(option_row(
      "staged offload with normuon",
      [](const Config& c) { return staged_offload(c) && c.optimizer.algorithm == Optimizer::NorMuon; },
      [](const Config& c) { return std::string(c.offload.offload_master ? "offload_master" : "offload_optimizer"); },
      [](const Config&) {
        return std::string("with optimizer: normuon needs use_zero_copy: true (the staged step, use_zero_copy: false, is "
                           "implemented for adamw and adamw_8bit)");
      }));
  rows.push_back(option_row(
      "staged offload_optimizer with bf16 masters",
      [](const Config& c) { return staged_offload(c) && c.offload.offload_optimizer && c.precision.master_dtype == MasterDtype::Bf16; },
      "offload_optimizer",
      "with master_dtype: bf16 needs use_zero_copy: true (the staged step, use_zero_copy: false, is implemented with "
      "fp32 master weights)"));
  rows.push_back(option_row("offload_quants without persistent_quants",
                            [](const Config& c) { return c.offload.offload_quants && !c.offload.persistent_quants; }, "offload_quants",
                            "requires persistent_quants: true (only persistent quantized weights can live in host memory)"));
  rows.push_back(option_row("persistent_quants without sharded weights",
                            [](const Config& c) { return c.offload.persistent_quants && !c.parallel.shard_weights; }, "persistent_quants",
                            "requires shard_weights: true (or zero_level: 3)"));
  // offload_quants runs the ZeRO-3 device, a world of one on one GPU, which keeps the fp32 masters
  // and the accumulators in GPU memory (train/device/quantized_base_shards.h).
  struct Partner {
    const char* name;
    const char* option;
    bool (*set)(const Config&);
  };
  for (const Partner& partner :
       {Partner{"offload_quants with offload_master", "offload_master", [](const Config& c) { return c.offload.offload_master; }},
        Partner{"offload_quants with offload_grads", "offload_grads", [](const Config& c) { return c.offload.offload_grads; }},
        Partner{"offload_quants with bf16 masters", "master_dtype: bf16",
                [](const Config& c) { return c.precision.master_dtype == MasterDtype::Bf16; }}}) {
    const auto set = partner.set;
    rows.push_back(option_row(partner.name, [set](const Config& c) { return c.offload.offload_quants && set(c); },
                              "offload_quants",
                              fmt::format("cannot be combined with {} yet (the quantized base is streamed by the ZeRO-3 "
                                          "device, which keeps the masters and gradient accumulators in GPU memory); "
                                          "remove one of the two",
                                          partner.option)));
  }
}

// The CPU backend is the fp32 oracle: master_dtype / gradient_dtype other than fp32 and the
// offload_* options (they move GPU memory to the host) are implemented on the CUDA backend.
void add_cpu_backend_rows(std::vector<SupportRow>& rows) {
  rows.push_back({"cpu master_dtype", Stage::Backend, Backend::Cpu,
                  [](const Config& c, const RunShape&) {
                    return c.precision.master_dtype && *c.precision.master_dtype != MasterDtype::Fp32;
                  },
                  [](const Config& c, const RunShape&) {
                    return fmt::format("{}: master_dtype: {} is implemented on the CUDA backend only; the CPU backend is "
                                       "the fp32 reference and keeps fp32 master weights. Remove the option or train on "
                                       "a machine with a GPU",
                                       c.sources.of("master_dtype"), to_string(*c.precision.master_dtype));
                  }});
  rows.push_back({"cpu gradient_dtype", Stage::Backend, Backend::Cpu,
                  [](const Config& c, const RunShape&) {
                    // fp8 gradients with fp8_hybrid are the recipe's backward format, not an accumulator dtype.
                    const bool fp8_gradients = c.precision.recipe == Recipe::Fp8Hybrid && fp8_gradient_dtype(c);
                    return c.precision.gradient_dtype && *c.precision.gradient_dtype != GradientDtype::Fp32 && !fp8_gradients;
                  },
                  [](const Config& c, const RunShape&) {
                    return fmt::format("{}: gradient_dtype: {} is implemented on the CUDA backend only; the CPU backend "
                                       "is the fp32 reference and accumulates gradients in fp32. Remove the option or "
                                       "train on a machine with a GPU",
                                       c.sources.of("gradient_dtype"), to_string(*c.precision.gradient_dtype));
                  }});
  for (const auto& [key, flag] : {std::pair{"offload_master", &config::Offload::offload_master},
                                  std::pair{"offload_optimizer", &config::Offload::offload_optimizer},
                                  std::pair{"offload_grads", &config::Offload::offload_grads}}) {
    const char* name = key;
    bool config::Offload::*set = flag;
    rows.push_back({fmt::format("cpu {}", name), Stage::Backend, Backend::Cpu,
                    [set](const Config& c, const RunShape&) { return c.offload.*set; },
                    [name](const Config& c, const RunShape&) {
                      return fmt::format("{}: {} moves GPU memory to pinned host memory; it applies to the CUDA backend "
                                         "only, and this run trains on the CPU backend. Remove the option or train on a "
                                         "machine with a GPU",
                                         c.sources.of(name), name);
                    }});
  }
}

// The pipeline devices run their stages as rank threads of one process. A Device row: judged once
// every process is connected (a process refusing while another still connects would leave that
// one with a failed connection instead of this message).
void add_pipeline_process_rows(std::vector<SupportRow>& rows) {
  for (const auto& [backend, across] : {std::pair{Backend::Cpu, "data or sequence"}, std::pair{Backend::Cuda, "data"}}) {
    const char* parallelism = across;
    rows.push_back({backend == Backend::Cpu ? "cpu pipeline over processes" : "cuda pipeline over processes",
                    Stage::Device, backend,
                    [](const Config&, const RunShape& s) { return s.pipeline_size > 1 && s.spans_processes(); },
                    [parallelism](const Config& c, const RunShape& s) {
                      return fmt::format("{}: pipeline_parallel_size: {} runs its stages as rank threads of one process "
                                         "in this version; a launcher or Ray started {} processes. Start one process "
                                         "with gpus: {} (the stages × replicas), or use {} parallelism across processes",
                                         c.sources.of("pipeline_parallel_size"), s.pipeline_size, s.processes,
                                         s.world_size, parallelism);
                    }});
  }
}

// fp16 training on the CUDA backend is the dense model on one GPU with fp32 masters and
// accumulators, adamw / adamw_8bit, no offloading and no QLoRA: each other partner is a row.
SupportRow fp16_cuda_row(std::string name, Stage stage, const char* key,
                         std::function<bool(const Config&, const RunShape&)> partner,
                         std::function<std::string(const Config&, const RunShape&)> what,
                         std::function<std::string(const Config&)> remedy) {
  return {std::move(name), stage, Backend::Cuda,
          [partner](const Config& c, const RunShape& s) { return c.model.torch_dtype == TorchDtype::Float16 && partner(c, s); },
          [key, what, remedy](const Config& c, const RunShape& s) {
            return fmt::format("{}: torch_dtype: float16 with {} is not implemented on the CUDA backend (its fp16 "
                               "training is the dense model on one GPU: fp32 master weights and gradient accumulators, "
                               "optimizer adamw or adamw_8bit, no offloading, LoRA or full fine-tuning without QLoRA); "
                               "{}, or set torch_dtype: bfloat16 to train in bf16",
                               c.sources.of(key), what(c, s), remedy(c));
          }};
}

void add_fp16_cuda_rows(std::vector<SupportRow>& rows) {
  const auto fixed = [](std::string text) { return [text](const Config&) { return text; }; };
  rows.push_back(fp16_cuda_row(
      "float16 on several GPUs", Stage::Backend, "gpus", [](const Config&, const RunShape& s) { return s.several_ranks(); },
      [](const Config& c, const RunShape& s) { return fmt::format("gpus: {} ({})", c.parallel.gpus, s.layout_description); },
      fixed("train on one GPU")));
  rows.push_back(fp16_cuda_row(
      "float16 with master_dtype", Stage::Backend, "master_dtype",
      [](const Config& c, const RunShape&) { return c.precision.master_dtype && *c.precision.master_dtype != MasterDtype::Fp32; },
      [](const Config& c, const RunShape&) { return fmt::format("master_dtype: {}", to_string(*c.precision.master_dtype)); },
      fixed("remove master_dtype")));
  rows.push_back(fp16_cuda_row(
      "float16 with gradient_dtype", Stage::Backend, "gradient_dtype",
      [](const Config& c, const RunShape&) { return c.precision.gradient_dtype && *c.precision.gradient_dtype != GradientDtype::Fp32; },
      [](const Config& c, const RunShape&) { return fmt::format("gradient_dtype: {}", to_string(*c.precision.gradient_dtype)); },
      fixed("remove gradient_dtype")));
  rows.push_back(fp16_cuda_row(
      "float16 with normuon", Stage::Backend, "optimizer",
      [](const Config& c, const RunShape&) { return c.optimizer.algorithm == Optimizer::NorMuon; },
      [](const Config&, const RunShape&) { return std::string("optimizer: normuon"); },
      fixed("use optimizer: adamw or adamw_8bit")));
  // The options are in two sections (offload, quant): each flag read through its own function.
  using Flag = bool (*)(const Config&);
  for (const auto& [key, flag] : std::initializer_list<std::pair<const char*, Flag>>{
           {"offload_master", [](const Config& c) { return c.offload.offload_master; }},
           {"offload_grads", [](const Config& c) { return c.offload.offload_grads; }},
           {"offload_optimizer", [](const Config& c) { return c.offload.offload_optimizer; }},
           {"offload_residual", [](const Config& c) { return c.offload.offload_residual; }},
           {"offload_quants", [](const Config& c) { return c.offload.offload_quants; }},
           {"qlora_fp8", [](const Config& c) { return c.quant.qlora_fp8; }},
           {"qlora_fp4", [](const Config& c) { return c.quant.qlora_fp4; }},
           {"qlora_bnb", [](const Config& c) { return c.quant.qlora_bnb; }}}) {
    const std::string option = key;
    const bool qlora = option.starts_with("qlora");
    const Flag set = flag;
    rows.push_back(fp16_cuda_row(
        "float16 with " + option, Stage::Backend, key,
        [set](const Config& c, const RunShape&) { return set(c); },
        [option, qlora](const Config&, const RunShape&) { return fmt::format("{}: true{}", option, qlora ? " (QLoRA)" : ""); },
        fixed(qlora ? std::string("train LoRA without quantization") : "remove " + option)));
  }
  rows.push_back(fp16_cuda_row(
      "float16 with another recipe on CUDA", Stage::Backend, "recipe",
      [](const Config& c, const RunShape&) { return c.precision.recipe != Recipe::Bf16; },
      [](const Config& c, const RunShape&) { return fmt::format("recipe: {}", to_string(c.precision.recipe)); },
      fixed("remove recipe")));
}

void add_cuda_several_gpu_rows(std::vector<SupportRow>& rows) {
  rows.push_back({"cuda bf16 masters on several GPUs", Stage::Backend, Backend::Cuda,
                  [](const Config& c, const RunShape& s) { return s.several_ranks() && c.precision.master_dtype == MasterDtype::Bf16; },
                  [](const Config& c, const RunShape& s) {
                    return fmt::format("{}: master_dtype: bf16 is implemented on one GPU only; with gpus: {} ({} "
                                       "data-parallel GPUs) keep fp32 master weights (remove the option), or train on "
                                       "one GPU",
                                       c.sources.of("master_dtype"), c.parallel.gpus, s.world_size);
                  }});
  for (const auto& [key, flag] : {std::pair{"offload_master", &config::Offload::offload_master},
                                  std::pair{"offload_grads", &config::Offload::offload_grads}}) {
    const std::string option = key;
    bool config::Offload::*set = flag;
    rows.push_back({"cuda " + option + " on several GPUs", Stage::Backend, Backend::Cuda,
                    [set](const Config& c, const RunShape& s) { return s.several_ranks() && c.offload.*set; },
                    [option](const Config& c, const RunShape& s) {
                      return fmt::format("{}: {} is implemented on one GPU only (the data-parallel GPUs exchange masters "
                                         "and gradients in GPU memory); with gpus: {} ({} data-parallel GPUs) remove it — "
                                         "offload_optimizer works with several GPUs — or train on one GPU",
                                         c.sources.of(option), option, c.parallel.gpus, s.world_size);
                    }});
  }
  rows.push_back({"cuda nvfp4", Stage::Backend, Backend::Cuda,
                  [](const Config& c, const RunShape&) { return c.precision.recipe == Recipe::Nvfp4; },
                  [](const Config& c, const RunShape&) {
                    return fmt::format("{}: recipe: nvfp4 is not implemented yet on the CUDA backend; use recipe: bf16 "
                                       "or fp8_hybrid",
                                       c.sources.of("recipe"));
                  }});
}

// What needs a particular GPU: fp8 needs SM89+, the nvfp4 recipe SM100+ (qlora_fp4 runs anywhere).
void add_hardware_rows(std::vector<SupportRow>& rows) {
  struct Need {
    const char* name;
    const char* key;
    bool (*used)(const Config&);
    int min_sm;
    const char* family;
  };
  for (const Need& need : {Need{"fp8_hybrid before SM89", "recipe", [](const Config& c) { return c.precision.recipe == Recipe::Fp8Hybrid; },
                                89, "Ada, Hopper or Blackwell"},
                           Need{"qlora_fp8 before SM89", "qlora_fp8", [](const Config& c) { return c.quant.qlora_fp8; }, 89,
                                "Ada, Hopper or Blackwell"},
                           Need{"nvfp4 before SM100", "recipe", [](const Config& c) { return c.precision.recipe == Recipe::Nvfp4; },
                                100, "Blackwell"}}) {
    rows.push_back({need.name, Stage::Hardware, Backend::Any,
                    [need](const Config& c, const RunShape& s) { return need.used(c) && s.gpu_sm < need.min_sm; },
                    [need](const Config& c, const RunShape& s) {
                      const std::string have = s.gpu_sm == 0 ? "no GPU" : fmt::format("SM{}", s.gpu_sm);
                      return fmt::format("{}: option '{}' needs a GPU of compute capability SM{}+ ({}), but this "
                                         "machine has {}",
                                         c.sources.of(need.key), need.key, need.min_sm, need.family, have);
                    }});
  }
}

// The CUDA data-parallel device keeps masters and accumulators in GPU memory, also as a world of
// one (which tests ask for): several GPUs are refused at the Backend stage with their own message.
void add_device_rows(std::vector<SupportRow>& rows) {
  // Per-op times come from CUDA events around each kernel step; the CPU backend has none, and a
  // debug option that silently prints nothing would look like it worked.
  rows.push_back({"debug_time_breakdown on the CPU backend", Stage::Device, Backend::Cpu,
                  [](const Config& c, const RunShape&) { return c.logging.debug_time_breakdown; },
                  [](const Config& c, const RunShape& s) {
                    return fmt::format("{}: debug_time_breakdown needs the CUDA backend (it times each op's kernels "
                                       "with CUDA events), but this run would train on the CPU backend ({}). Remove "
                                       "the option, or run on a machine with a GPU",
                                       c.sources.of("debug_time_breakdown"), s.backend_line);
                  }});
  rows.push_back({"cuda data-parallel device with bf16 masters", Stage::Device, Backend::Cuda,
                  [](const Config& c, const RunShape& s) {
                    return s.data_parallel_device && c.precision.master_dtype == MasterDtype::Bf16;
                  },
                  [](const Config& c, const RunShape&) {
                    return fmt::format("{}: master_dtype: bf16 is implemented on one GPU only, not on the data-parallel "
                                       "device",
                                       c.sources.of("master_dtype"));
                  }});
  for (const auto& [key, flag] : {std::pair{"offload_master", &config::Offload::offload_master},
                                  std::pair{"offload_grads", &config::Offload::offload_grads}}) {
    const std::string option = key;
    bool config::Offload::*set = flag;
    rows.push_back({"cuda data-parallel device with " + option, Stage::Device, Backend::Cuda,
                    [set](const Config& c, const RunShape& s) { return s.data_parallel_device && c.offload.*set; },
                    [option](const Config& c, const RunShape&) {
                      return fmt::format("{}: {} is implemented on one GPU only, not on the data-parallel device",
                                         c.sources.of(option), option);
                    }});
  }
}


void add_backend_rows(std::vector<SupportRow>& rows) {
  add_cpu_backend_rows(rows);
  add_fp16_cuda_rows(rows);
  add_cuda_several_gpu_rows(rows);
  add_hardware_rows(rows);
  add_device_rows(rows);
  add_pipeline_process_rows(rows);
  // The model: the mixture-of-experts CUDA kernels are bf16 only.
  rows.push_back(fp16_cuda_row(
      "float16 with a mixture-of-experts model", Stage::Model, "torch_dtype",
      [](const Config&, const RunShape& s) { return s.moe; },
      [](const Config&, const RunShape& s) { return fmt::format("a mixture-of-experts model ({})", s.model_type); },
      [](const Config&) { return std::string("train a dense model in fp16"); }));
}

}  // namespace

const std::vector<SupportRow>& feature_support_table() {
  static const std::vector<SupportRow> table = [] {
    std::vector<SupportRow> rows;
    add_precision_rows(rows);
    add_schedule_rows(rows);
    add_model_parallel_rows(rows);
    add_lora_rows(rows);
    add_offload_rows(rows);
    add_preference_rows(rows);
    add_grpo_rows(rows);
    add_vision_rows(rows);
    add_backend_rows(rows);
    return rows;
  }();
  return table;
}

const SupportRow* first_refusal(const Config& config, SupportStage stage, const RunShape& shape) {
  for (const SupportRow& row : feature_support_table()) {
    if (row.stage != stage) continue;
    if (row.backend != Backend::Any && row.backend != shape.backend) continue;
    if (row.refuses(config, shape)) return &row;
  }
  return nullptr;
}

void refuse_unsupported(const Config& config, SupportStage stage, const RunShape& shape) {
  if (const SupportRow* row = first_refusal(config, stage, shape)) throw UserError(row->message(config, shape));
}

}  // namespace surogate
