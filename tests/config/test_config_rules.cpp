#include <gtest/gtest.h>

#include <algorithm>

#include "config/config_rules.h"
#include "config_test_util.h"

namespace surogate {
namespace {
using testing_util::contains;
using testing_util::kMinimalConfig;
using testing_util::load_error;

Config load(const std::string& extra, const std::vector<std::string>& overrides = {}) {
  return load_config_from_string(std::string(kMinimalConfig) + extra, "config.yaml", overrides);
}

TEST(ConfigRules, RecomputeHierarchy) {
  Config config = load(
      "lora: false\nrecompute_block: false\nrecompute_att: true\nrecompute_qkv: false\nrecompute_ffn: false\n"
      "recompute_swiglu: false\nrecompute_rmsnorm: false\n");
  EXPECT_TRUE(config.recompute.recompute_att);
  EXPECT_TRUE(config.recompute.recompute_qkv);  // recompute_att ⇒ recompute_qkv
  EXPECT_FALSE(config.recompute.recompute_ffn);
  EXPECT_FALSE(config.recompute.recompute_swiglu);

  config = load("lora: false\nrecompute_block: true\nrecompute_att: false\nrecompute_qkv: false\nrecompute_ffn: false\n"
                "recompute_swiglu: false\nrecompute_rmsnorm: false\n");
  EXPECT_TRUE(config.recompute.recompute_att && config.recompute.recompute_ffn && config.recompute.recompute_rmsnorm);
  EXPECT_TRUE(config.recompute.recompute_qkv && config.recompute.recompute_swiglu);

  config = load("lora: true\nrecompute_lora: true\nrecompute_block: false\n");
  EXPECT_TRUE(config.recompute.recompute_block);  // recompute_lora ⇒ recompute_block
  config = load("lora: false\nrecompute_lora: true\nrecompute_block: false\nrecompute_att: false\n"
                "recompute_ffn: false\nrecompute_rmsnorm: false\n");
  EXPECT_FALSE(config.recompute.recompute_block);  // only with LoRA
}

TEST(ConfigRules, ZeroLevelsShardWhatTheyPromise) {
  // Multi-GPU is not implemented yet, so check the implication directly.
  Config config;
  config.parallel.zero_level = 3;
  apply_implications(config);
  EXPECT_TRUE(config.parallel.shard_gradients);
  EXPECT_TRUE(config.parallel.shard_weights);
  Config two;
  two.parallel.zero_level = 2;
  apply_implications(two);
  EXPECT_TRUE(two.parallel.shard_gradients);
  EXPECT_FALSE(two.parallel.shard_weights);
}

TEST(ConfigRules, DerivedDefaults) {
  Config config = load("output_dir: runs/a\nsequence_len: 512\n");
  EXPECT_EQ(config.checkpoint.checkpoint_dir, "runs/a");
  EXPECT_EQ(config.data.max_length, 512);
  config = load("output_dir: runs/a\ncheckpoint_dir: ckpt\nsequence_len: 512\nmax_length: 256\n");
  EXPECT_EQ(config.checkpoint.checkpoint_dir, "ckpt");
  EXPECT_EQ(config.data.max_length, 256);
}

TEST(ConfigRules, CudaGraphsOffForQLoRAAndRecomputeLoraWithOffload) {
  Config config;
  config.quant.qlora_bnb = true;
  apply_implications(config);
  EXPECT_FALSE(config.kernels.use_cuda_graphs);
  Config other;
  other.offload.offload_residual = true;
  apply_implications(other);
  EXPECT_FALSE(other.kernels.use_cuda_graphs);
}

TEST(ConfigRules, ConstraintsBetweenOptions) {
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "offload_quants: true\n"), "requires persistent_quants"));
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "persistent_quants: true\n"), "requires shard_weights"));
  const std::string offloaded_quants = std::string(kMinimalConfig) + "zero_level: 3\npersistent_quants: true\noffload_quants: true\n";
  EXPECT_TRUE(contains(load_error(offloaded_quants + "offload_master: true\n"), "offload_quants' cannot be combined with offload_master"));
  EXPECT_TRUE(contains(load_error(offloaded_quants + "pipeline_parallel_size: 2\ngpus: 2\n"), "zero_level: 3"));
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "qlora_block_size: 100\n"), "64, 128 or 256"));
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "qlora_bnb_block_size: 32\n"), "64, 128, 256 or 512"));
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "qlora_fp8: true\nqlora_bnb: true\n"), "choose one"));
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "lora: false\nqlora_bnb: true\n"), "needs lora: true"));
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "zero_level: 4\n"), "1, 2 or 3"));
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "cooldown_steps: 10\n"), "wsd"));
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "lora: false\nmerge_adapter: true\n"), "needs lora"));
}

