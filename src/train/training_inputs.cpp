// Checks before a training job; see training_inputs.h. Moved here from the CLI so the Python
// package runs exactly the same checks.
#include "train/training_inputs.h"

#include <filesystem>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "data/pipeline.h"
#include "io/hf_hub.h"
#include "io/model_config.h"
#include "io/object_store.h"
#include "models/vision_model.h"
#include "train/vision_stage.h"
#include "config/feature_support.h"
#include "vision/vision_model_folder.h"

namespace surogate::train {
namespace {
namespace fs = std::filesystem;

// A local folder is used as is. Anything else must be a hub id ("org/name[@revision]"): it is
// resolved through the Hugging Face cache (downloaded when online; with HF_HUB_OFFLINE=1 the cached
// snapshot, or a clear error asking for a local path), and config.model becomes that snapshot
// folder so every later stage reads local files only.
void validate_model_folder(Config& config) {
  fs::path folder(config.model.name_or_path);
  if (!fs::is_directory(folder)) {
    if (fs::exists(folder)) {
      fail_user("{}: model '{}' is a file; give a Hugging Face model folder (holding config.json) or a hub id "
                "like 'Qwen/Qwen3-0.6B'", config.sources.of("model"), config.model.name_or_path);
    }
    if (!io::looks_like_repo_id(config.model.name_or_path)) {
      fail_user("{}: model '{}' is not a local folder (no such path) and not a Hugging Face hub id like "
                "'Qwen/Qwen3-0.6B'; check the path", config.sources.of("model"), config.model.name_or_path);
    }
    try {
      folder = io::resolve_model(config.model.name_or_path);
    } catch (const UserError& error) {
      throw UserError(fmt::format("{}: model: {}", config.sources.of("model"), error.what()));
    }
    config.model.name_or_path = folder.string();
  }
  // A vision-language folder: what is not wired for it yet is refused by the feature table first,
  // then its config.json is read as the vision-language graph reads it.
  if (std::optional<std::string> architecture = vision::vision_language_architecture(folder)) {
    RunShape shape;
    shape.vision_language = true;
    shape.model_type = *architecture;
    refuse_unsupported(config, SupportStage::Model, shape);
    read_vision_language_model(folder.string(), *architecture);
    return;
  }
  // The IO module's loader checks config.json fully: valid JSON, a supported architecture,
  // required sizes, RoPE settings; its UserErrors name the file and key.
  const io::ModelConfig model = io::load_model_config(folder);
  RunShape shape;  // a text model: the rows of options that apply to vision-language models only
  shape.model_type = io::architecture_model_type(model.architecture);
  refuse_unsupported(config, SupportStage::Model, shape);
}

void validate_datasets(const Config& config, bool pretraining) {
  for (const auto* list : {&config.data.datasets, &config.eval.validation_datasets}) {
    const char* name = list == &config.data.datasets ? "datasets" : "validation_datasets";
    for (size_t i = 0; i < list->size(); ++i) {
      const DatasetConfig& dataset = (*list)[i];
      std::string key = fmt::format("{}[{}]", name, i);
      // A hub id (org/name) or an s3:// / gs:// URL is downloaded by the data pipeline; anything else must exist here.
      if (!fs::exists(dataset.path) && !io::looks_like_repo_id(dataset.path) && !io::is_object_store_url(dataset.path)) {
        fail_user("{}: {}.path '{}' does not exist: give a local file or folder, a hub dataset id (org/name), or an "
                  "s3:// / gs:// URL", config.sources.of(key + ".path"), key, dataset.path);
      }
      if (pretraining && dataset.type != DatasetType::Text) {
        fail_user("{}: {}.type is '{}', but `surogate pt` trains on raw text: use type: text (or `surogate sft`)",
                  config.sources.of(key + ".type"), key, to_string(dataset.type));
      }
    }
  }
}

// Training writes the token cache, checkpoints and outputs under these; an existing file there
// would fail only after tokenizing (or training).
void validate_output_folders(const Config& config) {
  for (const char* key : {"output_dir", "checkpoint_dir"}) {
    const std::string& folder = std::string(key) == "output_dir"
                                    ? config.run.output_dir
                                    : config.checkpoint.checkpoint_dir.value_or(config.run.output_dir);
    if (fs::exists(folder) && !fs::is_directory(folder)) {
      fail_user("{}: {} '{}' is a file; give a folder (it is created when missing)", config.sources.of(key), key,
                folder);
    }
  }
}

// The IR file itself is read (and verified) where the graph is built; here only that it is there,
// so a missing file fails before the data is tokenized.
void validate_model_definition(const Config& config) {
  if (!config.model.model_definition) return;
  if (!fs::is_regular_file(*config.model.model_definition)) {
    fail_user("{}: model_definition '{}' is not a file; give a JSON IR file (`surogate ir MODEL_DIR -o FILE`, or "
              "the Python DSL's emit)", config.sources.of("model_definition"), *config.model.model_definition);
  }
}

}  // namespace

void prepare_training_inputs(Config& config, bool pretraining) {
  validate_model_folder(config);
  validate_datasets(config, pretraining);
  validate_output_folders(config);
  validate_model_definition(config);
}

void validate_text_tools(const Config& config) {
  data::load_text_tools(data::data_settings_from_config(config));
}


}  // namespace surogate::train
