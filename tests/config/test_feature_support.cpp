// The feature-support table (config/feature_support.h): every row fires, alone, at its stage with
// its message (checked against a phrase of the message users and tests know), every row of the
// table has a case here, and a valid configuration passes every stage on every backend.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/config_loader.h"
#include "config/feature_support.h"
#include "config_test_util.h"
#include "feature_support_cases.h"
#include "core/error.h"

namespace surogate {
namespace {
using testing_util::contains;
using testing_util::kMinimalConfig;
using namespace feature_support_test;

// A configuration every stage accepts, as loaded (implications applied).
Config valid_config() { return load_config_from_string(kMinimalConfig, "config.yaml"); }

std::vector<RowCase> engine_row_cases() {
  using S = SupportStage;
  const auto options = [](std::function<void(Config&)> set) {
    return [set](Config& c, RunShape&) { set(c); };
  };
  return {
      {"fp8_hybrid full fine-tuning with sharded weights", S::Options, options([](Config& c) {
         c.parallel.shard_weights = true;
         c.precision.recipe = Recipe::Fp8Hybrid;
         c.lora.enabled = false;
       }),
       "option 'shard_weights' with recipe: fp8_hybrid needs lora: true"},
      {"fp8_amax_history without fp8_hybrid", S::Options, options([](Config& c) { c.precision.fp8_amax_history = 16; }),
       "option 'fp8_amax_history' only applies to recipe: fp8_hybrid"},
      {"skip_quant_first_layers without fp8_hybrid", S::Options,
       options([](Config& c) { c.precision.skip_quant_first_layers = 1; }),
       "option 'skip_quant_first_layers' only applies to recipe: fp8_hybrid"},
      {"skip_quant_last_layers without fp8_hybrid", S::Options,
       options([](Config& c) { c.precision.skip_quant_last_layers = 1; }),
       "option 'skip_quant_last_layers' only applies to recipe: fp8_hybrid"},
      {"fp8 gradient_dtype without fp8_hybrid", S::Options,
       options([](Config& c) { c.precision.gradient_dtype = GradientDtype::Fp8E5M2; }),
       "fp8_e4m3 / fp8_e5m2 are the fp8_hybrid recipe's backward-matmul formats"},
      {"float16 with another recipe", S::Options, options([](Config& c) {
         c.model.torch_dtype = TorchDtype::Float16;
         c.precision.recipe = Recipe::Fp8Hybrid;
       }),
       "option 'torch_dtype' float16 (fp16 training with loss scaling) does not combine with recipe: fp8_hybrid"},
      {"fp16_loss_scale without float16", S::Options, options([](Config& c) { c.precision.fp16_loss_scale = 1024; }),
       "option 'fp16_loss_scale' only applies to fp16 training"},
      {"fp16_loss_scale_window without float16", S::Options,
       options([](Config& c) { c.precision.fp16_loss_scale_window = 7; }),
       "option 'fp16_loss_scale_window' only applies to fp16 training"},
      {"recipe nvfp4", S::Options, options([](Config& c) { c.precision.recipe = Recipe::Nvfp4; }),
       "option 'recipe' nvfp4 is not implemented yet: its matmuls run on FP4 tensor cores"},
      {"fp4_backend without nvfp4", S::Options, options([](Config& c) { c.precision.fp4_backend = Fp4Backend::Cudnn; }),
       "option 'fp4_backend' only applies to recipe: nvfp4"},
      {"qlora_four_over_six without qlora_fp4", S::Options,
       options([](Config& c) { c.quant.qlora_four_over_six = false; }),
       "option 'qlora_four_over_six' only applies to qlora_fp4"},
      {"cooldown_steps without wsd", S::Options, options([](Config& c) { c.schedule.cooldown_steps = 5; }),
       "option 'cooldown_steps' only applies to lr_scheduler_type: wsd"},
      {"attn_bwd_chunks over the micro-batch", S::Options, options([](Config& c) {
         c.kernels.attn_bwd_chunks = 4;
         c.schedule.per_device_train_batch_size = 2;
       }),
       "option 'attn_bwd_chunks' splits the attention backward over the micro-batch's rows, so it can be at most "
       "per_device_train_batch_size (2), got 4"},
      {"sequence_parallel_size with fp8_hybrid", S::Options, options([](Config& c) {
         c.parallel.sequence_parallel_size = 2;
         c.precision.recipe = Recipe::Fp8Hybrid;
       }),
       "option 'sequence_parallel_size' cannot be combined with recipe: fp8_hybrid yet"},
      {"sequence_parallel_size with offload_residual", S::Options, options([](Config& c) {
         c.parallel.sequence_parallel_size = 2;
         c.offload.offload_residual = true;
       }),
       "option 'sequence_parallel_size' cannot be combined with offload_residual yet"},
      {"pipeline_parallel_size with fp8_hybrid", S::Options, options([](Config& c) {
         c.parallel.pipeline_parallel_size = 2;
         c.precision.recipe = Recipe::Fp8Hybrid;
       }),
       "option 'pipeline_parallel_size' cannot be combined with recipe: fp8_hybrid yet"},
      {"pipeline_parallel_size with offload_residual", S::Options, options([](Config& c) {
         c.parallel.pipeline_parallel_size = 2;
         c.offload.offload_residual = true;
       }),
       "option 'pipeline_parallel_size' cannot be combined with offload_residual yet"},
      {"pipeline_parallel_size with ZeRO-3", S::Options, options([](Config& c) {
         c.parallel.pipeline_parallel_size = 2;
         c.parallel.zero_level = 3;
       }),
       "option 'pipeline_parallel_size' cannot be combined with zero_level: 3 yet"},
      {"pipeline_stage_layers for another stage count", S::Options, options([](Config& c) {
         c.parallel.pipeline_parallel_size = 2;
         c.parallel.pipeline_stage_layers = {1, 1, 1};
       }),
       "option 'pipeline_stage_layers' lists 3 stages, but pipeline_parallel_size is 2"},
      {"merge_adapter without lora", S::Options, options([](Config& c) {
         c.lora.merge_adapter = true;
         c.lora.enabled = false;
       }),
       "option 'merge_adapter' needs lora: true"},
      {"lora_dtype bf16 without lora", S::Options, options([](Config& c) {
         c.lora.lora_dtype = LoraDtype::Bf16;
         c.lora.enabled = false;
       }),
       "option 'lora_dtype' bf16 applies to LoRA adapters; with lora: false remove it"},
      {"lora_dtype bf16 with fp8_hybrid", S::Options, options([](Config& c) {
         c.lora.lora_dtype = LoraDtype::Bf16;
         c.precision.recipe = Recipe::Fp8Hybrid;
       }),
       "option 'lora_dtype' bf16 does not combine with recipe: fp8_hybrid yet"},
      {"lora_dtype bf16 with other master or gradient dtypes", S::Options, options([](Config& c) {
         c.lora.lora_dtype = LoraDtype::Bf16;
         c.precision.master_dtype = MasterDtype::Fp32;
       }),
       "option 'lora_dtype' bf16 keeps the adapters' masters and gradients in bf16"},
      {"several qlora modes", S::Options, options([](Config& c) {
         c.quant.qlora_fp8 = true;
         c.quant.qlora_bnb = true;
       }),
       "option 'qlora_bnb' cannot be combined with another qlora_* mode"},
      {"qlora without lora", S::Options, options([](Config& c) {
         c.quant.qlora_fp4 = true;
         c.lora.enabled = false;
       }),
       "option 'qlora_fp4' needs lora: true (QLoRA trains LoRA adapters on a quantized base model)"},
      {"use_zero_copy without offloading", S::Options, options([](Config& c) { c.offload.use_zero_copy = true; }),
       "option 'use_zero_copy' only applies to offloaded buffers"},
      {"use_write_combined without offloading", S::Options,
       options([](Config& c) { c.offload.use_write_combined = true; }),
       "option 'use_write_combined' only applies to offloaded buffers"},
      {"offload_master with bf16 masters", S::Options, options([](Config& c) {
         c.offload.offload_master = true;
         c.precision.master_dtype = MasterDtype::Bf16;
       }),
       "option 'offload_master' offloads the fp32 master weights, and master_dtype: bf16 keeps none"},
      {"staged offload with normuon", S::Options, options([](Config& c) {
         c.offload.offload_optimizer = true;
         c.optimizer.algorithm = Optimizer::NorMuon;
       }),
       "option 'offload_optimizer' with optimizer: normuon needs use_zero_copy: true"},
      {"staged offload_optimizer with bf16 masters", S::Options, options([](Config& c) {
         c.offload.offload_optimizer = true;
         c.precision.master_dtype = MasterDtype::Bf16;
       }),
       "option 'offload_optimizer' with master_dtype: bf16 needs use_zero_copy: true"},
      {"offload_quants without persistent_quants", S::Options,
       options([](Config& c) { c.offload.offload_quants = true; }),
       "option 'offload_quants' requires persistent_quants: true"},
      {"persistent_quants without sharded weights", S::Options,
       options([](Config& c) { c.offload.persistent_quants = true; }),
       "option 'persistent_quants' requires shard_weights: true (or zero_level: 3)"},
      {"offload_quants with offload_master", S::Options, options([](Config& c) {
         c.offload.offload_quants = c.offload.persistent_quants = c.parallel.shard_weights = true;
         c.offload.offload_master = true;
       }),
       "option 'offload_quants' cannot be combined with offload_master yet"},
      {"offload_quants with offload_grads", S::Options, options([](Config& c) {
         c.offload.offload_quants = c.offload.persistent_quants = c.parallel.shard_weights = true;
         c.offload.offload_grads = true;
       }),
       "option 'offload_quants' cannot be combined with offload_grads yet"},
      {"offload_quants with bf16 masters", S::Options, options([](Config& c) {
         c.offload.offload_quants = c.offload.persistent_quants = c.parallel.shard_weights = true;
         c.precision.master_dtype = MasterDtype::Bf16;
       }),
       "option 'offload_quants' cannot be combined with master_dtype: bf16 yet"},
      // The Backend stage: the CPU backend.
      {"cpu master_dtype", S::Backend,
       [](Config& c, RunShape& s) {
         c.precision.master_dtype = MasterDtype::Bf16;
         s = cpu();
       },
       "master_dtype: bf16 is implemented on the CUDA backend only"},
      {"cpu gradient_dtype", S::Backend,
       [](Config& c, RunShape& s) {
         c.precision.gradient_dtype = GradientDtype::Bf16;
         s = cpu();
       },
       "gradient_dtype: bf16 is implemented on the CUDA backend only"},
      {"cpu offload_master", S::Backend,
       [](Config& c, RunShape& s) {
         c.offload.offload_master = true;
         s = cpu();
       },
       "offload_master moves GPU memory to pinned host memory; it applies to the CUDA backend only"},
      {"cpu offload_optimizer", S::Backend,
       [](Config& c, RunShape& s) {
         c.offload.offload_optimizer = true;
         s = cpu();
       },
       "offload_optimizer moves GPU memory to pinned host memory"},
      {"cpu offload_grads", S::Backend,
       [](Config& c, RunShape& s) {
         c.offload.offload_grads = true;
         s = cpu();
       },
       "offload_grads moves GPU memory to pinned host memory"},
      {"cpu pipeline over processes", S::Device,
       [](Config&, RunShape& s) {
         s = cpu();
         s.world_size = s.pipeline_size = s.processes = 2;
       },
       "pipeline_parallel_size: 2 runs its stages as rank threads of one process in this version; a launcher or Ray "
       "started 2 processes. Start one process with gpus: 2 (the stages × replicas), or use data or sequence "
       "parallelism across processes"},
      // The Backend stage: the CUDA backend.
      {"float16 on several GPUs", S::Backend,
       [](Config& c, RunShape& s) {
         c.model.torch_dtype = TorchDtype::Float16;
         c.parallel.gpus = 2;
         s = cuda(2);
       },
       "torch_dtype: float16 with gpus: 2 (2 data-parallel ranks, ZeRO-1) is not implemented on the CUDA backend"},
      {"float16 with master_dtype", S::Backend,
       [](Config& c, RunShape& s) {
         c.model.torch_dtype = TorchDtype::Float16;
         c.precision.master_dtype = MasterDtype::Bf16;
         s = cuda();
       },
       "torch_dtype: float16 with master_dtype: bf16 is not implemented"},
      {"float16 with gradient_dtype", S::Backend,
       [](Config& c, RunShape& s) {
         c.model.torch_dtype = TorchDtype::Float16;
         c.precision.gradient_dtype = GradientDtype::Bf16;
         s = cuda();
       },
       "torch_dtype: float16 with gradient_dtype: bf16 is not implemented"},
      {"float16 with normuon", S::Backend,
       [](Config& c, RunShape& s) {
         c.model.torch_dtype = TorchDtype::Float16;
         c.optimizer.algorithm = Optimizer::NorMuon;
         s = cuda();
       },
       "torch_dtype: float16 with optimizer: normuon is not implemented"},
      {"float16 with offload_master", S::Backend,
       [](Config& c, RunShape& s) {
         c.model.torch_dtype = TorchDtype::Float16;
         c.offload.offload_master = true;
         s = cuda();
       },
       "torch_dtype: float16 with offload_master: true is not implemented"},
      {"float16 with offload_grads", S::Backend,
       [](Config& c, RunShape& s) {
         c.model.torch_dtype = TorchDtype::Float16;
         c.offload.offload_grads = true;
         s = cuda();
       },
       "; remove offload_grads, or set torch_dtype: bfloat16"},
      {"float16 with offload_optimizer", S::Backend,
       [](Config& c, RunShape& s) {
         c.model.torch_dtype = TorchDtype::Float16;
         c.offload.offload_optimizer = true;
         s = cuda();
       },
       "torch_dtype: float16 with offload_optimizer: true"},
      {"float16 with offload_residual", S::Backend,
       [](Config& c, RunShape& s) {
         c.model.torch_dtype = TorchDtype::Float16;
         c.offload.offload_residual = true;
         s = cuda();
       },
       "torch_dtype: float16 with offload_residual: true"},
      {"float16 with offload_quants", S::Backend,
       [](Config& c, RunShape& s) {
         c.model.torch_dtype = TorchDtype::Float16;
         c.offload.offload_quants = true;
         s = cuda();
       },
       "torch_dtype: float16 with offload_quants: true"},
      {"float16 with qlora_fp8", S::Backend,
       [](Config& c, RunShape& s) {
         c.model.torch_dtype = TorchDtype::Float16;
         c.quant.qlora_fp8 = true;
         s = cuda();
       },
       "torch_dtype: float16 with qlora_fp8: true (QLoRA) is not implemented"},
      {"float16 with qlora_fp4", S::Backend,
       [](Config& c, RunShape& s) {
         c.model.torch_dtype = TorchDtype::Float16;
         c.quant.qlora_fp4 = true;
         s = cuda();
       },
       "qlora_fp4: true (QLoRA)"},
      {"float16 with qlora_bnb", S::Backend,
       [](Config& c, RunShape& s) {
         c.model.torch_dtype = TorchDtype::Float16;
         c.quant.qlora_bnb = true;
         s = cuda();
       },
       "; train LoRA without quantization, or set torch_dtype: bfloat16"},
      {"float16 with another recipe on CUDA", S::Backend,
       [](Config& c, RunShape& s) {
         c.model.torch_dtype = TorchDtype::Float16;
         c.precision.recipe = Recipe::Fp8Hybrid;
         s = cuda();
       },
       "torch_dtype: float16 with recipe: fp8_hybrid is not implemented"},
      {"cuda bf16 masters on several GPUs", S::Backend,
       [](Config& c, RunShape& s) {
         c.precision.master_dtype = MasterDtype::Bf16;
         c.parallel.gpus = 2;
         s = cuda(2);
       },
       "master_dtype: bf16 is implemented on one GPU only; with gpus: 2 (2 data-parallel GPUs)"},
      {"cuda offload_master on several GPUs", S::Backend,
       [](Config& c, RunShape& s) {
         c.offload.offload_master = true;
         c.parallel.gpus = 2;
         s = cuda(2);
       },
       "offload_master is implemented on one GPU only (the data-parallel GPUs exchange masters and gradients"},
      {"cuda offload_grads on several GPUs", S::Backend,
       [](Config& c, RunShape& s) {
         c.offload.offload_grads = true;
         c.parallel.gpus = 2;
         s = cuda(2);
       },
       "offload_grads is implemented on one GPU only"},
      {"cuda nvfp4", S::Backend,
       [](Config& c, RunShape& s) {
         c.precision.recipe = Recipe::Nvfp4;
         s = cuda();
       },
       "recipe: nvfp4 is not implemented yet on the CUDA backend; use recipe: bf16 or fp8_hybrid"},
      {"cuda pipeline over processes", S::Device,
       [](Config&, RunShape& s) {
         s = cuda(2);
         s.pipeline_size = s.processes = 2;
       },
       "(the stages × replicas), or use data parallelism across processes"},
      // The Hardware stage.
      {"fp8_hybrid before SM89", S::Hardware,
       [](Config& c, RunShape& s) {
         c.precision.recipe = Recipe::Fp8Hybrid;
         s.gpu_sm = 80;
       },
       "option 'recipe' needs a GPU of compute capability SM89+ (Ada, Hopper or Blackwell), but this machine has SM80"},
      {"qlora_fp8 before SM89", S::Hardware,
       [](Config& c, RunShape& s) {
         c.quant.qlora_fp8 = true;
         s.gpu_sm = 0;
       },
       "option 'qlora_fp8' needs a GPU of compute capability SM89+ (Ada, Hopper or Blackwell), but this machine has "
       "no GPU"},
      {"nvfp4 before SM100", S::Hardware,
       [](Config& c, RunShape& s) {
         c.precision.recipe = Recipe::Nvfp4;
         s.gpu_sm = 90;
       },
       "option 'recipe' needs a GPU of compute capability SM100+ (Blackwell), but this machine has SM90"},
      // The Device stage.
      {"debug_time_breakdown on the CPU backend", S::Device,
       [](Config& c, RunShape& s) {
         c.logging.debug_time_breakdown = true;
         s = cpu();
         s.backend_line = "chosen by the caller";
       },
       "debug_time_breakdown needs the CUDA backend (it times each op's kernels with CUDA events), but this run would "
       "train on the CPU backend (chosen by the caller)"},
      {"cuda data-parallel device with bf16 masters", S::Device,
       [](Config& c, RunShape& s) {
         c.precision.master_dtype = MasterDtype::Bf16;
         s = cuda();
         s.data_parallel_device = true;
       },
       "master_dtype: bf16 is implemented on one GPU only, not on the data-parallel device"},
      {"cuda data-parallel device with offload_master", S::Device,
       [](Config& c, RunShape& s) {
         c.offload.offload_master = true;
         s = cuda();
         s.data_parallel_device = true;
       },
       "offload_master is implemented on one GPU only, not on the data-parallel device"},
      {"cuda data-parallel device with offload_grads", S::Device,
       [](Config& c, RunShape& s) {
         c.offload.offload_grads = true;
         s = cuda();
         s.data_parallel_device = true;
       },
       "offload_grads is implemented on one GPU only, not on the data-parallel device"},
      // surogate dpo (loss.preference is set by the command, so these rows wait for the Backend stage).
      // The Model stage.
      {"float16 with a mixture-of-experts model", S::Model,
       [](Config& c, RunShape& s) {
         c.model.torch_dtype = TorchDtype::Float16;
         s = cuda();
         s.moe = true;
         s.model_type = "qwen3_moe";
       },
       "torch_dtype: float16 with a mixture-of-experts model (qwen3_moe) is not implemented on the CUDA backend"},
  };
}

// Every row's case: the engine's above, the training modes' in test_feature_support_modes.cpp.
std::vector<RowCase> row_cases() {
  std::vector<RowCase> cases = engine_row_cases();
  for (RowCase& row_case : vision_row_cases()) cases.push_back(std::move(row_case));
  for (RowCase& row_case : training_mode_row_cases()) cases.push_back(std::move(row_case));
  return cases;
}

TEST(FeatureSupport, EveryRowFiresAloneWithItsMessage) {
  for (const RowCase& row_case : row_cases()) {
    SCOPED_TRACE(row_case.row);
    Config config = valid_config();
    RunShape shape;
    row_case.set(config, shape);
    const SupportRow* row = first_refusal(config, row_case.stage, shape);
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(row->name, row_case.row);
    try {
      refuse_unsupported(config, row_case.stage, shape);
      ADD_FAILURE() << "no UserError";
    } catch (const UserError& error) {
      EXPECT_EQ(std::string(error.what()), row->message(config, shape));
      EXPECT_TRUE(contains(error.what(), row_case.phrase)) << error.what();
      // Where the option was set comes first (Config::source_of).
      EXPECT_TRUE(std::string(error.what()).starts_with("the default") ||
                  std::string(error.what()).starts_with("config.yaml"))
          << error.what();
    }
  }
}

TEST(FeatureSupport, EveryRowHasACaseAndAUniqueName) {
  std::set<std::string> cased;
  for (const RowCase& row_case : row_cases()) EXPECT_TRUE(cased.insert(row_case.row).second) << row_case.row;
  std::set<std::string> names;
  for (const SupportRow& row : feature_support_table()) {
    EXPECT_TRUE(names.insert(row.name).second) << "two rows named " << row.name;
    EXPECT_TRUE(cased.contains(row.name)) << "no case fires the row " << row.name;
  }
  EXPECT_EQ(names, cased);
}

TEST(FeatureSupport, AValidGrpoRunOnOneDevicePassesEveryStage) {
  Config config = valid_config();
  make_grpo(config);
  for (const SupportStage stage : {SupportStage::Options, SupportStage::Backend, SupportStage::Hardware,
                                   SupportStage::Device, SupportStage::Model}) {
    for (RunShape shape : {cpu(), cuda()}) {
      shape.gpu_sm = shape.backend == SupportBackend::Cuda ? 90 : 0;
      const SupportRow* row = first_refusal(config, stage, shape);
      EXPECT_EQ(row, nullptr) << row->name;
    }
  }
}

// `surogate grpo` on data-parallel ranks of one process (ZeRO-1/2, CPU threads or GPUs) runs; ZeRO-3
// on one rank without the data-parallel device too (the single device holds every weight).
TEST(FeatureSupport, GrpoOnDataParallelRanksOfOneProcessPasses) {
  for (const int64_t zero : {1, 2, 3}) {
    Config config = valid_config();
    make_grpo(config);
    config.parallel.zero_level = zero;
    for (RunShape shape : {cpu(), cuda(2)}) {
      shape.world_size = zero == 3 ? 1 : 2;
      shape.data_parallel_device = zero != 3;
      for (const SupportStage stage : {SupportStage::Backend, SupportStage::Device}) {
        const SupportRow* row = first_refusal(config, stage, shape);
        EXPECT_EQ(row, nullptr) << zero << ": " << row->name;
      }
    }
  }
}

// The rollouts read QLoRA's quantized base and fp8_hybrid's FP8 weights in place (tests/python/test_grpo_quantized.py).
TEST(FeatureSupport, GrpoWithQloraOrFp8RunsOnOneDevice) {
  for (int variant = 0; variant < 4; ++variant) {
    Config config = valid_config();
    make_grpo(config);
    config.lora.enabled = variant < 3;
    config.quant.qlora_bnb = variant == 0;
    config.quant.qlora_fp4 = variant == 1;
    config.precision.recipe = variant >= 2 ? Recipe::Fp8Hybrid : Recipe::Bf16;
    for (const SupportStage stage : {SupportStage::Options, SupportStage::Backend, SupportStage::Hardware,
                                     SupportStage::Device, SupportStage::Model}) {
      for (RunShape shape : {cpu(), cuda()}) {
        // The hardware rows judge GPUs only (backend_selection.cpp): the CPU backend emulates FP8.
        if (stage == SupportStage::Hardware && shape.backend == SupportBackend::Cpu) continue;
        shape.gpu_sm = shape.backend == SupportBackend::Cuda ? 90 : 0;
        const SupportRow* row = first_refusal(config, stage, shape);
        EXPECT_EQ(row, nullptr) << variant << ": " << row->name;
      }
    }
  }
}

TEST(FeatureSupport, AValidConfigurationPassesEveryStage) {
  const Config config = valid_config();
  for (const SupportStage stage : {SupportStage::Options, SupportStage::Backend, SupportStage::Hardware,
                                   SupportStage::Device, SupportStage::Model}) {
    for (RunShape shape : {cpu(), cuda(), cuda(2)}) {
      shape.gpu_sm = shape.backend == SupportBackend::Cuda ? 90 : 0;
      shape.data_parallel_device = shape.several_ranks();
      EXPECT_EQ(first_refusal(config, stage, shape), nullptr);
      EXPECT_NO_THROW(refuse_unsupported(config, stage, shape));
    }
  }
}

// `surogate sft` trains a vision-language folder (Qwen2.5-VL or Qwen3-VL): LoRA (with merge_adapter
// or not) or full fine-tuning, with or without evaluation; the tower frozen or not (freeze_vision,
// set); QLoRA, fp8_hybrid and data-parallel ranks (ZeRO 1/2/3, several nodes) too. Sequence and
// pipeline parallelism are refused by one row, naming the option.
TEST(FeatureSupport, VisionLanguageTrainingPasses) {
  for (const char* model_type : {"Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration"}) {
    Config config = valid_config();
    RunShape shape;
    shape.vision_language = true;
    shape.model_type = model_type;
    config.sources["freeze_vision"] = "config.yaml:3";
    for (const bool lora : {true, false}) {
      for (const double ratio : {0.0, 0.1}) {  // 0.1, the default, evaluates
        for (const bool freeze : {true, false}) {
          config.lora.enabled = lora;
          config.lora.merge_adapter = lora;
          config.eval.validation_split_ratio = ratio;
          config.model.freeze_vision = freeze;
          EXPECT_EQ(first_refusal(config, SupportStage::Model, shape), nullptr)
              << model_type << " " << lora << " " << ratio << " " << freeze;
        }
      }
    }
    config.model.freeze_vision = true;
    config.eval.validation_split_ratio = 0.0;
    config.eval.validation_datasets.push_back(config.data.datasets[0]);  // held-out rows of their own
    EXPECT_EQ(first_refusal(config, SupportStage::Model, shape), nullptr) << model_type;
    for (const auto& set : std::vector<std::function<void(Config&)>>{
             [](Config& c) { c.quant.qlora_bnb = true; }, [](Config& c) { c.quant.qlora_fp8 = true; },
             [](Config& c) { c.quant.qlora_fp4 = true; }, [](Config& c) { c.precision.recipe = Recipe::Fp8Hybrid; },
             [](Config& c) { c.parallel.gpus = 2; },
             [](Config& c) {
               c.parallel.gpus = 2;
               c.parallel.zero_level = 3;
               c.parallel.shard_weights = c.parallel.shard_gradients = true;
             },
             [](Config& c) { c.distributed.num_nodes = 2; }}) {
      Config passing = config;
      passing.lora.enabled = true;
      set(passing);
      EXPECT_EQ(first_refusal(passing, SupportStage::Model, shape), nullptr) << model_type;
    }
    for (const auto& [set, key] : std::vector<std::pair<std::function<void(Config&)>, std::string>>{
             {[](Config& c) { c.parallel.sequence_parallel_size = 2; }, "sequence_parallel_size"},
             {[](Config& c) { c.parallel.pipeline_parallel_size = 2; }, "pipeline_parallel_size"}}) {
      Config refused = config;
      set(refused);
      refused.sources[key] = "config.yaml:7";  // the message names where the option was set
      const SupportRow* row = first_refusal(refused, SupportStage::Model, shape);
      ASSERT_NE(row, nullptr) << key;
      EXPECT_EQ(row->name, "vision-language model with sequence or pipeline parallelism");
      EXPECT_EQ(row->message(refused, shape).rfind("config.yaml:7: sequence / pipeline parallelism", 0), 0u)
          << row->message(refused, shape);
    }
  }
}

// `surogate dpo` on data-parallel ranks of one process (ZeRO-1/2/3, CPU threads or GPUs) runs.
TEST(FeatureSupport, PreferenceTuningOnDataParallelRanksOfOneProcessPasses) {
  Config config = valid_config();
  config.loss.preference = true;
  config.data.datasets[0].type = DatasetType::Preference;
  for (RunShape shape : {cpu(), cuda(2)}) {
    shape.world_size = 2;
    shape.data_parallel_device = true;
    for (const SupportStage stage : {SupportStage::Backend, SupportStage::Device}) {
      EXPECT_EQ(first_refusal(config, stage, shape), nullptr);
    }
  }
}

TEST(FeatureSupport, AnOptionsRowNamesTheFileAndLine) {
  const std::string error =
      testing_util::load_error(std::string(kMinimalConfig) + "lora: false\nmerge_adapter: true\n");
  EXPECT_TRUE(contains(error, "config.yaml:6: option 'merge_adapter' needs lora: true")) << error;
}

}  // namespace
}  // namespace surogate