TEST(ConfigRules, RangesAreChecked) {
  for (const char* bad : {"validation_split_ratio: 1.5\n", "warmup_ratio: -0.1\n", "final_lr_fraction: 2\n",
                          "lora_dropout: 1.0\n", "num_epochs: 0\n", "per_device_train_batch_size: 0\n",
                          "max_steps: 0\n", "learning_rate: 0\n", "adamw_beta2: 1.0\n", "lmhead_chunks: 0\n"}) {
    std::string message = load_error(std::string(kMinimalConfig) + bad);
    EXPECT_TRUE(contains(message, "config.yaml:5")) << bad << " → " << message;
  }
}

TEST(ConfigRules, DatasetRequirements) {
  EXPECT_TRUE(contains(load_error("model: m\n"), "'datasets' needs at least one entry"));
  EXPECT_TRUE(contains(load_error("datasets:\n  - {path: d, type: text}\n"), "option 'model' is required"));
  std::string message = load_error("model: m\ndatasets:\n  - path: d\n    type: instruction\n    output_field: o\n");
  EXPECT_TRUE(contains(message, "datasets[0].instruction_field")) << message;
  message = load_error("model: m\ndatasets:\n  - path: d\n    type: instruction\n    instruction_field: i\n"
                       "    output_field: o\n    system_prompt_type: fixed\n");
  EXPECT_TRUE(contains(message, "datasets[0].system_prompt")) << message;
  EXPECT_TRUE(contains(load_error("model: m\ndatasets:\n  - type: text\n"), "datasets[0].path"));
}

// A misspelt placeholder would stay in every prompt as literal text and drop the field silently.
TEST(ConfigRules, PromptFormatPlaceholdersAreChecked) {
  const std::string instruction =
      "model: m\ndatasets:\n  - path: d\n    type: instruction\n    instruction_field: i\n    output_field: o\n";
  std::string message = load_error(instruction + "    prompt_format: \"Q: {instrution} A: {output}\"\n");
  EXPECT_TRUE(contains(message, "config.yaml:7: option 'datasets[0].prompt_format' uses the placeholder {instrution}"))
      << message;
  message = load_error(instruction + "    prompt_format_no_input: \"Answer: {output}\"\n");
  EXPECT_TRUE(contains(message, "'datasets[0].prompt_format_no_input' must contain {instruction}")) << message;
  // The four placeholders, and braces that are not {identifier}, are fine.
  Config config = load_config_from_string(
      instruction + "    prompt_format: \"{system}{instruction} {input} -> {output} {} { x } {1} {\\\"json\\\": 1}\"\n",
      "config.yaml", {});
  EXPECT_TRUE(config.data.datasets[0].prompt_format.has_value());
}

TEST(ConfigRules, HardwareGating) {
  Config config = load("");
  config.precision.recipe = Recipe::Fp8Hybrid;
  EXPECT_THROW(validate_for_hardware(config, 80), UserError);
  EXPECT_NO_THROW(validate_for_hardware(config, 90));
  config.precision.recipe = Recipe::Nvfp4;
  EXPECT_THROW(validate_for_hardware(config, 90), UserError);
  EXPECT_NO_THROW(validate_for_hardware(config, 100));
  try {
    validate_for_hardware(config, 0);
    FAIL();
  } catch (const UserError& error) {
    EXPECT_TRUE(contains(error.what(), "SM100+")) << error.what();
    EXPECT_TRUE(contains(error.what(), "no GPU")) << error.what();
  }
  // qlora_fp4 stores the base in NVFP4 and dequantizes it to bf16: any GPU, or the CPU.
  config.precision.recipe = Recipe::Bf16;
  config.quant.qlora_fp4 = true;
  EXPECT_NO_THROW(validate_for_hardware(config, 0));
  EXPECT_NO_THROW(validate_for_hardware(config, 80));
}

