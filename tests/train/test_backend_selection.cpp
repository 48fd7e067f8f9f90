// Which backend training runs on (train/device/backend_selection.h), for every kind of machine,
// without needing one: CPU fallback with a reason, CUDA with the bf16 recipe, and the clear
// errors for what the CUDA trainer does not have yet (more GPUs than visible, bf16 masters on
// several GPUs, other recipes, fp8 gradients), data-parallel GPUs and CPU ranks,
// and master_dtype / gradient_dtype bf16: honoured on CUDA, refused by name on the CPU backend;
// torch_dtype: float16 on CUDA for the dense one-GPU path, every other combination refused by name.
#include <gtest/gtest.h>


#include <string>

#include "config/config.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "train/device/backend_selection.h"

namespace surogate::train {
namespace {

MachineOffer cpu_build() { return {false, 0, "", "no CUDA backend"}; }
MachineOffer no_gpu() { return {true, 0, "", "no CUDA device is visible"}; }
MachineOffer gpus(int count, int sm = 90) { return {true, count, "NVIDIA H100 80GB HBM3", "ok", 0, sm}; }

std::string error_of(const Config& config, const MachineOffer& machine) {
  try {
    choose_training_backend(config, machine);
  } catch (const UserError& error) {
    return error.what();
  }
  return "";
}

TEST(BackendSelection, CpuBuildOrNoGpuTrainsOnTheCpuAndSaysWhy) {
  Config config;
  BackendChoice choice = choose_training_backend(config, cpu_build());
  EXPECT_EQ(choice.backend, TrainingBackend::Cpu);
  EXPECT_NE(choice.message.find("built without CUDA"), std::string::npos) << choice.message;
  EXPECT_NE(choice.message.find("CPU backend (fp32)"), std::string::npos) << choice.message;
  choice = choose_training_backend(config, no_gpu());
  EXPECT_EQ(choice.backend, TrainingBackend::Cpu);
  EXPECT_NE(choice.message.find("no CUDA device is visible"), std::string::npos) << choice.message;
  config.optimizer.algorithm = Optimizer::NorMuon;
  EXPECT_EQ(choose_training_backend(config, no_gpu()).backend, TrainingBackend::Cpu);
}

TEST(BackendSelection, AGpuWithoutBf16TensorCoresTrainsOnTheCpuAndSaysWhy) {
  Config config;
  MachineOffer turing = gpus(1, 75);
  turing.gpu_name = "Tesla T4";
  const BackendChoice choice = choose_training_backend(config, turing);
  EXPECT_EQ(choice.backend, TrainingBackend::Cpu);
  EXPECT_NE(choice.message.find("Tesla T4, SM75"), std::string::npos) << choice.message;
  EXPECT_NE(choice.message.find("SM80+"), std::string::npos) << choice.message;
  EXPECT_EQ(choose_training_backend(config, gpus(1, 80)).backend, TrainingBackend::Cuda);
  EXPECT_EQ(choose_training_backend(config, gpus(1, 0)).backend, TrainingBackend::Cuda);  // SM unknown: not checked
}

TEST(BackendSelection, OneVisibleGpuTrainsOnCudaWithTheBf16Recipe) {
  Config config;  // gpus: 1, recipe: bf16 (the defaults); the default optimizer is adamw_8bit
  config.optimizer.algorithm = Optimizer::AdamW;
  BackendChoice choice = choose_training_backend(config, gpus(1));
  EXPECT_EQ(choice.backend, TrainingBackend::Cuda);
  EXPECT_NE(choice.message.find("NVIDIA H100"), std::string::npos) << choice.message;
  EXPECT_NE(choice.message.find("bf16"), std::string::npos) << choice.message;
  config.parallel.gpus = 0;  // all visible GPUs: one
  EXPECT_EQ(choose_training_backend(config, gpus(1)).backend, TrainingBackend::Cuda);
  config.precision.master_dtype = MasterDtype::Fp32;
  config.precision.gradient_dtype = GradientDtype::Fp32;
  EXPECT_EQ(choose_training_backend(config, gpus(1)).backend, TrainingBackend::Cuda);
}

TEST(BackendSelection, EveryOptimizerTrainsOnCudaAndTheMessageNamesIt) {
  for (Optimizer optimizer : {Optimizer::AdamW, Optimizer::AdamW8bit, Optimizer::NorMuon}) {
    Config config;
    config.optimizer.algorithm = optimizer;
    BackendChoice choice = choose_training_backend(config, gpus(1));
    EXPECT_EQ(choice.backend, TrainingBackend::Cuda) << to_string(optimizer);
    EXPECT_NE(choice.message.find(std::string(to_string(optimizer)) + " state"), std::string::npos) << choice.message;
  }
}

TEST(BackendSelection, SeveralGpusAreDataParallelGpusAndTheirLimitsNameTheOption) {
  Config config;
  config.optimizer.algorithm = Optimizer::AdamW;
  config.parallel.gpus = 2;
  BackendChoice choice = choose_training_backend(config, gpus(2));
  EXPECT_EQ(choice.backend, TrainingBackend::Cuda);
  EXPECT_NE(choice.message.find("gpus: 2 runs 2 data-parallel ranks, ZeRO-1"), std::string::npos) << choice.message;
  EXPECT_NE(choice.message.find("GPUs 0-1"), std::string::npos) << choice.message;
  EXPECT_NE(choice.message.find("NCCL"), std::string::npos) << choice.message;
  config.parallel.shard_gradients = true;  // zero_level: 2 implies it
  EXPECT_NE(choose_training_backend(config, gpus(2)).message.find("ZeRO-2"), std::string::npos);
  config.parallel.shard_gradients = false;
  // More GPUs than visible: an error naming gpus and what is visible.
  const std::string too_many = error_of(config, gpus(1));
  EXPECT_NE(too_many.find("gpus: 2 asks for 2 GPUs, but 1 is visible"), std::string::npos) << too_many;
  // gpus: 0 is every visible GPU.
  config.parallel.gpus = 0;
  choice = choose_training_backend(config, gpus(4));
  EXPECT_NE(choice.message.find("4 data-parallel ranks"), std::string::npos) << choice.message;
  EXPECT_EQ(choose_training_backend(config, gpus(1)).message.find("data-parallel"), std::string::npos);
  EXPECT_EQ(choose_training_backend(config, no_gpu()).backend, TrainingBackend::Cpu);
  // bf16 masters are one GPU's only.
  config.precision.master_dtype = MasterDtype::Bf16;
  const std::string bf16 = error_of(config, gpus(2));
  EXPECT_NE(bf16.find("master_dtype: bf16 is implemented on one GPU only"), std::string::npos) << bf16;
  EXPECT_EQ(choose_training_backend(config, gpus(1)).backend, TrainingBackend::Cuda);
}

// lora_dtype: bf16 is master_dtype and gradient_dtype bf16 for the adapters: trained on CUDA, and
// refused by the CPU backend (the fp32 reference) with an error that names lora_dtype.
TEST(BackendSelection, LoraDtypeBf16TrainsOnCudaAndTheCpuBackendRefusesItByName) {
  Config config = load_config_from_string("model: m\ndatasets:\n  - {path: d.jsonl, type: text}\nlora: true\n"
                                          "lora_dtype: bf16\n",
                                          "config.yaml");
  EXPECT_EQ(choose_training_backend(config, gpus(1)).backend, TrainingBackend::Cuda);
  const std::string message = error_of(config, no_gpu());
  EXPECT_NE(message.find("config.yaml:5 (lora_dtype: bf16 ⇒ master_dtype: bf16)"), std::string::npos) << message;
  EXPECT_NE(message.find("CPU backend"), std::string::npos) << message;
}

TEST(BackendSelection, GpusOnTheCpuBackendAreDataParallelCpuRanks) {
  Config config;
  config.optimizer.algorithm = Optimizer::AdamW;
  config.parallel.gpus = 3;
  BackendChoice choice = choose_training_backend(config, no_gpu());
  EXPECT_EQ(choice.backend, TrainingBackend::Cpu);
  EXPECT_NE(choice.message.find("gpus: 3 runs 3 data-parallel ranks, ZeRO-1"), std::string::npos) << choice.message;
  config.parallel.shard_gradients = true;  // zero_level: 2 implies it
  EXPECT_NE(choose_training_backend(config, no_gpu()).message.find("3 data-parallel ranks, ZeRO-2"), std::string::npos);
  config.parallel.gpus = 1;  // one GPU: ZeRO-2 has nothing to shard, the run is the single-GPU one
  EXPECT_EQ(choose_training_backend(config, gpus(1)).message.find("data-parallel"), std::string::npos);
  config.parallel.shard_gradients = false;
  config.parallel.gpus = 0;  // every visible GPU: none, so one rank
  EXPECT_EQ(choose_training_backend(config, no_gpu()).message.find("data-parallel"), std::string::npos);
}

// Validated on two GPUs (2026-11-27): both layouts train on the CUDA backend, and on CPU ranks without GPUs.
TEST(BackendSelection, SequenceAndPipelineParallelGpusTrainOnCuda) {
  Config config;
  config.parallel.gpus = 4;
  config.parallel.sequence_parallel_size = 2;
  BackendChoice choice = choose_training_backend(config, gpus(4));
  EXPECT_EQ(choice.backend, TrainingBackend::Cuda);
  EXPECT_NE(choice.message.find("4 ranks (2 data-parallel × 2 sequence-parallel)"), std::string::npos) << choice.message;
  config.parallel.sequence_parallel_size = 1;
  config.parallel.pipeline_parallel_size = 2;
  choice = choose_training_backend(config, gpus(4));
  EXPECT_EQ(choice.backend, TrainingBackend::Cuda);
  EXPECT_NE(choice.message.find("4 ranks (2 data-parallel × 2 pipeline stages)"), std::string::npos) << choice.message;
  choice = choose_training_backend(config, no_gpu());
  EXPECT_EQ(choice.backend, TrainingBackend::Cpu);
  EXPECT_NE(choice.message.find("4 ranks (2 data-parallel × 2 pipeline stages)"), std::string::npos) << choice.message;
}

// 3D parallelism runs on GPUs and on CPU ranks (the pipeline stage strategy is one for both,
// train/device/parallel/stage_ranks.h).
TEST(BackendSelection, SequenceTimesPipelineRunsOnGpusAndOnCpuRanks) {
  Config config;
  config.parallel.gpus = 4;
  config.parallel.sequence_parallel_size = 2;
  config.parallel.pipeline_parallel_size = 2;
  BackendChoice choice = choose_training_backend(config, gpus(4));
  EXPECT_EQ(choice.backend, TrainingBackend::Cuda);
  EXPECT_NE(choice.message.find("4 ranks (2 sequence-parallel × 2 pipeline stages)"), std::string::npos) << choice.message;
  choice = choose_training_backend(config, no_gpu());
  EXPECT_EQ(choice.backend, TrainingBackend::Cpu);
  EXPECT_NE(choice.message.find("4 ranks (2 sequence-parallel × 2 pipeline stages)"), std::string::npos) << choice.message;
}

TEST(BackendSelection, WhatTheCudaTrainerLacksIsAClearErrorNamingTheOption) {
  Config config;
  config.optimizer.algorithm = Optimizer::AdamW;
  config.precision.recipe = Recipe::Nvfp4;
  EXPECT_NE(error_of(config, gpus(1, 100)).find("recipe: nvfp4 is not implemented yet"), std::string::npos)
      << error_of(config, gpus(1, 100));
}

TEST(BackendSelection, Fp8HybridNeedsSm89AndTheMessageSaysSo) {
  Config config;
  config.lora.enabled = true;
  config.precision.recipe = Recipe::Fp8Hybrid;
  config.precision.gradient_dtype = GradientDtype::Fp8E4M3;
  const BackendChoice choice = choose_training_backend(config, gpus(1, 90));
  EXPECT_EQ(choice.backend, TrainingBackend::Cuda);
  EXPECT_NE(choice.message.find("fp8_hybrid recipe"), std::string::npos) << choice.message;
  EXPECT_NE(error_of(config, gpus(1, 80)).find("'recipe' needs a GPU of compute capability SM89+"), std::string::npos)
      << error_of(config, gpus(1, 80));
  // The CPU backend emulates the recipe, E4M3 gradients included.
  EXPECT_EQ(choose_training_backend(config, gpus(0)).backend, TrainingBackend::Cpu);
}

TEST(BackendSelection, QloraFp8NeedsSm89) {
  Config config;
  config.lora.enabled = true;
  config.quant.qlora_fp8 = true;
  EXPECT_EQ(choose_training_backend(config, gpus(1, 89)).backend, TrainingBackend::Cuda);
  EXPECT_EQ(choose_training_backend(config, gpus(1, 90)).backend, TrainingBackend::Cuda);
  const std::string message = error_of(config, gpus(1, 80));
  EXPECT_NE(message.find("'qlora_fp8' needs a GPU of compute capability SM89+"), std::string::npos) << message;
  EXPECT_NE(message.find("SM80"), std::string::npos) << message;
  // The CPU backend emulates it exactly: no GPU, no requirement.
  EXPECT_EQ(choose_training_backend(config, gpus(0)).backend, TrainingBackend::Cpu);
}

TEST(BackendSelection, Bf16MasterAndGradientsTrainOnCudaAndTheMessageSaysSo) {
  Config config;
  config.optimizer.algorithm = Optimizer::AdamW;
  config.precision.master_dtype = MasterDtype::Bf16;
  BackendChoice choice = choose_training_backend(config, gpus(1));
  EXPECT_EQ(choice.backend, TrainingBackend::Cuda);
  EXPECT_NE(choice.message.find("bf16 master weights (stochastic rounding"), std::string::npos) << choice.message;
  EXPECT_NE(choice.message.find("fp32 gradient accumulation"), std::string::npos) << choice.message;
  config.precision.master_dtype.reset();
  config.precision.gradient_dtype = GradientDtype::Bf16;
  choice = choose_training_backend(config, gpus(1));
  EXPECT_EQ(choice.backend, TrainingBackend::Cuda);
  EXPECT_NE(choice.message.find("fp32 master weights"), std::string::npos) << choice.message;
  EXPECT_NE(choice.message.find("bf16 gradient accumulation"), std::string::npos) << choice.message;
}

TEST(BackendSelection, Bf16MasterOrGradientsOnTheCpuBackendIsAnErrorNamingTheOption) {
  Config config;
  config.precision.master_dtype = MasterDtype::Bf16;
  for (const MachineOffer& machine : {cpu_build(), no_gpu()}) {
    const std::string message = error_of(config, machine);
    EXPECT_NE(message.find("master_dtype: bf16"), std::string::npos) << message;
    EXPECT_NE(message.find("implemented on the CUDA backend only"), std::string::npos) << message;
  }
  config.precision.master_dtype = MasterDtype::Fp32;
  config.precision.gradient_dtype = GradientDtype::Bf16;
  const std::string message = error_of(config, no_gpu());
  EXPECT_NE(message.find("gradient_dtype: bf16"), std::string::npos) << message;
  EXPECT_NE(message.find("implemented on the CUDA backend only"), std::string::npos) << message;
  config.precision.gradient_dtype = GradientDtype::Fp32;
  EXPECT_EQ(choose_training_backend(config, no_gpu()).backend, TrainingBackend::Cpu);
  EXPECT_NO_THROW(check_cpu_backend_options(config));
}

}  // namespace
}  // namespace surogate::train

