// See feature_support_vision.h. Vision-language models (docs/vision.md): `surogate sft` trains a
// Qwen2.5-VL or Qwen3-VL folder's text model (LoRA, merge_adapter, or full fine-tuning; the tower
// frozen, or for Qwen2.5-VL trained too with freeze_vision: false) on one rank, evaluating as for
// text; each row below is a part that is not wired yet, or freeze_vision where it does not apply.
#include "config/feature_support_vision.h"

#include <fmt/format.h>

namespace surogate {
namespace {

// A row of the Model stage that refuses `what` for a vision-language folder when `refuses`.
SupportRow vision_row(std::string name, const char* key, std::string what,
                      std::function<bool(const Config&)> refuses) {
  return {std::move(name), SupportStage::Model, SupportBackend::Any,
          [refuses](const Config& c, const RunShape& shape) { return shape.vision_language && refuses(c); },
          [key, what](const Config& c, const RunShape& shape) {
            return fmt::format("{}: {} with model '{}', a vision-language model ({}), is not implemented yet in this "
                               "version of Surogate: `surogate sft` trains its text model (LoRA or full fine-tuning), the "
                               "vision tower frozen, on one GPU or the CPU (docs/vision.md)",
                               c.sources.of(key), what, c.model.name_or_path, shape.model_type);
          }};
}

}  // namespace

void add_vision_rows(std::vector<SupportRow>& rows) {
  rows.push_back(vision_row("vision-language model with a preference or GRPO objective", "model",
                            "`surogate dpo` / `surogate grpo`",
                            [](const Config& c) { return c.loss.preference || c.grpo.enabled; }));
  rows.push_back(vision_row("vision-language model with a model_definition", "model_definition",
                            "option 'model_definition' (the graph is the built-in Qwen2.5-VL / Qwen3-VL one)",
                            [](const Config& c) { return c.model.model_definition.has_value(); }));
  rows.push_back(vision_row("vision-language model on several ranks", "gpus",
                            "more than one rank (gpus, num_nodes, sequence / pipeline parallelism)",
                            [](const Config& c) {
                              return c.parallel.gpus != 1 || c.distributed.num_nodes > 1 ||
                                     c.parallel.sequence_parallel_size > 1 || c.parallel.pipeline_parallel_size > 1;
                            }));
  rows.push_back(vision_row("vision-language model with QLoRA", "qlora_bnb", "QLoRA (qlora_bnb, qlora_fp8, qlora_fp4)",
                            [](const Config& c) { return c.quant.qlora_bnb || c.quant.qlora_fp8 || c.quant.qlora_fp4; }));
  // freeze_vision: false trains Qwen2.5-VL's tower (train/vision_tower_lora.h); Qwen3-VL's is not wired yet.
  rows.push_back({"Qwen3-VL with a trainable vision tower", SupportStage::Model, SupportBackend::Any,
                  [](const Config& c, const RunShape& shape) {
                    return shape.vision_language && shape.model_type == "Qwen3VLForConditionalGeneration" &&
                           !c.model.freeze_vision;
                  },
                  [](const Config& c, const RunShape&) {
                    return fmt::format("{}: freeze_vision: false with model '{}', a Qwen3-VL model, is not implemented "
                                       "yet in this version of Surogate: its vision tower and DeepStack mergers stay "
                                       "frozen (set freeze_vision: true or leave it out); Qwen2.5-VL's tower trains "
                                       "(docs/vision.md)",
                                       c.sources.of("freeze_vision"), c.model.name_or_path);
                  }});
  // An option of vision-language models set for a text model is refused, never ignored.
  rows.push_back({"freeze_vision with a text model", SupportStage::Model, SupportBackend::Any,
                  [](const Config& c, const RunShape& shape) {
                    return !shape.vision_language && c.sources.by_key.contains("freeze_vision");
                  },
                  [](const Config& c, const RunShape& shape) {
                    return fmt::format("{}: freeze_vision applies to vision-language models (Qwen2.5-VL, Qwen3-VL); "
                                       "model '{}' ({}) is a text model, which has no vision tower: leave "
                                       "freeze_vision out (docs/vision.md)",
                                       c.sources.of("freeze_vision"), c.model.name_or_path, shape.model_type);
                  }});
  rows.push_back(vision_row("vision-language model with an fp8 or fp4 recipe", "recipe", "recipe fp8_hybrid / nvfp4",
                            [](const Config& c) { return c.precision.recipe != Recipe::Bf16; }));
}

}  // namespace surogate