TEST(ConfigRules, Fp4OptionsThatNeedBlackwellOrQloraFp4AreErrors) {
  std::string message = load_error(std::string(kMinimalConfig) + "recipe: nvfp4\n");
  EXPECT_TRUE(contains(message, "'recipe' nvfp4 is not implemented yet")) << message;
  EXPECT_TRUE(contains(message, "Blackwell")) << message;
  message = load_error(std::string(kMinimalConfig) + "lora: true\nqlora_fp4: true\nfp4_backend: cudnn\n");
  EXPECT_TRUE(contains(message, "'fp4_backend' only applies to recipe: nvfp4")) << message;
  message = load_error(std::string(kMinimalConfig) + "qlora_four_over_six: false\n");
  EXPECT_TRUE(contains(message, "'qlora_four_over_six' only applies to qlora_fp4")) << message;
  Config config = load_config_from_string(std::string(kMinimalConfig) + "lora: true\nqlora_fp4: true\n"
                                          "qlora_four_over_six: false\n", "config.yaml", {});
  EXPECT_TRUE(config.quant.qlora_fp4);
  EXPECT_FALSE(config.quant.qlora_four_over_six);
}

TEST(ConfigRules, NotYetImplementedOptionsAreRejectedByName) {
  // Implemented since: max_pixels and norm_bbox (vision-language data; for a text model the data
  // path refuses them); an unknown norm_bbox is refused naming the key and the values.
  EXPECT_EQ(load("max_pixels: 1000000\n").data.max_pixels, 1000000);
  EXPECT_EQ(load("norm_bbox: norm1000\n").data.norm_bbox, NormBbox::Norm1000);
  EXPECT_EQ(load("norm_bbox: none\n").data.norm_bbox, NormBbox::None);
  EXPECT_FALSE(load("norm_bbox: null\n").data.norm_bbox.has_value());
  const std::string unknown = load_error(std::string(kMinimalConfig) + "norm_bbox: norm100\n");
  EXPECT_TRUE(contains(unknown, "config.yaml:5") && contains(unknown, "norm_bbox") && contains(unknown, "norm1000"))
      << unknown;
  EXPECT_TRUE(contains(load_error(kMinimalConfig, {"--persistent_quants=true"}), "command line --persistent_quants=true"));
  // s3:// and gs:// paths are implemented; one without a bucket is an error naming the key.
  EXPECT_NO_THROW(load_config_from_string("model: m\ndatasets:\n  - {path: 's3://bucket/k', type: text}\n", "config.yaml"));
  const std::string no_bucket = load_error("model: m\ndatasets:\n  - {path: 'gs:///k', type: text}\n");
  EXPECT_TRUE(contains(no_bucket, "datasets[0].path") && contains(no_bucket, "names no bucket")) << no_bucket;
  // Setting an option to its default is fine.
  EXPECT_NO_THROW(load("gpus: 1\nrecipe: bf16\noffload_master: false\n"));
  // Implemented since: trackers and GPU sampling; ZeRO-3.
  EXPECT_NO_THROW(load("report_to: [wandb, aim]\nlog_gpu_util: 5\n"));
  EXPECT_TRUE(load("offload_residual: true\n").offload.offload_residual);  // implemented (compiler/residual_offload.h)
  EXPECT_NO_THROW(load("zero_level: 3\n"));
  EXPECT_NO_THROW(load("shard_weights: true\nrecipe: fp8_hybrid\nlora: true\n"));
}

TEST(ConfigRules, ZeroThreeWithFp8FullFineTuningIsRefusedByName) {
  const std::string message = load_error(std::string(kMinimalConfig) + "zero_level: 3\nrecipe: fp8_hybrid\nlora: false\n");
  EXPECT_TRUE(contains(message, "'zero_level' with recipe: fp8_hybrid needs lora: true")) << message;
  const std::string alone = load_error(std::string(kMinimalConfig) + "shard_weights: true\nrecipe: fp8_hybrid\nlora: false\n");
  EXPECT_TRUE(contains(alone, "'shard_weights' with recipe: fp8_hybrid")) << alone;
}

