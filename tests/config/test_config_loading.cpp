#include <gtest/gtest.h>

#include "config_test_util.h"

namespace surogate {
namespace {
using testing_util::contains;
using testing_util::kMinimalConfig;
using testing_util::load_error;

TEST(ConfigLoading, DefaultsMatchTheReference) {
  Config config = load_config_from_string(kMinimalConfig, "config.yaml");
  EXPECT_EQ(config.schedule.num_epochs, 3);
  EXPECT_EQ(config.run.output_dir, "output");
  EXPECT_EQ(config.checkpoint.save_steps, 50);
  EXPECT_EQ(config.checkpoint.save_total_limit, 5);
  EXPECT_EQ(config.optimizer.algorithm, Optimizer::AdamW8bit);
  EXPECT_DOUBLE_EQ(config.optimizer.learning_rate, 2e-4);
  EXPECT_EQ(config.schedule.lr_scheduler_type, LrScheduler::Linear);
  EXPECT_DOUBLE_EQ(config.optimizer.weight_decay, 0.1);
  EXPECT_DOUBLE_EQ(config.optimizer.max_grad_norm, 1.0);
  EXPECT_DOUBLE_EQ(config.optimizer.adamw_beta2, 0.999);
  EXPECT_DOUBLE_EQ(config.optimizer.adamw_epsilon, 1e-8);
  EXPECT_DOUBLE_EQ(config.optimizer.normuon_momentum, 0.95);
  EXPECT_EQ(config.schedule.per_device_train_batch_size, 2);
  EXPECT_EQ(config.schedule.gradient_accumulation_steps, 4);
  EXPECT_EQ(config.schedule.max_steps, -1);
  EXPECT_EQ(config.eval.eval_steps, 100);
  EXPECT_DOUBLE_EQ(config.eval.validation_split_ratio, 0.1);
  EXPECT_EQ(config.data.train_seed, 1234);
  EXPECT_TRUE(config.data.sample_packing);
  EXPECT_TRUE(config.lora.enabled);
  EXPECT_EQ(config.lora.lora_rank, 16);
  EXPECT_EQ(config.lora.lora_alpha, 32);
  EXPECT_DOUBLE_EQ(config.lora.lora_dropout, 0.05);
  EXPECT_EQ(config.lora.lora_dtype, LoraDtype::Fp32);
  EXPECT_EQ(config.lora.lora_target_modules, std::vector<std::string>{"all-linear"});
  EXPECT_EQ(config.quant.qlora_block_size, 128);
  EXPECT_EQ(config.quant.qlora_bnb_block_size, 64);
  EXPECT_EQ(config.precision.recipe, Recipe::Bf16);
  EXPECT_EQ(config.parallel.zero_level, 1);
  EXPECT_EQ(config.parallel.gpus, 1);
  EXPECT_TRUE(config.kernels.use_cuda_graphs);
  EXPECT_EQ(config.data.truncation_strategy, TruncationStrategy::Delete);
  EXPECT_EQ(config.data.padding_side, PaddingSide::Right);
  EXPECT_EQ(config.distributed.ray_address, "auto");
  EXPECT_EQ(config.data.datasets.at(0).split, "train");
  EXPECT_EQ(config.data.datasets.at(0).text_field, "text");
  EXPECT_EQ(config.data.datasets.at(0).messages_field, "messages");
  EXPECT_EQ(config.checkpoint.checkpoint_dir, "output");  // follows output_dir
}

TEST(ConfigLoading, UnknownKeySuggestsTheClosestOption) {
  std::string message = load_error(std::string(kMinimalConfig) + "learning_rte: 0.001\n");
  EXPECT_TRUE(contains(message, "config.yaml:5")) << message;
  EXPECT_TRUE(contains(message, "unknown option 'learning_rte'")) << message;
  EXPECT_TRUE(contains(message, "did you mean 'learning_rate'?")) << message;
}

TEST(ConfigLoading, UnknownKeyInsideADatasetEntry) {
  std::string message = load_error("model: m\ndatasets:\n  - path: d.jsonl\n    type: text\n    text_feild: body\n");
  EXPECT_TRUE(contains(message, "config.yaml:5")) << message;
  EXPECT_TRUE(contains(message, "datasets[0].text_feild")) << message;
  EXPECT_TRUE(contains(message, "did you mean 'datasets[0].text_field'?")) << message;
}

TEST(ConfigLoading, UnknownKeyInsideDistributed) {
  std::string message = load_error(std::string(kMinimalConfig) + "distributed:\n  num_node: 2\n");
  EXPECT_TRUE(contains(message, "distributed.num_node")) << message;
  EXPECT_TRUE(contains(message, "distributed.num_nodes")) << message;
}

TEST(ConfigLoading, TypeErrorsNameTheLineAndExpectedType) {
  std::string message = load_error(std::string(kMinimalConfig) + "num_epochs: three\n");
  EXPECT_TRUE(contains(message, "config.yaml:5")) << message;
  EXPECT_TRUE(contains(message, "'num_epochs' expects an integer, got 'three'")) << message;
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "lora: maybe\n"), "true or false"));
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "learning_rate: [1]\n"), "expects a number, got a list"));
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "num_epochs: 1.5\n"), "expects an integer"));
  EXPECT_TRUE(contains(load_error("model: {a: 1}\ndatasets:\n  - path: d\n    type: text\n"), "expects a string, got a mapping"));
}

