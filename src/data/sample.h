// One tokenized training document and the codec interfaces formatters use.
//
// Label convention (the one place to read it): labels are stored UNSHIFTED and aligned with
// input_ids: labels[i] == input_ids[i] when token i carries loss, else kIgnoreLabel (-100).
// The shift happens exactly once, in the loss: the logits at position i are scored against
// labels[i + 1]. Because nothing inside a document predicts its first token, labels[0] of every
// document is always kIgnoreLabel; this is also what keeps packed documents from scoring a
// prediction across a document boundary.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/row_reader.h"
#include "vision/decoded_image.h"

namespace surogate::data {

inline constexpr int32_t kIgnoreLabel = -100;

// A vision-language document's images (data/image_rows.h): the uint8 images at the processor's
// target size, in the order of their <|image_pad|> runs, and the document's M-RoPE positions.
struct SampleImages {
  std::vector<vision::RgbImage> resized;
  std::vector<int32_t> positions;  // [3, tokens]: axis-major, each axis restarting at 0
};

struct TokenizedSample {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> labels;  // same length as input_ids; see the convention above
  // Loss weights (loss_scale strategies that weigh parts of a response): empty means every token
  // with a label weighs 1, which is every strategy but the weighted ones; else one per token,
  // 0 where the label is kIgnoreLabel. The loss is Σ weight·ce / Σ weight over labelled tokens.
  std::vector<float> weights;
  // A preference pair (data/preference_formatter.h): the first `first_part` tokens are the chosen
  // sequence and the rest the rejected one (KTO: the row's, then its mismatched KL completion); the
  // packer writes them as two documents of one row. 0: one document.
  int32_t first_part = 0;
  // A `type: kto` row (data/kto_formatter.h): 1 desirable, 0 undesirable; -1 any other document.
  int8_t kto_label = -1;
  RowOrigin origin;
  // A document with images (vision-language datasets); null for text. It is never truncated or
  // split (an image's tokens cannot be cut): see read_dataset in pipeline.cpp.
  std::shared_ptr<const SampleImages> images;
};

// What the formatters need from a tokenizer (tokenizer::Tokenizer is adapted to this in
// pipeline.cpp; tests can use a tiny byte-level codec).
struct TextCodec {
  std::function<std::vector<int32_t>(std::string_view text, bool add_special_tokens)> encode;
  std::function<std::string(std::span<const int32_t> ids)> decode;
  std::optional<int32_t> eos_id;
  std::optional<int32_t> pad_id;
};

// Renders a conversation (OpenAI-style messages, optional tools) through a chat template.
// Messages and tools keep key order (RowValue), as `tojson` in templates prints it.
using ChatRenderer =
    std::function<std::string(const RowValue& messages, const RowValue& tools, bool add_generation_prompt)>;

}  // namespace surogate::data
