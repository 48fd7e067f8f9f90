// The one place that decides whether a model folder is a vision-language model the engine feeds
// images to (docs/vision.md): config.json's `architectures` names one of the supported classes.
// The data pipeline formats image rows for such a folder, the trainer refuses what it cannot train
// yet; both ask here.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace surogate::vision {

// The architecture (e.g. "Qwen2_5_VLForConditionalGeneration") when model_dir/config.json names a
// supported vision-language class; nullopt for any other folder, or one without a readable
// config.json (text models, tokenizer-only folders).
std::optional<std::string> vision_language_architecture(const std::filesystem::path& model_dir);

}  // namespace surogate::vision
