// The vision-language rows' cases (config/feature_support_vision.cpp), fired by
// test_feature_support.cpp's every-row tests.
#include <functional>
#include <vector>

#include "config/feature_support.h"
#include "feature_support_cases.h"

namespace surogate::feature_support_test {

// The vision-language rows (config/feature_support_vision.cpp): each case sets one unwired part on
// top of what is wired (LoRA).
std::vector<RowCase> vision_row_cases() {
  const auto vision = [](std::function<void(Config&)> set) {
    return [set](Config& c, RunShape& s) {
      s.vision_language = true;
      s.model_type = "Qwen2_5_VLForConditionalGeneration";
      c.lora.enabled = true;
      c.eval.validation_split_ratio = 0.0;
      set(c);
    };
  };
  using S = SupportStage;
  return {
      {"vision-language model with a preference or GRPO objective", S::Model,
       vision([](Config& c) { c.loss.preference = true; }), "`surogate dpo` / `surogate grpo` with model"},
      {"vision-language model with a model_definition", S::Model,
       vision([](Config& c) { c.model.model_definition = "graph.json"; }), "option 'model_definition'"},
      {"vision-language model with sequence or pipeline parallelism", S::Model,
       vision([](Config& c) { c.parallel.sequence_parallel_size = 2; }), "sequence / pipeline parallelism"},
      {"freeze_vision with a text model", S::Model,
       [](Config& c, RunShape& s) {
         s.model_type = "qwen3";
         c.sources["freeze_vision"] = "config.yaml:7";  // set, whatever its value
       },
       "config.yaml:7: freeze_vision applies to vision-language models"},
  };
}

}  // namespace surogate::feature_support_test
