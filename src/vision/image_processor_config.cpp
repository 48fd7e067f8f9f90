// preprocessor_config.json → ImageProcessorConfig, with transformers' precedence: top-level
// min_pixels / max_pixels override size.shortest_edge / size.longest_edge.
#include <fstream>
#include <set>

#include "core/error.h"
#include "io/json_fields.h"
#include "vision/image_processor.h"

namespace surogate::vision {
namespace {

std::array<double, 3> channel_values(const nlohmann::json& json, const io::JsonFields& fields, const char* key,
                                     std::array<double, 3> fallback) {
  if (!fields.has(key)) return fallback;
  const nlohmann::json& value = json.at(key);
  if (value.is_number()) {
    const double number = value.get<double>();
    return {number, number, number};
  }
  if (!value.is_array() || value.size() != 3) fields.fail(key, "must be a number or a list of 3 numbers (R, G, B)");
  std::array<double, 3> out{};
  for (size_t c = 0; c < 3; ++c) {
    if (!value[c].is_number()) fields.fail(key, "must be a list of 3 numbers");
    out[c] = value[c].get<double>();
  }
  return out;
}

void require_flag(const io::JsonFields& fields, const char* key, bool expected, const char* why) {
  if (fields.boolean(key).value_or(expected) != expected) fields.fail(key, why);
}

}  // namespace

ImageProcessorConfig ImageProcessorConfig::from_json(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object()) fail_user("{}: must be a JSON object", source);
  const io::JsonFields fields(json, source);
  static const std::set<std::string> kTypes{"Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast",
                                            "Qwen2VLImageProcessorPil"};
  if (const auto type = fields.text("image_processor_type"); type && kTypes.count(*type) == 0) {
    fields.fail("image_processor_type", fmt::format("is {}; only the Qwen2-VL image processor (Qwen2-VL, Qwen2.5-VL, "
                                                    "Qwen3-VL) is reproduced",
                                                    *type));
  }
  require_flag(fields, "do_resize", true, "must be true: the Qwen-VL processor's patches need the resize");
  require_flag(fields, "do_convert_rgb", true, "must be true: images are always converted to RGB");
  if (fields.integer("resample").value_or(3) != 3) fields.fail("resample", "must be 3 (bicubic), the only filter reproduced");
  ImageProcessorConfig config;
  if (fields.has("size")) {
    const io::JsonFields size(json.at("size"), source, "size.");
    if (!json.at("size").is_object()) fields.fail("size", "must be an object {shortest_edge, longest_edge}");
    config.min_pixels = size.positive_integer_or("shortest_edge", config.min_pixels);
    config.max_pixels = size.positive_integer_or("longest_edge", config.max_pixels);
  }
  config.min_pixels = fields.positive_integer_or("min_pixels", config.min_pixels);
  config.max_pixels = fields.positive_integer_or("max_pixels", config.max_pixels);
  if (config.min_pixels > config.max_pixels) {
    fail_user("{}: min_pixels ({}) is above max_pixels ({})", source, config.min_pixels, config.max_pixels);
  }
  config.patch_size = static_cast<int>(fields.positive_integer_or("patch_size", config.patch_size));
  config.temporal_patch_size =
      static_cast<int>(fields.positive_integer_or("temporal_patch_size", config.temporal_patch_size));
  config.merge_size = static_cast<int>(fields.positive_integer_or("merge_size", config.merge_size));
  config.do_rescale = fields.boolean("do_rescale").value_or(config.do_rescale);
  config.rescale_factor = fields.positive_number_or("rescale_factor", config.rescale_factor);
  config.do_normalize = fields.boolean("do_normalize").value_or(config.do_normalize);
  config.image_mean = channel_values(json, fields, "image_mean", config.image_mean);
  config.image_std = channel_values(json, fields, "image_std", config.image_std);
  return config;
}

ImageProcessorConfig ImageProcessorConfig::from_folder(const std::filesystem::path& model_dir) {
  const std::filesystem::path file = model_dir / "preprocessor_config.json";
  std::ifstream stream(file);
  if (!stream) fail_user("{}: not found; a vision-language model folder needs its image processor's config", file.string());
  nlohmann::json json = nlohmann::json::parse(stream, nullptr, false);
  if (json.is_discarded()) fail_user("{}: not valid JSON", file.string());
  return from_json(json, file.string());
}

}  // namespace surogate::vision
