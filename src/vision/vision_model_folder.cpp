// See vision_model_folder.h.
#include "vision/vision_model_folder.h"

#include <array>
#include <fstream>
#include <string_view>

#include <nlohmann/json.hpp>

namespace surogate::vision {
namespace {

constexpr std::array<std::string_view, 2> kVisionLanguageArchitectures{"Qwen2_5_VLForConditionalGeneration",
                                                                       "Qwen3VLForConditionalGeneration"};

}  // namespace

std::optional<std::string> vision_language_architecture(const std::filesystem::path& model_dir) {
  std::ifstream stream(model_dir / "config.json");
  if (!stream) return std::nullopt;
  const nlohmann::json config = nlohmann::json::parse(stream, nullptr, false);
  if (!config.is_object()) return std::nullopt;
  const auto architectures = config.find("architectures");
  if (architectures == config.end() || !architectures->is_array()) return std::nullopt;
  for (const auto& name : *architectures) {
    if (!name.is_string()) continue;
    for (std::string_view known : kVisionLanguageArchitectures) {
      if (name.get<std::string>() == known) return std::string(known);
    }
  }
  return std::nullopt;
}

}  // namespace surogate::vision