TEST(ConfigRules, TheThreadsBackendsTransportOptionsAreRefusedWithTheirReason) {
  for (const char* option : {"use_all_to_all_reduce", "memcpy_all_gather", "memcpy_send_recv"}) {
    const std::string message = load_error(std::string(kMinimalConfig) + option + ": true\n");
    EXPECT_TRUE(contains(message, "config.yaml:5")) << message;
    EXPECT_TRUE(contains(message, "option '" + std::string(option) + "' is not offered")) << message;
    EXPECT_TRUE(contains(message, "NCCL")) << message;
    EXPECT_FALSE(contains(message, "not implemented yet")) << message;
  }
  EXPECT_NO_THROW(load("use_all_to_all_reduce: false\nmemcpy_all_gather: false\nmemcpy_send_recv: false\n"));
}

TEST(ConfigRules, MultiNodeOptions) {
  // num_nodes > 1 is implemented (Ray or the launcher variables); the Ray address has four forms.
  for (const char* address : {"auto", "local", "ray://head:10001", "10.0.0.1:6379"}) {
    EXPECT_NO_THROW(load(std::string("distributed:\n  num_nodes: 4\n  ray_address: \"") + address + "\"\n")) << address;
  }
  for (const char* address : {"head", "ray://", "head:port", ":6379"}) {
    const std::string message = load_error(std::string(kMinimalConfig) + "distributed:\n  ray_address: \"" + address + "\"\n");
    EXPECT_TRUE(contains(message, "distributed.ray_address")) << message;
    EXPECT_TRUE(contains(message, std::string("(got '") + address + "')")) << message;
  }
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "distributed:\n  worker_output_dir: \"\"\n"),
                       "distributed.worker_output_dir"));
}

TEST(ConfigRules, SequenceAndPipelineParallelism) {
  // Both are implemented (on CPU ranks) and compose with data parallelism and with each other (the
  // CUDA backend refuses the two together: train/device/backend_selection.cpp).
  Config config = load("gpus: 4\nsequence_parallel_size: 2\n");
  EXPECT_EQ(config.parallel.sequence_parallel_size, 2);
  config = load("gpus: 8\nsequence_parallel_size: 2\npipeline_parallel_size: 2\n");
  EXPECT_EQ(config.parallel.sequence_parallel_size, 2);
  EXPECT_EQ(config.parallel.pipeline_parallel_size, 2);
  config = load("gpus: 4\npipeline_parallel_size: 2\npipeline_stage_layers: [10, 14]\n");
  EXPECT_EQ(config.parallel.pipeline_stage_layers, (std::vector<int64_t>{10, 14}));
  EXPECT_EQ(load("", {"--pipeline_stage_layers=[3, 5]", "--pipeline_parallel_size=2"}).parallel.pipeline_stage_layers,
            (std::vector<int64_t>{3, 5}));
  std::string message = load_error(std::string(kMinimalConfig) + "pipeline_parallel_size: 2\npipeline_stage_layers: [1, 2, 3]\n");
  EXPECT_TRUE(contains(message, "pipeline_stage_layers' lists 3 stages, but pipeline_parallel_size is 2")) << message;
  message = load_error(std::string(kMinimalConfig) + "pipeline_parallel_size: 2\npipeline_stage_layers: [4, 0]\n");
  EXPECT_TRUE(contains(message, "gives a stage 0 layers")) << message;
  message = load_error(std::string(kMinimalConfig) + "sequence_parallel_size: 2\nrecipe: fp8_hybrid\n");
  EXPECT_TRUE(contains(message, "'sequence_parallel_size' cannot be combined with recipe: fp8_hybrid")) << message;
  // ZeRO-3 shards the weights over data × sequence ranks; pipeline stages are refused with it.
  config = load("gpus: 4\nsequence_parallel_size: 2\nzero_level: 3\n");
  EXPECT_EQ(config.parallel.sequence_parallel_size, 2);
  EXPECT_EQ(config.parallel.zero_level, 3);
  EXPECT_TRUE(load("gpus: 2\nsequence_parallel_size: 2\nshard_weights: true\n").parallel.shard_weights);
  message = load_error(std::string(kMinimalConfig) + "pipeline_parallel_size: 2\nshard_weights: true\n");
  EXPECT_TRUE(contains(message, "'pipeline_parallel_size' cannot be combined with shard_weights")) << message;
  message = load_error(std::string(kMinimalConfig) + "pipeline_parallel_size: 2\nzero_level: 3\n");
  EXPECT_TRUE(contains(message, "'pipeline_parallel_size' cannot be combined with zero_level: 3")) << message;
  message = load_error(std::string(kMinimalConfig) + "pipeline_parallel_size: 0\n");
  EXPECT_TRUE(contains(message, "'pipeline_parallel_size' must be at least 1")) << message;
  message = load_error(std::string(kMinimalConfig) + "pipeline_stage_layers: [a]\n");
  EXPECT_TRUE(contains(message, "pipeline_stage_layers' expects an integer")) << message;
}

