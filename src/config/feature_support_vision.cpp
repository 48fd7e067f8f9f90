// See feature_support_vision.h. Vision-language models (docs/vision.md): `surogate sft` trains a
// Qwen2.5-VL folder's text model (LoRA, QLoRA, merge_adapter, or full fine-tuning; the tower
// frozen) or a Qwen3-VL folder's (LoRA, QLoRA), with the bf16 or fp8_hybrid recipe, on one rank or
// data-parallel ranks (ZeRO 1/2/3), evaluating as for text (Qwen2.5-VL); each row below is a part
// that is not wired yet.
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
                               "version of Surogate: `surogate sft` trains its text model (LoRA, QLoRA or full "
                               "fine-tuning), the vision tower frozen, on one or several data-parallel ranks "
                               "(docs/vision.md)",
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
  // Qwen3-VL takes LoRA without evaluation so far: its evaluator and model folders are Qwen2.5-VL's
  // code, not yet run on its graph (train/vision_outputs.h writes Qwen2.5-VL folders only).
  rows.push_back({"Qwen3-VL with full fine-tuning, merge_adapter or evaluation", SupportStage::Model,
                  SupportBackend::Any,
                  [](const Config& c, const RunShape& shape) {
                    const bool evaluates = c.eval.validation_split_ratio > 0 || !c.eval.validation_datasets.empty();
                    return shape.vision_language && shape.model_type == "Qwen3VLForConditionalGeneration" &&
                           (!c.lora.enabled || c.lora.merge_adapter || evaluates);
                  },
                  [](const Config& c, const RunShape&) {
                    const bool evaluates = c.eval.validation_split_ratio > 0 || !c.eval.validation_datasets.empty();
                    const char* key = !c.lora.enabled ? "lora" : c.lora.merge_adapter ? "merge_adapter"
                                                                                        : "validation_split_ratio";
                    const char* what = !c.lora.enabled      ? "full fine-tuning (lora: false)"
                                       : c.lora.merge_adapter ? "merge_adapter"
                                       : evaluates            ? "evaluation (validation_split_ratio > 0 or validation_datasets; "
                                                                "set validation_split_ratio: 0)"
                                                              : "";
                    return fmt::format("{}: {} with model '{}', a Qwen3-VL model, is not implemented yet in this "
                                       "version of Surogate: `surogate sft` trains its text model with LoRA, without "
                                       "evaluation, the vision tower frozen, on one GPU or the CPU (docs/vision.md)",
                                       c.sources.of(key), what, c.model.name_or_path);
                  }});
}

}  // namespace surogate
