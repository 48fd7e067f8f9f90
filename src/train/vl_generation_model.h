// The NextTokenModel (generate/next_token_model.h) of a vision-language folder — Qwen2.5-VL or
// Qwen3-VL — for `surogate generate` (docs/generation.md, "Images"). A slot is its token history
// plus the images its prompt's <|image_pad|> runs stand for (set_images), and every feed runs the
// whole model graph the trainer runs (models/vision_model.h or models/qwen3_vl_model.h: the tower
// over the images, its features spliced at the image pads, Qwen3-VL's DeepStack, the M-RoPE
// decoder) over the slot's history at the M-RoPE positions of vision/mrope_positions.h, which are
// transformers' get_rope_index of that history: for tokens after the prompt the same position on
// the three axes, one past the last, which is transformers' rope_deltas with a cache. The logits
// come from the history's last token. No KV cache: a step costs a forward over the whole context
// of every slot fed (one graph, built once for [slots, max_context] and `plan_patches` patches; the
// slots fed form its rows, in the feeds' order; shorter histories, rows not fed and fewer patches
// are padded, as the trainer pads a micro-batch's images: train/vision_batch_inputs.h).
// fp32 on the CPU backend, bf16 on CUDA; a PEFT adapter on the text model applied unmerged.
// A prompt with images is fed whole in one call (generate::generate's max_prefill_tokens at least
// its length): a history that ends inside an image's tokens, or holds fewer than its images', is a
// UserError naming the slot. Tokens fed after the prompt are text to the model, as in transformers'
// decode steps; a generated <|image_pad|> (which no trained model writes) is refused naming the slot.
// The same model scores labelled sequences for `surogate eval` (score): the graph's loss output,
// the trainer's lm_head_loss over the shifted labels, one sequence per row.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "generate/next_token_model.h"
#include "vision/decoded_image.h"
#include "vision/image_processor.h"

namespace surogate::train {

struct VisionGenerationOptions {
  std::filesystem::path adapter;  // PEFT LoRA adapter of the text model (as `surogate sft` writes it), or empty
  bool cuda = false;
  int64_t slots = 1;               // sequences held, and the rows of one forward
  int64_t max_context = 2048;     // tokens a slot holds (prompt + generated)
  int64_t plan_patches = 0;       // the most patches the images of all slots have together (0: no images)
};

// A labelled sequence as the data stage formats a training row (data/image_rows.h): ids with each
// image's <|image_pad|> run expanded, unshifted labels (data/sample.h), the images at the
// processor's target size.
struct ScoredSequence {
  std::span<const int32_t> input_ids;
  std::span<const int32_t> labels;
  std::span<const vision::RgbImage> images;
  std::string name;  // for errors: the row (file:line)
};

struct SequenceLoss {
  double loss_sum = 0.0;  // summed next-token cross-entropy over the scored tokens
  int64_t tokens = 0;     // scored tokens (labels[t + 1] != -100 inside a sequence)
};

class VisionGenerationModel final : public generate::NextTokenModel {
public:
  // `architecture`: vision::vision_language_architecture's answer for `model_dir`; `processor`: the
  // configuration the prompts' images were resized with (the folder's, max_pixels applied).
  // UserErrors name config.json's keys, a missing tensor, the adapter's files.
  VisionGenerationModel(const std::filesystem::path& model_dir, const std::string& architecture,
                        const vision::ImageProcessorConfig& processor, const VisionGenerationOptions& options);
  ~VisionGenerationModel() override;

  // The images (at the processor's target size, in order) of the prompt `slot` is fed next; they
  // stay with the slot until the next set_images (clear() keeps them). UserError when they hold
  // more patches than the plan's (and at a feed, when the slots fed hold more together).
  void set_images(int64_t slot, std::vector<vision::RgbImage> images);

  // The loss of up to slots() sequences in one forward, each at most max_context tokens (one row
  // each; their images together at most the plan's patches), exactly as training scores them. The
  // slots' histories and images are left as they are. UserError naming the sequence otherwise.
  SequenceLoss score(std::span<const ScoredSequence> sequences);

  std::span<float> feed_in_place(std::span<const generate::SlotFeed> feeds) override;
  void clear(int64_t slot) override;
  int64_t held(int64_t slot) const override;
  int64_t slots() const override;
  int64_t max_context() const override;
  int64_t vocab_size() const override;

private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace surogate::train