namespace surogate::train {
namespace {

TEST(BackendSelection, OffloadingIsForTheCudaBackendAndMastersAndGradientsForOneGpu) {
  for (bool config::Offload::*option :
       {&config::Offload::offload_master, &config::Offload::offload_optimizer, &config::Offload::offload_grads}) {
    Config config;
    config.offload.*option = true;
    // On one GPU every offload trains on CUDA.
    EXPECT_EQ(choose_training_backend(config, gpus(1)).backend, TrainingBackend::Cuda);
    // The CPU backend refuses each by name.
    for (const MachineOffer& machine : {cpu_build(), no_gpu()}) {
      const std::string message = error_of(config, machine);
      EXPECT_NE(message.find("applies to the CUDA backend only"), std::string::npos) << message;
    }
    // Several GPUs: the optimizer state offloads per rank; masters and gradients are refused.
    config.parallel.gpus = 2;
    if (option == &config::Offload::offload_optimizer) {
      EXPECT_EQ(choose_training_backend(config, gpus(2)).backend, TrainingBackend::Cuda);
    } else {
      const std::string message = error_of(config, gpus(2));
      EXPECT_NE(message.find("implemented on one GPU only"), std::string::npos) << message;
      EXPECT_NE(message.find("offload_optimizer works with several GPUs"), std::string::npos) << message;
    }
  }
}

TEST(BackendSelection, Fp16TrainsOnOneGpuAndRefusesWhatItsCudaPathLacksByName) {
  Config config;
  config.model.torch_dtype = TorchDtype::Float16;
  for (Optimizer optimizer : {Optimizer::AdamW, Optimizer::AdamW8bit}) {
    config.optimizer.algorithm = optimizer;
    const BackendChoice choice = choose_training_backend(config, gpus(1));
    EXPECT_EQ(choice.backend, TrainingBackend::Cuda);
    EXPECT_NE(choice.message.find("fp16 weights and activations with dynamic loss scaling"), std::string::npos)
        << choice.message;
  }
  // No GPU: the CPU emulation, as before.
  EXPECT_NE(choose_training_backend(config, no_gpu()).message.find("fp16 emulated in fp32"), std::string::npos);
  auto refused = [&](auto&& change, const std::string& option) {
    Config changed = config;
    change(changed);
    const std::string error = error_of(changed, gpus(4));
    EXPECT_NE(error.find("torch_dtype: float16 with " + option), std::string::npos) << error;
    EXPECT_NE(error.find("bfloat16"), std::string::npos) << error;
  };
  refused([](Config& c) { c.parallel.gpus = 2; }, "gpus: 2");
  refused([](Config& c) { c.precision.master_dtype = MasterDtype::Bf16; }, "master_dtype: bf16");
  refused([](Config& c) { c.precision.gradient_dtype = GradientDtype::Bf16; }, "gradient_dtype: bf16");
  refused([](Config& c) { c.optimizer.algorithm = Optimizer::NorMuon; }, "optimizer: normuon");
  refused([](Config& c) { c.offload.offload_master = true; }, "offload_master: true");
  refused([](Config& c) { c.offload.offload_optimizer = true; }, "offload_optimizer: true");
  refused([](Config& c) { c.offload.offload_residual = true; }, "offload_residual: true");
  refused([](Config& c) { c.lora.enabled = true; c.quant.qlora_bnb = true; }, "qlora_bnb: true");
  refused([](Config& c) { c.lora.enabled = true; c.quant.qlora_fp8 = true; }, "qlora_fp8: true");
  // A mixture-of-experts model, once its config is read (before the weights load).
  io::ModelConfig model;
  model.architecture = io::Architecture::Qwen3Moe;
  model.moe = io::MoeConfig{};
  try {
    check_fp16_cuda_model(config, model);
    ADD_FAILURE() << "a MoE model with torch_dtype: float16 on CUDA is refused";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("mixture-of-experts"), std::string::npos) << error.what();
  }
  model.moe.reset();
  check_fp16_cuda_model(config, model);  // dense: fine
}

}  // namespace
}  // namespace surogate::train
