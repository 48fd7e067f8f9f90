// See feature_support_vision.h. Vision-language models (docs/vision.md): `surogate sft` trains a
// Qwen2.5-VL or Qwen3-VL folder (LoRA, QLoRA, merge_adapter, or full fine-tuning; the tower frozen,
// or trained too with freeze_vision: false), with the bf16 or fp8_hybrid recipe, on
// one rank or data-parallel ranks (ZeRO 1/2/3), evaluating as for text; each row below is a part
// that is not wired yet, or freeze_vision where it does not apply.
#include "config/feature_support_vision.h"

#include <functional>

#include <fmt/format.h>

namespace surogate {
namespace {

// A row of the Model stage that refuses `what` for a vision-language folder when `refuses`, naming
// where `key_of` (the option the configuration set) was set.
SupportRow vision_row(std::string name, std::function<const char*(const Config&)> key_of, std::string what,
                      std::function<bool(const Config&)> refuses) {
  return {std::move(name), SupportStage::Model, SupportBackend::Any,
          [refuses](const Config& c, const RunShape& shape) { return shape.vision_language && refuses(c); },
          [key_of, what](const Config& c, const RunShape& shape) {
            const char* key = key_of(c);
            return fmt::format("{}: {} with model '{}', a vision-language model ({}), is not implemented yet in this "
                               "version of Surogate: `surogate sft` trains it (LoRA, QLoRA or full fine-tuning; the "
                               "vision tower frozen or trained with freeze_vision: false) on one "
                               "or several data-parallel ranks (docs/vision.md)",
                               c.sources.of(key), what, c.model.name_or_path, shape.model_type);
          }};
}
SupportRow vision_row(std::string name, const char* key, std::string what, std::function<bool(const Config&)> refuses) {
  return vision_row(std::move(name), [key](const Config&) { return key; }, std::move(what), std::move(refuses));
}

}  // namespace

void add_vision_rows(std::vector<SupportRow>& rows) {
  rows.push_back(vision_row("vision-language model with a preference or GRPO objective", "model",
                            "`surogate dpo` / `surogate grpo`",
                            [](const Config& c) { return c.loss.preference || c.grpo.enabled; }));
  rows.push_back(vision_row("vision-language model with a model_definition", "model_definition",
                            "option 'model_definition' (the graph is the built-in Qwen2.5-VL / Qwen3-VL one)",
                            [](const Config& c) { return c.model.model_definition.has_value(); }));
  // Data parallelism (gpus, num_nodes) works: each rank binds its own micro-batch's images and every
  // rank plans the same patch count. Sequence parallelism would split a row's tokens, and with them
  // its image tokens, over the ranks while the tower's features and the [3, B, T] M-RoPE positions are
  // the whole row's; pipeline stages would need the tower in the first stage and its features carried
  // to the stage that splices them. Neither is wired.
  rows.push_back(vision_row("vision-language model with sequence or pipeline parallelism",
                            [](const Config& c) {
                              return c.parallel.sequence_parallel_size > 1 ? "sequence_parallel_size"
                                                                            : "pipeline_parallel_size";
                            },
                            "sequence / pipeline parallelism (sequence_parallel_size, pipeline_parallel_size; data "
                            "parallelism with gpus / num_nodes works)",
                            [](const Config& c) {
                              return c.parallel.sequence_parallel_size > 1 || c.parallel.pipeline_parallel_size > 1;
                            }));
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
}

}  // namespace surogate
