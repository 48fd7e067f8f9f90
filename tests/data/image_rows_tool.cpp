// Driven by tests/python/test_image_rows.py, which compares its output with the live transformers
// Qwen2VLProcessor and get_rope_index on rows it makes: formats each row of a JSONL file through
// data/image_rows.h and prints one JSON line per row: {"text", "input_ids", "labels", "grid_thw",
// "position_ids" [3][tokens], "tokenization_differs"}, or {"error": message} for a row refused
// with a UserError.
// Usage: image_rows_tool TOKENIZER_DIR TEMPLATE_FILE PREPROCESSOR_DIR ROWS_JSONL
#include <iostream>

#include "core/error.h"
#include "qwen2_vl_rows.h"

int main(int argc, char** argv) {
  using namespace surogate::data;
  if (argc != 5) {
    std::cerr << "usage: image_rows_tool TOKENIZER_DIR TEMPLATE_FILE PREPROCESSOR_DIR ROWS_JSONL\n";
    return 64;
  }
  const std::filesystem::path rows_file = argv[4];
  auto formatter = testing::qwen2_vl_formatter(argv[1], argv[2], argv[3], rows_file.parent_path());
  std::istringstream lines(testing::read_text(rows_file));
  std::string line;
  uint64_t number = 0;
  while (std::getline(lines, line)) {
    nlohmann::json result;
    try {
      auto sample = formatter.format(Row{RowValue::parse(line), {rows_file.string(), ++number, true}});
      if (!sample) {
        result["error"] = "dropped";
      } else {
        const size_t tokens = sample->sample.input_ids.size();
        nlohmann::json positions = nlohmann::json::array();
        for (size_t axis = 0; axis < 3; ++axis) {
          positions.push_back(std::vector<int32_t>(sample->position_ids.begin() + axis * tokens,
                                                   sample->position_ids.begin() + (axis + 1) * tokens));
        }
        result = {{"text", sample->text},           {"input_ids", sample->sample.input_ids},
                  {"labels", sample->sample.labels}, {"grid_thw", sample->images.grid_thw},
                  {"position_ids", positions}, {"tokenization_differs", sample->tokenization_differs}};
      }
    } catch (const surogate::UserError& error) {
      result = {{"error", error.what()}};
    }
    std::cout << result.dump() << "\n";
  }
  return 0;
}