TEST(ConfigRules, MasterAndGradientDtypesBf16AndFp32AreAcceptedFp8NeedsTheFp8Recipe) {
  // bf16 and fp32 load (the backend decides: the CUDA trainer honours them, the CPU backend
  // refuses bf16 by name, train/device/backend_selection.h); the fp8 gradient dtypes are the
  // fp8_hybrid recipe's backward formats, an error naming gradient_dtype without it.
  Config config = load("master_dtype: bf16\ngradient_dtype: bf16\n");
  EXPECT_EQ(config.precision.master_dtype, MasterDtype::Bf16);
  EXPECT_EQ(config.precision.gradient_dtype, GradientDtype::Bf16);
  config = load("master_dtype: fp32\ngradient_dtype: fp32\n");
  EXPECT_EQ(config.precision.master_dtype, MasterDtype::Fp32);
  EXPECT_EQ(config.precision.gradient_dtype, GradientDtype::Fp32);
  for (const char* fp8 : {"fp8_e4m3", "fp8_e5m2"}) {
    std::string message = load_error(std::string(kMinimalConfig) + "gradient_dtype: " + fp8 + "\n");
    EXPECT_TRUE(contains(message, "gradient_dtype") && contains(message, "set recipe: fp8_hybrid")) << message;
    config = load(std::string("recipe: fp8_hybrid\nlora: true\ngradient_dtype: ") + fp8 + "\n");
    EXPECT_EQ(config.precision.recipe, Recipe::Fp8Hybrid);
  }
}

// lora_dtype: bf16 = the adapters' masters and gradient accumulators in bf16 (the CUDA trainer's
// master_dtype / gradient_dtype bf16); contradicting or meaningless combinations name lora_dtype.
TEST(ConfigRules, LoraDtypeBf16KeepsTheAdaptersMastersAndGradientsInBf16) {
  Config config = load("lora: true\nlora_dtype: bf16\n");
  EXPECT_EQ(config.precision.master_dtype, MasterDtype::Bf16);
  EXPECT_EQ(config.precision.gradient_dtype, GradientDtype::Bf16);
  EXPECT_TRUE(contains(config.sources.of("master_dtype"), "config.yaml:6 (lora_dtype: bf16 ⇒ master_dtype: bf16)"))
      << config.sources.of("master_dtype");
  EXPECT_NE(
      std::find(config.sources.notes.begin(), config.sources.notes.end(), "lora_dtype: bf16 ⇒ gradient_dtype: bf16"),
      config.sources.notes.end());
  config = load("lora: true\nlora_dtype: bf16\nmaster_dtype: bf16\ngradient_dtype: bf16\n");
  EXPECT_EQ(config.precision.master_dtype, MasterDtype::Bf16);
  EXPECT_FALSE(load("lora: true\n").precision.master_dtype.has_value());  // fp32, the default, implies nothing
  for (const char* conflict : {"master_dtype: fp32\n", "gradient_dtype: fp32\n", "recipe: fp8_hybrid\n"}) {
    std::string message = load_error(std::string(kMinimalConfig) + "lora: true\nlora_dtype: bf16\n" + conflict);
    EXPECT_TRUE(contains(message, "'lora_dtype'") || contains(message, "lora_dtype:")) << conflict << message;
  }
  std::string message = load_error(std::string(kMinimalConfig) + "lora: false\nlora_dtype: bf16\n");
  EXPECT_TRUE(contains(message, "lora_dtype") && contains(message, "lora: false")) << message;
}

