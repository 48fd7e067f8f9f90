// The whole data path of a run: config → dataset files → rows → formatted, length-fitted
// documents → validation split → packed rows → token cache. `surogate tokenize`, `preview` and
// the trainer all go through here, so they see exactly the same tokens.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "data/formatter.h"
#include "data/packing.h"
#include "data/token_cache.h"
#include "data/vocabulary_check.h"
#include "vision/image_processor.h"

namespace surogate::data {

// A vision-language model's data (vision/vision_model_folder.h): conversation rows may hold images.
struct VisionData {
  std::string architecture;             // config.json's, for messages
  vision::ImageProcessorConfig processor;  // the folder's preprocessor_config.json, max_pixels applied
  NormBbox norm_bbox = NormBbox::Norm1000;  // the config's norm_bbox, else the model's (data/grounding.h)
};

// The options the data path depends on, resolved from a Config.
struct DataSettings {
  std::vector<DatasetConfig> datasets;
  std::vector<DatasetConfig> validation_datasets;
  double validation_split_ratio = 0.1;
  int64_t train_seed = 1234;
  int64_t eval_seed = 1234;
  size_t sequence_len = 0;  // T
  size_t max_length = 0;    // longest document; ≤ T
  TruncationStrategy truncation_strategy = TruncationStrategy::Delete;
  bool pad_left = false;
  bool padding_free = false;
  bool sample_packing = true;
  FormatOptions format;
  std::optional<std::string> template_name;
  std::filesystem::path tokenizer_dir;  // holds tokenizer.json (+ tokenizer_config.json)
  std::filesystem::path cache_path;     // <output_dir>/tokenized/dataset.surotok
  // The model's vocab_size when the model folder has a config.json: load_text_tools then checks
  // that the tokenizer produces no id beyond it (data/vocabulary_check.h).
  std::optional<ModelVocabulary> model_vocabulary;
  // type: kto datasets: per_device_train_batch_size, the chunk their KL completions are rotated in
  // (data/kto_rows.h); 0 otherwise.
  size_t kto_batch = 0;
  // Threads that format and tokenize rows (dataloader_num_workers, data/format_workers.h). Not
  // part of the cache key: the token cache is the same for every count.
  size_t workers = 1;
  // Set when the model folder is a vision-language model (part of the cache key).
  std::optional<VisionData> vision;
};

// UserError when sequence_len cannot be known, when max_pixels or norm_bbox is set for a model that is not a
// vision-language model or is below the processor's min_pixels, (unset and no max_position_embeddings in the
// model's config.json) or max_length exceeds it.
DataSettings data_settings_from_config(const Config& config);

// The tokenizer and chat template named by the settings, as the formatters' interfaces.
struct TextTools {
  TextCodec codec;
  ChatRenderer renderer;  // empty when use_chat_template is false or no template exists
  std::string template_identity;  // for the cache key
  std::optional<int32_t> image_pad_id;  // <|image_pad|>, read when settings.vision is set
};
// UserError (naming tokenizer.json and config.json) when settings.model_vocabulary is set and the
// tokenizer can produce ids beyond it.
TextTools load_text_tools(const DataSettings& settings);

// Counts for one dataset entry.
struct DatasetReport {
  std::string path;
  std::string type;
  uint64_t files = 0;
  uint64_t rows_read = 0;
  uint64_t documents = 0;  // after formatting and length fitting
  std::map<std::string, uint64_t> dropped;
  uint64_t truncated = 0;
  uint64_t split = 0;
  uint64_t tokenization_differs = 0;
  uint64_t weighted_rows = 0;  // rows with a token weight other than 0 and 1 (agent loss_scale)
};

struct PreparedData {
  PackedRows train;
  PackedRows eval;
  std::vector<DatasetReport> datasets;
  PackingStats train_packing;
  PackingStats eval_packing;
  // Said once per run (load_or_build_cache logs them): a training dataset in which an agent
  // loss_scale strategy found no tool call to weigh.
  std::vector<std::string> warnings;
  // type: kto: {"train": labels, "eval": labels} (data/kto_rows.h: kto_label_string), in row order.
  nlohmann::json kto_labels;
  nlohmann::json report() const;
};

// Progress: rows read so far for the dataset being read.
using ProgressFn = std::function<void(const std::string& dataset, uint64_t rows)>;
PreparedData prepare_data(const DataSettings& settings, const TextTools& tools, const ProgressFn& progress);

// Hash of everything the cache content depends on.
uint64_t cache_key(const DataSettings& settings, const TextTools& tools);

// The cache for these settings: reused when valid, else (re)built with a message through `log`
// saying why ("stale", "corrupt", "missing"); then the report's warnings, each once, through `log`.
std::shared_ptr<TokenCache> load_or_build_cache(const DataSettings& settings, const ProgressFn& progress,
                                                const std::function<void(const std::string&)>& log);

// Human-readable summary lines of a report (samples read, dropped with reasons, truncated,
// split, packing efficiency).
std::vector<std::string> describe_report(const nlohmann::json& report);

}  // namespace surogate::data
