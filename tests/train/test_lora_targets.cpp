#include <gtest/gtest.h>

#include "core/error.h"
#include "train/lora_targets.h"

namespace surogate::train {
namespace {

TEST(LoraTargets, AllLinearExpandsToEveryProjection) {
  auto targets = resolve_lora_targets({"all-linear"});
  EXPECT_EQ(targets, decoder_linear_modules());
}

TEST(LoraTargets, ExplicitNamesKeepCanonicalOrderWithoutDuplicates) {
  auto targets = resolve_lora_targets({"v_proj", "q_proj", "v_proj"});
  EXPECT_EQ(targets, (std::vector<std::string>{"q_proj", "v_proj"}));
}

TEST(LoraTargets, UnknownModuleIsAUserErrorListingTheValidOnes) {
  try {
    resolve_lora_targets({"q_proj", "lm_head"});
    FAIL() << "expected an error";
  } catch (const UserError& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("'lm_head'"), std::string::npos);
    EXPECT_NE(message.find("down_proj"), std::string::npos);
  }
  EXPECT_THROW(resolve_lora_targets({}), UserError);
}

TEST(LoraTargets, PeftNamesAndConfig) {
  EXPECT_EQ(peft_lora_tensor_name(3, "q_proj", 'A'), "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(peft_lora_tensor_name(0, "down_proj", 'B'), "base_model.model.model.layers.0.mlp.down_proj.lora_B.weight");
  LoraSettings settings{8, 16, 0.1, {"q_proj", "v_proj"}};
  auto config = peft_adapter_config(settings, "Qwen/Qwen3-0.6B");
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], 8);
  EXPECT_EQ(config["lora_alpha"], 16);
  EXPECT_EQ(config["target_modules"], (nlohmann::json{"q_proj", "v_proj"}));
  EXPECT_DOUBLE_EQ(lora_scale(settings), 2.0);
}

}  // namespace
}  // namespace surogate::train