TEST(ConfigRules, RestartAndLossScaleOptionsAreChecked) {
  Config config = load("max_restarts: 3\nmax_nonfinite_steps: 0\n");
  EXPECT_EQ(config.run.max_restarts, 3);
  EXPECT_EQ(config.run.max_nonfinite_steps, 0);
  EXPECT_EQ(load("").run.max_nonfinite_steps, 1);
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "max_restarts: -1\n"), "max_restarts"));
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "max_nonfinite_steps: -2\n"), "max_nonfinite_steps"));
  std::string message = load_error(std::string(kMinimalConfig) + "torch_dtype: bfloat16\nfp16_loss_scale: 1024\n");
  EXPECT_TRUE(contains(message, "fp16_loss_scale") && contains(message, "torch_dtype: float16")) << message;
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "fp16_loss_scale: 0.5\n"), "at least 1"));
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "fp16_loss_scale_window: 0\n"), "fp16_loss_scale_window"));
}

TEST(ConfigRules, OffloadOptionsLoadAndTheirCombinationsAreChecked) {
  // The three offloads load (the CUDA device honours them; the CPU backend refuses them by name,
  // train/device/backend_selection.h); staging is the default, zero-copy on request.
  Config config = load("offload_master: true\noffload_optimizer: true\noffload_grads: true\n");
  EXPECT_TRUE(config.offload.offload_master && config.offload.offload_optimizer && config.offload.offload_grads);
  EXPECT_FALSE(config.offload.use_zero_copy);
  EXPECT_TRUE(
      load("offload_optimizer: true\nuse_zero_copy: true\nuse_write_combined: true\n").offload.use_write_combined);
  // use_zero_copy / use_write_combined alone modify nothing.
  for (const char* key : {"use_zero_copy", "use_write_combined"}) {
    std::string message = load_error(std::string(kMinimalConfig) + key + ": true\n");
    EXPECT_TRUE(contains(message, std::string("'") + key + "'") && contains(message, "offload_optimizer")) << message;
  }
  // offload_master has no master to move with bf16 masters.
  std::string message = load_error(std::string(kMinimalConfig) + "offload_master: true\nmaster_dtype: bf16\n");
  EXPECT_TRUE(contains(message, "'offload_master'") && contains(message, "master_dtype: bf16")) << message;
  // The staged step (use_zero_copy off) runs adamw and adamw_8bit with fp32 masters; NorMuon and
  // bf16 masters are told to use zero-copy, which takes them.
  message = load_error(std::string(kMinimalConfig) + "offload_optimizer: true\noptimizer: normuon\n");
  EXPECT_TRUE(contains(message, "'offload_optimizer'") && contains(message, "use_zero_copy: true")) << message;
  message = load_error(std::string(kMinimalConfig) + "offload_optimizer: true\nmaster_dtype: bf16\n");
  EXPECT_TRUE(contains(message, "'offload_optimizer'") && contains(message, "use_zero_copy: true")) << message;
  EXPECT_NO_THROW(load("offload_optimizer: true\noptimizer: normuon\nuse_zero_copy: true\n"));
  EXPECT_NO_THROW(load("offload_optimizer: true\nmaster_dtype: bf16\nuse_zero_copy: true\n"));
  EXPECT_NO_THROW(load("offload_grads: true\noptimizer: normuon\n"));  // gradients are never staged
}

