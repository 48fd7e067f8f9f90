// libFuzzer target: one line of a user's JSONL dataset, formatted as a training document by
// data::Formatter (text / instruction / conversation / auto, with the built-in Qwen chat template,
// agent templates and loss_scale strategies; dataset_row_case.h says how the first byte picks
// them). The only acceptable outcomes are a formatted (or deliberately dropped, with a reason) row
// whose labels and weights line up with its tokens, or a UserError; anything else (crash,
// sanitizer report, nlohmann::json type error or other exception escaping) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "dataset_row_case.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto formatted = surogate::fuzz::format_dataset_row_case(std::string_view(reinterpret_cast<const char*>(data), size));
    if (!formatted) return 0;
    if (formatted->sample) {
      const auto& sample = *formatted->sample;
      const bool consistent = sample.labels.size() == sample.input_ids.size() &&
                              (sample.weights.empty() || sample.weights.size() == sample.input_ids.size());
      if (!consistent) std::abort();
    } else if (formatted->drop_reason.empty()) {
      std::abort();  // a dropped row must say why
    }
  } catch (const surogate::UserError&) {
    // Rejected cleanly: fine.
  }
  return 0;
}
