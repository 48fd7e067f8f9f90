// `surogate eval` on a vision-language folder (Qwen2.5-VL, Qwen3-VL; docs/vision.md): the rows are
// formatted by the training data stage (data/image_rows.h: images decoded and resized by the
// folder's image processor, --max_pixels applied, <|image_pad|> expanded, assistant tokens scored)
// and scored by the model graph `surogate generate` runs (train/vl_generation_model.h: the trainer's
// vision-language graph and its lm_head_loss), one sequence per row, --batch-size rows a forward;
// fp32 on the CPU, bf16 on CUDA. Prints the same JSON line as for a text model.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command_eval.h"
#include "core/error.h"
#include "data/grounding.h"
#include "train/vision_stage.h"
#include "train/vl_generation_model.h"
#include "vision/image_processor.h"

namespace surogate::cli {

int run_vision_eval(const EvalOptions& options, const std::string& architecture) {
  const std::filesystem::path model_dir = options.model_dir;
  if (!options.ir.empty()) {
    fail_user("--ir / --model_definition {}: {} is a vision-language folder ({}), which is evaluated with its built-in "
              "graph; remove the option", options.ir, model_dir.string(), architecture);
  }
  if (options.lmhead_chunks != 1) {
    fail_user("--lmhead-chunks {}: {} is a vision-language folder ({}), whose graph runs the lm head in one chunk; "
              "remove the option", options.lmhead_chunks, model_dir.string(), architecture);
  }
  if (!options.adapter.empty() && !std::filesystem::is_directory(options.adapter)) {
    fail_user("--adapter {}: not a folder; give a PEFT adapter folder (adapter_config.json + "
              "adapter_model.safetensors).", options.adapter);
  }
  vision::ImageProcessorConfig processor = vision::ImageProcessorConfig::from_folder(model_dir);
  if (options.max_pixels) {
    if (*options.max_pixels < processor.min_pixels) {
      fail_user("--max_pixels {} is below the image processor's min_pixels ({}): raise it", *options.max_pixels,
                processor.min_pixels);
    }
    processor.max_pixels = *options.max_pixels;
  }
  const train::VisionLanguageModel folder = train::read_vision_language_model(model_dir.string(), architecture);
  const int64_t vocab_size = train::vision_text_config(folder).vocab_size;
  auto images = std::make_shared<RowImagesByLine>();
  const std::vector<models::TokenSequence> sequences = models::read_token_jsonl(
      options.data, vocab_size,
      pipeline_row_tokenizer(model_dir, vocab_size,
                             data::VisionData{architecture, processor, data::default_norm_bbox(architecture)}, images));

  const int64_t batch_size = options.batch_size > 0 ? options.batch_size : 1;
  int64_t longest = 0;
  for (const models::TokenSequence& sequence : sequences) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(sequence.input_ids.size()));
  }
  const int64_t sequence_length = options.sequence_length > 0 ? options.sequence_length : longest;
  const std::vector<vision::RgbImage> no_images;
  const auto images_of = [&](const models::TokenSequence& sequence) -> const std::vector<vision::RgbImage>& {
    const auto found = images->find(sequence.line);
    return found == images->end() ? no_images : found->second;
  };
  // The plan holds the most patches one batch's images have (train/vision_batch_inputs.h pads to it).
  const vision::ImageProcessor patcher(processor);
  int64_t plan_patches = 0;
  for (size_t first = 0; first < sequences.size(); first += static_cast<size_t>(batch_size)) {
    int64_t patches = 0;
    for (size_t index = first; index < std::min(sequences.size(), first + static_cast<size_t>(batch_size)); ++index) {
      const models::TokenSequence& sequence = sequences[index];
      if (static_cast<int64_t>(sequence.input_ids.size()) > sequence_length) {
        fail_user("{}:{}: the row has {} tokens, more than --seq-len {}; raise --seq-len (or leave it out: the longest "
                  "row's length)", options.data, sequence.line, sequence.input_ids.size(), sequence_length);
      }
      const vision::ProcessedImages processed = patcher.patches(images_of(sequence));
      if (processed.patch_dim > 0) patches += static_cast<int64_t>(processed.pixel_values.size()) / processed.patch_dim;
    }
    plan_patches = std::max(plan_patches, patches);
  }

  train::VisionGenerationOptions model_options;
  model_options.adapter = options.adapter;
  model_options.cuda = options.device == "cuda";
  model_options.slots = std::min<int64_t>(batch_size, static_cast<int64_t>(sequences.size()));
  model_options.max_context = sequence_length;
  model_options.plan_patches = plan_patches;
  train::VisionGenerationModel model(model_dir, architecture, processor, model_options);
  double loss_sum = 0.0;
  int64_t tokens = 0;
  for (size_t first = 0; first < sequences.size(); first += static_cast<size_t>(model_options.slots)) {
    std::vector<train::ScoredSequence> batch;
    for (size_t index = first; index < std::min(sequences.size(), first + static_cast<size_t>(model_options.slots));
         ++index) {
      const models::TokenSequence& sequence = sequences[index];
      batch.push_back({sequence.input_ids, sequence.labels, images_of(sequence),
                       fmt::format("{}:{}", options.data, sequence.line)});
    }
    const train::SequenceLoss scored = model.score(batch);
    loss_sum += scored.loss_sum;
    tokens += scored.tokens;
  }
  if (tokens == 0) fail_user("{}: no token has a label to score (every target is -100).", options.data);
  const double loss = loss_sum / static_cast<double>(tokens);
  std::cout << nlohmann::json{{"loss", loss}, {"perplexity", std::exp(loss)}, {"tokens", tokens}}.dump() << "\n";
  return 0;
}

}  // namespace surogate::cli