TEST(ConfigLoading, EnumErrorsListTheAllowedValues) {
  std::string message = load_error(std::string(kMinimalConfig) + "lr_scheduler_type: cosin\n");
  EXPECT_TRUE(contains(message, "linear, cosine, wsd")) << message;
  EXPECT_TRUE(contains(message, "did you mean 'cosine'?")) << message;
  EXPECT_TRUE(contains(load_error("model: m\ndatasets:\n  - path: d\n    type: chat\n"), "text, instruction, conversation, auto"));
}

TEST(ConfigLoading, InvalidYamlNamesLineAndColumn) {
  std::string message = load_error("model: m\ndatasets: [\n  {path: x\n");
  EXPECT_TRUE(contains(message, "config.yaml:")) << message;
  EXPECT_TRUE(contains(message, "invalid YAML")) << message;
  EXPECT_TRUE(contains(load_error(""), "is empty"));
  EXPECT_TRUE(contains(load_error("- a\n- b\n"), "must be a mapping"));
}

TEST(ConfigLoading, MalformedKeysAndDuplicatesAreUserErrors) {
  std::string message = load_error(std::string(kMinimalConfig) + "? [a, b]\n: 1\n");
  EXPECT_TRUE(contains(message, "config.yaml:5")) << message;
  EXPECT_TRUE(contains(message, "option names must be plain words")) << message;
  message = load_error(std::string(kMinimalConfig) + "lora_rank: 8\nlora_rank: 4\n");
  EXPECT_TRUE(contains(message, "config.yaml:6: option 'lora_rank' is set twice (first at config.yaml:5)")) << message;
  message = load_error("model: m\ndatasets:\n  - path: d\n    type: text\n    path: e\n");
  EXPECT_TRUE(contains(message, "'datasets[0].path' is set twice")) << message;
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "num_epochs: 99999999999999999999999\n"),
                       "expects an integer"));
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "learning_rate: .nan\n"), "expects a number"));
  EXPECT_TRUE(contains(load_error("model: m\ndatasets: [1, 2]\n"), "datasets[0]"));
  EXPECT_TRUE(contains(load_error("model: m\ndatasets: {path: x}\n"), "a list of dataset entries"));
}