TEST(ConfigRules, Fp8HybridCombinesWithEveryTrainingModeAndFusedRopeIsAccepted) {
  // fp8_hybrid runs LoRA, QLoRA, full fine-tuning, pt and data parallelism (models/fp8_recipe.h);
  // use_fused_rope is implemented on both backends.
  for (const char* mode : {"lora: true\n", "lora: false\n", "lora: true\nqlora_bnb: true\n",
                           "lora: true\nqlora_fp8: true\n", "lora: false\ngpus: 2\n"}) {
    EXPECT_EQ(load(std::string("recipe: fp8_hybrid\n") + mode).precision.recipe, Recipe::Fp8Hybrid) << mode;
  }
  EXPECT_TRUE(load("use_fused_rope: true\n").kernels.use_fused_rope);
}

TEST(ConfigRules, CudaDebugAndGraphOptionsAreAccepted) {
  // Implemented on the CUDA trainer; the CPU backend refuses debug_time_breakdown once the backend
  // is known (a Device row of src/config/feature_support.cpp).
  Config config = load("debug_time_breakdown: true\n");
  EXPECT_TRUE(config.logging.debug_time_breakdown);
  EXPECT_TRUE(load("").kernels.use_cuda_graphs);
  EXPECT_FALSE(load("use_cuda_graphs: false\n").kernels.use_cuda_graphs);
}

// Sequence parallelism's all-to-alls run inside the plan: its micro-batches run without a graph.
TEST(ConfigRules, SequenceParallelismTurnsCudaGraphsOff) {
  Config config = load("gpus: 2\nsequence_parallel_size: 2\n");
  EXPECT_FALSE(config.kernels.use_cuda_graphs);
  EXPECT_NE(std::find(config.sources.notes.begin(), config.sources.notes.end(),
                      "sequence_parallel_size > 1 ⇒ use_cuda_graphs: false"),
            config.sources.notes.end());
  EXPECT_TRUE(load("gpus: 2\n").kernels.use_cuda_graphs);
}

}  // namespace
}  // namespace surogate

namespace surogate {
namespace {

// The `loss` mapping of surogate dpo: TRL's defaults, a set value, each refusal naming the key.
TEST(ConfigRules, PreferenceLossOptions) {
  const Config defaults = load_config_from_string(testing_util::kMinimalConfig, "config.yaml");
  EXPECT_EQ(defaults.loss.type, "dpo");
  EXPECT_DOUBLE_EQ(defaults.loss.dpo_beta, 0.1);
  EXPECT_DOUBLE_EQ(defaults.loss.simpo_gamma, 0.5);
  EXPECT_DOUBLE_EQ(defaults.loss.beta, 0.1);
  EXPECT_FALSE(defaults.loss.preference);  // set by `surogate dpo`, not an option
  const Config set = load_config_from_string(std::string(testing_util::kMinimalConfig) +
                                                 "loss:\n  type: orpo\n  beta: 0.25\n  label_smoothing: 0.1\n",
                                             "config.yaml", {"--loss.dpo_beta=0.3"});
  EXPECT_EQ(set.loss.type, "orpo");
  EXPECT_DOUBLE_EQ(set.loss.beta, 0.25);
  EXPECT_DOUBLE_EQ(set.loss.label_smoothing, 0.1);
  EXPECT_DOUBLE_EQ(set.loss.dpo_beta, 0.3);
  const std::string minimal = testing_util::kMinimalConfig;
  EXPECT_TRUE(testing_util::contains(testing_util::load_error(minimal + "loss:\n  type: hinge\n"),
                                     "config.yaml:6: option 'loss.type' must be dpo, ipo, simpo, orpo or kto (got 'hinge')"));
  EXPECT_TRUE(testing_util::contains(testing_util::load_error(minimal + "loss:\n  dpo_beta: 0\n"),
                                     "option 'loss.dpo_beta' must be positive"));
  EXPECT_TRUE(testing_util::contains(testing_util::load_error(minimal + "loss:\n  label_smoothing: 0.5\n"),
                                     "option 'loss.label_smoothing' must be in [0, 0.5)"));
  EXPECT_TRUE(testing_util::contains(testing_util::load_error(minimal + "loss:\n  betta: 0.2\n"), "loss.betta"));
  EXPECT_TRUE(testing_util::contains(testing_util::load_error(minimal + "loss: 3\n"), "a mapping"));
}

}  // namespace
}  // namespace surogate
