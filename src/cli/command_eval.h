// `surogate eval`'s options and the pieces its two paths share (command_eval.cpp: text models;
// command_eval_vision.cpp: vision-language folders).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/pipeline.h"
#include "models/token_batches.h"
#include "vision/decoded_image.h"

namespace surogate::cli {

struct EvalOptions {
  std::string model_dir;
  std::string data;
  std::string adapter;
  std::string device = "cpu";
  std::string ir;
  int64_t batch_size = 0;       // 0: the --ir graph's batch, else 1
  int64_t sequence_length = 0;  // 0: the --ir graph's sequence, else the longest sequence in the data
  int64_t lmhead_chunks = 1;
  std::optional<int64_t> max_pixels;  // vision-language folders: the image processor's
};

// A vision-language row's images (at the processor's target size), by the row's line.
using RowImagesByLine = std::map<int64_t, std::vector<vision::RgbImage>>;

// Formats and tokenizes rows without "input_ids" the way the data pipeline does for a dataset of
// type auto (text, instruction or conversation, decided per row), with the model folder's
// tokenizer and chat template, loaded on the first such row. With `vision` (a vision-language
// folder's image stage) rows with images go through the data stage's image rows (data/image_rows.h)
// and their images land in `images`.
models::RowTokenizer pipeline_row_tokenizer(const std::filesystem::path& model_dir, int64_t vocab_size,
                                            std::optional<data::VisionData> vision = std::nullopt,
                                            std::shared_ptr<RowImagesByLine> images = nullptr);

// `surogate eval` on a vision-language folder (`architecture`: vision::vision_language_architecture's).
int run_vision_eval(const EvalOptions& options, const std::string& architecture);

}  // namespace surogate::cli