TEST(ConfigLoading, EnumsParseToTheirValues) {
  Config config = load_config_from_string(std::string(kMinimalConfig) +
                                              "optimizer: normuon\nlr_scheduler_type: wsd\ntruncation_strategy: split\n"
                                              "padding_side: left\ntorch_dtype: float16\n",
                                          "config.yaml");
  EXPECT_EQ(config.optimizer.algorithm, Optimizer::NorMuon);
  EXPECT_EQ(config.schedule.lr_scheduler_type, LrScheduler::Wsd);
  EXPECT_EQ(config.data.truncation_strategy, TruncationStrategy::Split);
  EXPECT_EQ(config.data.padding_side, PaddingSide::Left);
  EXPECT_EQ(config.model.torch_dtype, TorchDtype::Float16);
  EXPECT_EQ(to_dtype(*config.model.torch_dtype), DType::F16);
  EXPECT_EQ(config.data.datasets[0].type, DatasetType::Text);
  EXPECT_EQ(to_string(Optimizer::AdamW8bit), "adamw_8bit");
  EXPECT_EQ(enum_from_string<Recipe>("fp8_hybrid"), Recipe::Fp8Hybrid);
  EXPECT_FALSE(enum_from_string<Recipe>("FP8_HYBRID").has_value());
  EXPECT_EQ(enum_names<PaddingSide>(), (std::vector<std::string>{"left", "right"}));
  std::string message = load_error(std::string(kMinimalConfig) + "torch_dtype: bf16\n");
  EXPECT_TRUE(contains(message, "config.yaml:5: option 'torch_dtype' is 'bf16', which is not one of: bfloat16, "
                                "float16, float32")) << message;
  EXPECT_TRUE(contains(load_error(std::string(kMinimalConfig) + "report_to: [wandb, tensorboard]\n"), "wandb, aim"));
}

TEST(ConfigLoading, OverridesReplaceFileValues) {
  Config config = load_config_from_string(kMinimalConfig, "config.yaml",
                                          {"--learning_rate=0.001", "--lora-rank=8", "num_epochs=1",
                                           "--lora_target_modules=[q_proj, v_proj]", "--distributed.ray_address=local",
                                           "--datasets.0.text_field=body"});
  EXPECT_DOUBLE_EQ(config.optimizer.learning_rate, 0.001);
  EXPECT_EQ(config.lora.lora_rank, 8);
  EXPECT_EQ(config.schedule.num_epochs, 1);
  EXPECT_EQ(config.lora.lora_target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(config.distributed.ray_address, "local");
  EXPECT_EQ(config.data.datasets[0].text_field, "body");
  EXPECT_EQ(config.sources.of("learning_rate"), "command line --learning_rate=0.001");
  EXPECT_EQ(config.sources.of("datasets[0].path"), "config.yaml:3");
}

TEST(ConfigLoading, OverrideErrorsNameTheCommandLine) {
  std::string message = load_error(kMinimalConfig, {"--learnig_rate=0.1"});
  EXPECT_TRUE(contains(message, "command line --learnig_rate=0.1")) << message;
  EXPECT_TRUE(contains(message, "did you mean 'learning_rate'?")) << message;
  EXPECT_TRUE(contains(load_error(kMinimalConfig, {"--num_epochs=x"}), "expects an integer"));
  EXPECT_TRUE(contains(load_error(kMinimalConfig, {"--datasets.3.path=x"}), "existing entry"));
  EXPECT_TRUE(contains(load_error(kMinimalConfig, {"--lora_rank"}), "--key=value"));
}

TEST(ConfigLoading, CollectOverridesAcceptsTheUsualSpellings) {
  auto overrides = collect_overrides({"--a=1", "--b", "2", "--flag", "--c=x"});
  EXPECT_EQ(overrides, (std::vector<std::string>{"--a=1", "--b=2", "--flag=true", "--c=x"}));
  EXPECT_THROW(collect_overrides({"stray"}), UserError);
}

TEST(ConfigLoading, DumpRoundTrips) {
  Config config = load_config_from_string(std::string(kMinimalConfig) + "learning_rate: 0.003\nrun_name: demo\n", "c.yaml");
  std::string dumped = dump_config_yaml(config);
  EXPECT_TRUE(contains(dumped, "learning_rate: 0.003"));
  EXPECT_TRUE(contains(dumped, "template: ~") || contains(dumped, "template:"));
  // The dump (minus the implied-notes comments) loads back to the same values.
  Config again = load_config_from_string(dumped, "dump.yaml");
  EXPECT_DOUBLE_EQ(again.optimizer.learning_rate, 0.003);
  EXPECT_EQ(again.run.run_name, "demo");
  auto without_notes = [](const std::string& text) { return text.substr(0, text.find("# implied:")); };
  EXPECT_EQ(without_notes(dump_config_yaml(again)), without_notes(dumped));
}

}  // namespace
}  // namespace surogate
