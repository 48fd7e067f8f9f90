// The trainer tests' shared setup: the quickstart example (string reversal, character
// tokenizer, tiny Llama from scratch) generated into a temporary folder once per suite, a small
// pretraining text file, and config() building a run configuration from "key: value" lines.
// Used by tests/train (CPU) and tests/train_cuda (CUDA against CPU).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "config/config_loader.h"
#include "io/safetensors.h"
#include "train/trainer.h"

namespace surogate::train {
namespace fs = std::filesystem;

// SUROGATE_SOURCE_DIR in the environment overrides the build tree's (the GPU machine runs the
// binaries from another checkout path).
inline std::string source_dir() {
  const char* override_dir = std::getenv("SUROGATE_SOURCE_DIR");
  return override_dir && *override_dir ? override_dir : SUROGATE_SOURCE_DIR;
}

class TrainerFixture : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / fmt::format("surogate-trainer-test-{}-{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_suite()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    std::string command = fmt::format("python3 {}/examples/quickstart/make_example.py {} > /dev/null", source_dir(),
                                      (root_ / "example").string());
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    std::ofstream text(root_ / "text.jsonl");
    for (int i = 0; i < 400; ++i) text << fmt::format("{{\"text\": \"abc abc abc abc xyz xyz xyz {}\"}}\n", "abcdefgh"[i % 8]);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  // A config for the example; `extra` holds "key: value" lines that replace or add to the
  // defaults below (the loader rejects a key given twice). Outputs go to root_/name.
  static Config config(const std::string& name, const std::string& extra, bool pretraining = false) {
    fs::path example = root_ / "example";
    std::vector<std::pair<std::string, std::string>> keys = {
        {"model", (example / "model").string()}, {"output_dir", (root_ / name).string()}, {"sequence_len", "64"},
        {"lora", "false"}, {"init_projections_to_zero", "true"}, {"use_chat_template", "false"},
        {"optimizer", "adamw"}, {"learning_rate", "3e-3"}, {"warmup_steps", "3"}, {"weight_decay", "0.0"},
        {"per_device_train_batch_size", "4"}, {"gradient_accumulation_steps", "2"},
        {"validation_split_ratio", "0.02"}, {"eval_steps", "1000"}, {"save_steps", "1000"}};
    std::istringstream lines(extra);
    for (std::string line; std::getline(lines, line);) {
      const size_t colon = line.find(": ");
      if (colon == std::string::npos) continue;
      const std::string key = line.substr(0, colon), value = line.substr(colon + 2);
      auto found = std::find_if(keys.begin(), keys.end(), [&](const auto& entry) { return entry.first == key; });
      if (found != keys.end()) found->second = value;
      else keys.emplace_back(key, value);
    }
    std::string yaml;
    for (const auto& [key, value] : keys) yaml += key + ": " + value + "\n";
    yaml += "datasets:\n";
    yaml += pretraining ? fmt::format("  - path: {}\n    type: text\n", (root_ / "text.jsonl").string())
                        : fmt::format("  - path: {}\n    type: instruction\n    instruction_field: instruction\n"
                                      "    output_field: output\n    prompt_format: \"reverse: {{instruction}} = {{output}}\"\n",
                                      (example / "train.jsonl").string());
    fs::path file = root_ / (name + ".yaml");
    std::ofstream(file) << yaml;
    return load_config(file);
  }

  static TrainerOptions quiet(bool pretraining = false) {
    TrainerOptions options;
    options.pretraining = pretraining;
    options.quiet = true;
    options.live_progress = false;
    return options;
  }
  // The same on the CPU backend even where a GPU is visible (the CPU-only features' tests).
  static TrainerOptions quiet_on_cpu() {
    TrainerOptions options = quiet(false);
    options.backend = TrainingBackend::Cpu;
    return options;
  }

  // Every tensor of safetensors files `a` and `b` is equal byte for byte.
  static void expect_same_tensors(const fs::path& a, const fs::path& b) {
    io::SafetensorsFile first = io::SafetensorsFile::open(a), second = io::SafetensorsFile::open(b);
    ASSERT_EQ(first.tensors().size(), second.tensors().size()) << a << " " << b;
    for (const io::SafetensorsTensor& tensor : first.tensors()) {
      const io::SafetensorsTensor& other = second.tensor(tensor.name);
      ASSERT_EQ(tensor.bytes.size(), other.bytes.size()) << tensor.name;
      EXPECT_EQ(std::memcmp(tensor.bytes.data(), other.bytes.data(), tensor.bytes.size()), 0) << tensor.name << " in " << a;
    }
  }

  // `job` (six steps, a checkpoint at the last) run as given with `plain`, and with the lines
  // `added` with `changed`: the same per-step losses, eval loss and checkpoint (weights and
  // optimizer state), bit for bit, and the loss fell. For options that move data, not values.
  static void expect_same_training(const std::string& name, const std::string& job, const std::string& added,
                                   const TrainerOptions& plain, const TrainerOptions& changed) {
    const std::string steps = "save_steps: 6\nmax_steps: 6\n";
    TrainingResult reference = run_training(config(name + "-plain", job + steps), plain);
    TrainingResult result = run_training(config(name + "-changed", job + added + steps), changed);
    ASSERT_EQ(result.step_losses.size(), reference.step_losses.size());
    for (size_t i = 0; i < reference.step_losses.size(); ++i) {
      EXPECT_EQ(result.step_losses[i], reference.step_losses[i]) << name << " step " << i + 1;
    }
    EXPECT_LT(result.step_losses.back(), result.step_losses.front()) << name;
    ASSERT_TRUE(reference.eval_loss && result.eval_loss);
    EXPECT_EQ(*result.eval_loss, *reference.eval_loss) << name;
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      expect_same_tensors(root_ / (name + "-plain") / "checkpoint-6" / file,
                          root_ / (name + "-changed") / "checkpoint-6" / file);
    }
  }

  static double mean(const std::vector<double>& values, size_t from, size_t to) {
    return std::accumulate(values.begin() + from, values.begin() + to, 0.0) / static_cast<double>(to - from);
  }

  static inline fs::path root_;
};

}  // namespace surogate::train
