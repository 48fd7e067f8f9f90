// Dataset rows as JSON objects, read one at a time from JSONL, JSON, plain-text and Parquet
// files (and folders of them). Every row remembers where it came from so that a bad row can be
// reported as "file:line" (JSONL, JSON) or "file row N" (Parquet), 1-based.
//
// File kinds, by extension:
//   .jsonl / .ndjson  one JSON object per line; blank lines are skipped.
//   .json             an array of objects, or an object of equal-length column arrays
//                     ({"text": [..], "id": [..]}); a .json file that is really JSON Lines
//                     (one object per line) is read as such.
//   .txt              the whole file is ONE row {"text": <file contents>} (a document per file,
//                     the usual layout of pre-training corpora; split long documents with
//                     truncation_strategy: split).
//   .parquet          every row of every row group, streamed one row group at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace surogate::data {

struct RowOrigin {
  std::string file;
  uint64_t number = 0;  // 1-based line (text formats) or row (Parquet)
  bool is_line = true;
  // "data/train.jsonl:12" or "data/train.parquet row 12".
  std::string describe() const;
};

// Row values keep their keys in file order: tool schemas and call arguments reach chat templates
// (`tools | tojson`), which must print keys in the order the dataset wrote them, as Python does.
using RowValue = nlohmann::ordered_json;

struct Row {
  RowValue value;  // always a JSON object
  RowOrigin origin;
};

class RowReader {
public:
  virtual ~RowReader() = default;
  // Fills `row` and returns true, or returns false at the end. Throws UserError on bad data.
  virtual bool next(Row& row) = 0;
};

// True for the extensions listed above.
bool is_supported_data_file(const std::filesystem::path& path);
// Reads the files one after another, in the order given.
std::unique_ptr<RowReader> open_row_reader(std::vector<std::filesystem::path> files);

}  // namespace surogate::data
