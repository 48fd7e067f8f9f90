// ZeRO-3's quantized base on CPU ranks (train/device/quantized_base_shards.h): shard_weights alone
// shares the quantized pieces out over the ranks and gathers a layer's bytes before use;
// persistent_quants keeps them whole on every rank; offload_quants keeps one host image per
// process and copies a layer's pieces from it. The same bytes are read in every mode, so 3 ZeRO-3
// ranks give the same per-step losses, eval loss and adapter weights bit for bit in all three, and
// match one rank (the same global batch) within data parallelism's stated tolerances (2e-4
// relative loss, 5e-5 absolute weight: tests/train/test_data_parallel.cpp). offload_quants on one
// rank (the ZeRO-3 device as a world of one) equals the plain one-rank device bit for bit. The
// memory estimate (what --dry-run prints) follows each mode: a rank's share of the quantized base
// falls about N-fold over N ranks, persistent_quants keeps all of it, and offload_quants none on
// the device and all of it in the host image.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "train/device/backend_selection.h"
#include "train/memory_prediction.h"
#include "cpu_ranks_fixture.h"

namespace surogate::train {
namespace {

constexpr double kRelativeTolerance = 2e-4;
constexpr double kWeightTolerance = 5e-5;

class QuantizedBaseShardsTest : public CpuRanksFixture {
protected:
  static TrainerOptions cpu() {
    TrainerOptions options = CpuRanksFixture::cpu();
    options.gradient_bucket_bytes = 4096;
    return options;
  }
  // One rank with accumulation 6, then 3 ZeRO-3 ranks with accumulation 2 in each mode.
  // `weights_against_one_rank`: false under fp8_hybrid, where a last-bit difference of a gradient can
  // move a weight's E4M3 code (test_data_parallel.cpp compares its losses only, as here).
  static void expect_modes_agree(const std::string& tag, const std::string& job, bool weights_against_one_rank = true) {
    const std::string steps = "max_steps: 4\nsave_steps: 4\n";
    TrainingResult one = run_training(config(tag + "_1", job + steps + "gradient_accumulation_steps: 6\n"), cpu());
    const std::string three = job + steps + "gpus: 3\nzero_level: 3\ngradient_accumulation_steps: 2\n";
    const std::map<std::string, std::string> modes = {
        {"sharded", ""}, {"persistent", "persistent_quants: true\n"},
        {"offloaded", "persistent_quants: true\noffload_quants: true\n"}};
    std::map<std::string, TrainingResult> results;
    for (const auto& [mode, lines] : modes) {
      results[mode] = run_training(config(tag + "_3_" + mode, three + lines), cpu());
    }
    const TrainingResult& sharded = results.at("sharded");
    ASSERT_EQ(sharded.step_losses.size(), one.step_losses.size());
    for (size_t i = 0; i < one.step_losses.size(); ++i) {
      EXPECT_NEAR(sharded.step_losses[i], one.step_losses[i], kRelativeTolerance * std::fabs(one.step_losses[i]))
          << tag << " step " << i + 1;
    }
    EXPECT_LT(sharded.step_losses.back(), sharded.step_losses.front()) << tag;
    const fs::path adapter = "adapter_model.safetensors";
    if (weights_against_one_rank) {
      EXPECT_LT(largest_f32_difference(root_ / (tag + "_1") / adapter, root_ / (tag + "_3_sharded") / adapter),
                kWeightTolerance);
    }
    for (const std::string mode : {"persistent", "offloaded"}) {
      SCOPED_TRACE(tag + " " + mode);
      const TrainingResult& result = results.at(mode);
      EXPECT_EQ(result.step_losses, sharded.step_losses);
      ASSERT_TRUE(result.eval_loss && sharded.eval_loss);
      EXPECT_EQ(*result.eval_loss, *sharded.eval_loss);
      expect_same_tensors(root_ / (tag + "_3_sharded") / adapter, root_ / (tag + "_3_" + mode) / adapter);
      expect_same_tensors(root_ / (tag + "_3_sharded") / "checkpoint-4" / "optimizer.safetensors",
                          root_ / (tag + "_3_" + mode) / "checkpoint-4" / "optimizer.safetensors");
    }
  }
};

const std::string kLora = "lora: true\nlora_rank: 4\nlora_dropout: 0.0\nlearning_rate: 1e-2\n"
                          "per_device_train_batch_size: 2\n";

TEST_F(QuantizedBaseShardsTest, QloraNf4RanksAgreeBitForBitInEveryMode) {
  expect_modes_agree("nf4", kLora + "qlora_bnb: true\n");
}

TEST_F(QuantizedBaseShardsTest, QloraFp8BlocksRanksAgreeBitForBitInEveryMode) {
  expect_modes_agree("fp8b", kLora + "qlora_fp8: true\n");
}

// fp8_hybrid with LoRA: the frozen base's FP8 copies (codes, transposed codes, scale) are the pieces.
TEST_F(QuantizedBaseShardsTest, Fp8HybridLoraRanksAgreeBitForBitInEveryMode) {
  expect_modes_agree("fp8h", kLora + "recipe: fp8_hybrid\n", false);
}

TEST_F(QuantizedBaseShardsTest, OffloadQuantsOnOneRankEqualsThePlainDevice) {
  const std::string job = kLora + "qlora_bnb: true\nmax_steps: 4\nsave_steps: 4\ngradient_accumulation_steps: 2\n";
  TrainingResult plain = run_training(config("one_plain", job), cpu());
  TrainingResult offloaded = run_training(
      config("one_offloaded", job + "zero_level: 3\npersistent_quants: true\noffload_quants: true\n"), cpu());
  EXPECT_EQ(offloaded.step_losses, plain.step_losses);
  ASSERT_TRUE(plain.eval_loss && offloaded.eval_loss);
  EXPECT_EQ(*offloaded.eval_loss, *plain.eval_loss);
  expect_same_tensors(root_ / "one_plain" / "adapter_model.safetensors",
                      root_ / "one_offloaded" / "adapter_model.safetensors");
}

// The per-GPU prediction (a GPU of 80 GiB, 4 GPUs) of each mode; bytes by category.
std::map<std::string, size_t> predicted(const Config& config) {
  const MemoryPrediction prediction = predict_training_memory(config, size_t{80} << 30);
  std::map<std::string, size_t> bytes;
  size_t sum = 0;
  for (const auto& [name, value] : prediction.categories) {
    bytes[name] = value;
    sum += value;
  }
  EXPECT_EQ(sum, prediction.total_bytes);
  bytes["pinned host memory"] = prediction.host_offloaded_bytes;
  bytes["peak"] = prediction.total_bytes;
  return bytes;
}

TEST_F(QuantizedBaseShardsTest, TheMemoryEstimateFollowsEachMode) {
  const std::string job = kLora + "qlora_bnb: true\n";
  const std::string world = "gpus: 4\nzero_level: 3\n";
  auto sharded = predicted(config("memory_sharded", job + world));
  auto whole = predicted(config("memory_whole", job + world + "persistent_quants: true\n"));
  auto offloaded = predicted(config("memory_offloaded", job + world + "persistent_quants: true\noffload_quants: true\n"));
  const size_t base = whole.at("quantized base (persistent_quants: whole)");
  ASSERT_GT(base, 0u);
  // A rank's share: about a quarter (whole pieces placed by bytes, each rounded up to 256 bytes).
  const size_t share = sharded.at("quantized base (this rank's share)");
  EXPECT_GT(share, base / 4 / 2);
  EXPECT_LT(share, base / 4 * 3 / 2);
  EXPECT_EQ(offloaded.at("quantized base (offload_quants: on the host)"), 0u);
  EXPECT_GE(offloaded.at("pinned host memory"), base);
  EXPECT_EQ(whole.at("pinned host memory"), 0u);
  // Only the quantized base moves between the modes (and its per-layer buffers, none when whole).
  EXPECT_EQ(sharded.at("weights (this rank's shard)"), whole.at("weights (this rank's shard)"));
  EXPECT_EQ(offloaded.at("weights (this rank's shard)"), whole.at("weights (this rank's shard)"));
  // The peak moves by the quantized base and its buffers alone (on this tiny model the buffers of
  // two layers outweigh what sharing saves; tests/python/test_memory_prediction.py checks a 1.7B shape).
  auto rest = [](std::map<std::string, size_t>& bytes, const std::string& base_line) {
    // The evaluator gathers the quantized base too unless the training GPUs keep it whole.
    return bytes.at("peak") - bytes.at(base_line) - bytes.at("gathered weights (per-layer buffers)") -
           bytes.at("evaluation (outside the training's memory)");
  };
  EXPECT_EQ(rest(sharded, "quantized base (this rank's share)"), rest(whole, "quantized base (persistent_quants: whole)"));
  EXPECT_EQ(rest(offloaded, "quantized base (offload_quants: on the host)"),
            rest(whole, "quantized base (persistent_quants: whole)"));
  EXPECT_GT(sharded.at("gathered weights (per-layer buffers)"), whole.at("gathered weights (per-layer buffers)"));
  EXPECT_GT(sharded.at("evaluation (outside the training's memory)"),
            whole.at("evaluation (outside the training's memory)"));
  // One GPU with offload_quants: nothing of the base on the device either.
  auto single = predicted(config("memory_single", job + "zero_level: 3\npersistent_quants: true\noffload_quants: true\n"));
  EXPECT_EQ(single.at("quantized base (offload_quants: on the host)"), 0u);
  EXPECT_GE(single.at("pinned host memory"), base);
}

}  // namespace
}  // namespace surogate::train
