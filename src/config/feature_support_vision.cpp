// See feature_support_vision.h. Vision-language models (docs/vision.md): their image data is read,
// tokenized, cached and previewed; training them is not wired yet.
#include "config/feature_support_vision.h"

#include <fmt/format.h>

namespace surogate {

void add_vision_rows(std::vector<SupportRow>& rows) {
  // The whole Qwen2.5-VL graph exists (models/vision_model.h) but not its session, trainer and
  // outputs; one row, which the slice that wires them deletes (or narrows to what stays missing).
  rows.push_back({"vision-language model training", SupportStage::Model, SupportBackend::Any,
                  [](const Config&, const RunShape& shape) { return shape.vision_language; },
                  [](const Config& c, const RunShape& shape) {
                    return fmt::format("{}: model '{}' is a vision-language model ({}): training it is not implemented "
                                       "yet in this version of Surogate. Its image datasets can be checked with "
                                       "`surogate preview` and `surogate tokenize` (max_pixels applies); "
                                       "docs/vision.md lists what is missing",
                                       c.sources.of("model"), c.model.name_or_path, shape.model_type);
                  }});
}

}  // namespace surogate
