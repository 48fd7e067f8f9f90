// Config's sections: the flat options land in the section fields docs/configuration.md names, each
// option in a field of its own, and where they were set is looked up apart from the values.
#include <string>

#include <gtest/gtest.h>

#include "config/config_fields.h"
#include "config/config_sources.h"
#include "config_test_util.h"

namespace surogate {
namespace {
using testing_util::kMinimalConfig;

TEST(ConfigSections, OptionsLandInTheirSections) {
  const Config config = load_config_from_string(
      kMinimalConfig, "config.yaml",
      {"--run_name=r", "--save_steps=7", "--sequence_len=512", "--recompute_lora=false", "--offload_optimizer=true",
       "--gpus=2", "--recipe=fp8_hybrid", "--fp8_amax_history=16", "--lmhead_chunks=2", "--optimizer=adamw",
       "--warmup_steps=3", "--template=chatml", "--eval_steps=9", "--lora_rank=8", "--qlora_bnb_block_size=128",
       "--log_gpu_util=5", "--distributed.num_nodes=1"});
  EXPECT_EQ(config.model.name_or_path, "./my-model");  // the option `model`
  EXPECT_EQ(config.run.run_name, "r");
  EXPECT_EQ(config.checkpoint.save_steps, 7);
  EXPECT_EQ(config.model.sequence_len, 512);
  EXPECT_FALSE(config.recompute.recompute_lora);
  EXPECT_TRUE(config.offload.offload_optimizer);
  EXPECT_EQ(config.parallel.gpus, 2);
  EXPECT_EQ(config.precision.recipe, Recipe::Fp8Hybrid);
  EXPECT_EQ(config.precision.fp8_amax_history, 16);
  EXPECT_EQ(config.kernels.lmhead_chunks, 2);
  EXPECT_EQ(config.optimizer.algorithm, Optimizer::AdamW);  // the option `optimizer`
  EXPECT_EQ(config.schedule.warmup_steps, 3);
  EXPECT_EQ(config.data.template_name, "chatml");  // the option `template`
  EXPECT_EQ(config.data.datasets.size(), 1u);
  EXPECT_EQ(config.eval.eval_steps, 9);
  EXPECT_TRUE(config.lora.enabled);  // the option `lora`, default true
  EXPECT_EQ(config.lora.lora_rank, 8);
  EXPECT_EQ(config.quant.qlora_bnb_block_size, 128);
  EXPECT_EQ(config.logging.log_gpu_util, 5);
  EXPECT_EQ(config.distributed.num_nodes, 1);
}

// A value for `option` other than `current` that decodes as the same type, or "" when the test
// cannot make one (null optionals, lists, mappings).
std::string another_value(const YAML::Node& current) {
  if (!current.IsScalar()) return "";
  const std::string& text = current.Scalar();
  if (text == "true") return "false";
  if (text == "false") return "true";
  try {
    size_t used = 0;
    const double number = std::stod(text, &used);
    if (used == text.size()) return text.find_first_of(".eE") == std::string::npos
                                        ? std::to_string(static_cast<int64_t>(number) + 7)
                                        : std::to_string(number + 7.5);
  } catch (const std::exception&) {
  }
  return text + "_changed";  // a free string (enums refuse it; those are skipped)
}

// Every option writes a field of its own: changing one option through the table changes that
// option's printed value and no other (two options mapped to one field, or an option mapped to
// the wrong section's field of the same name, would show here).
TEST(ConfigSections, EveryOptionHasAFieldOfItsOwn) {
  using namespace config_detail;
  const Config defaults;
  const YAML::Node before = encode_fields(config_fields(), defaults);
  int checked = 0;
  for (const auto& field : config_fields()) {
    const std::string value = another_value(before[field.name]);
    if (value.empty()) continue;
    Config changed;
    try {
      field.assign(changed, YAML::Load(value), Where{field.name, "test", ""});
    } catch (const UserError&) {
      continue;  // an enum: "<name>_changed" is not one of its names
    }
    const YAML::Node after = encode_fields(config_fields(), changed);
    EXPECT_NE(YAML::Dump(after[field.name]), YAML::Dump(before[field.name])) << field.name;
    for (const auto& other : config_fields()) {
      if (other.name == field.name) continue;
      EXPECT_EQ(YAML::Dump(after[other.name]), YAML::Dump(before[other.name]))
          << "setting " << field.name << " changed " << other.name;
    }
    ++checked;
  }
  EXPECT_GE(checked, 80);  // bool, integer, floating-point and string options (of about 120)
}

TEST(ConfigSections, SourcesAreLookedUpApartFromTheValues) {
  ConfigSources sources;
  EXPECT_EQ(sources.of("lora_rank"), "the default");
  sources["lora_rank"] = "config.yaml:4";
  sources["datasets[0]"] = "config.yaml:7";
  EXPECT_EQ(sources.of("lora_rank"), "config.yaml:4");
  // A key the file does not set is reported where its enclosing entry is written.
  EXPECT_EQ(sources.of("datasets[0].instruction_field"), "config.yaml:7");
  EXPECT_EQ(sources.of("datasets[1].path"), "the default");

  const Config config = load_config_from_string("model: m\nlora_rank: 8\ndatasets:\n  - path: d\n    type: text\n",
                                                "config.yaml", {"--save_steps=3"});
  EXPECT_EQ(config.sources.of("lora_rank"), "config.yaml:2");
  EXPECT_EQ(config.sources.of("save_steps"), "command line --save_steps=3");
  EXPECT_EQ(config.sources.of("datasets[0].type"), "config.yaml:5");
  EXPECT_EQ(config.sources.of("learning_rate"), "the default");
}

}  // namespace
}  // namespace surogate
