// The per-format row readers behind open_row_reader(); see row_reader.h for the file kinds.
#include "data/row_reader.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "data/parquet/parquet_file.h"

namespace surogate::data {
namespace {

using json = RowValue;

std::string lower_extension(const std::filesystem::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(), [](unsigned char c) { return std::tolower(c); });
  return extension;
}

std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) fail_user("cannot open dataset file {}: check that it exists and is readable", path.string());
  std::ostringstream buffer;
  buffer << stream.rdbuf();
  return buffer.str();
}

std::string short_parse_error(const json::parse_error& error) {
  // nlohmann's message starts with "[json.exception.parse_error.101] parse error at line 1, ...".
  std::string message = error.what();
  size_t start = message.find("] ");
  return start == std::string::npos ? message : message.substr(start + 2);
}

class JsonLinesReader : public RowReader {
public:
  explicit JsonLinesReader(std::filesystem::path path) : path_(std::move(path)), stream_(path_, std::ios::binary) {
    if (!stream_) fail_user("cannot open dataset file {}: check that it exists and is readable", path_.string());
  }
  bool next(Row& row) override {
    std::string line;
    while (std::getline(stream_, line)) {
      ++line_number_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      row.origin = RowOrigin{path_.string(), line_number_, true};
      try {
        row.value = json::parse(line);
      } catch (const json::parse_error& error) {
        fail_user("{}: malformed JSON ({}); fix or remove this line", row.origin.describe(), short_parse_error(error));
      }
      if (!row.value.is_object()) {
        fail_user("{}: expected a JSON object per line, got a {}; each line must be one object like "
                  "{{\"text\": \"...\"}}",
                  row.origin.describe(), row.value.type_name());
      }
      return true;
    }
    return false;
  }

private:
  std::filesystem::path path_;
  std::ifstream stream_;
  uint64_t line_number_ = 0;
};

// Rows already in memory (JSON and text files), with their origins.
class MemoryReader : public RowReader {
public:
  explicit MemoryReader(std::vector<Row> rows) : rows_(std::move(rows)) {}
  bool next(Row& row) override {
    if (cursor_ >= rows_.size()) return false;
    row = std::move(rows_[cursor_++]);
    return true;
  }

private:
  std::vector<Row> rows_;
  size_t cursor_ = 0;
};

// Line number (1-based) of each element start is found by parsing with a callback.
std::vector<Row> read_json_array_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::string text = read_whole_file(path);
  json document;
  try {
    document = json::parse(text);
  } catch (const json::parse_error& error) {
    // Many hub datasets name JSON Lines files ".json": accept them when the first line is an object.
    size_t end = text.find('\n');
    if (end != std::string::npos && end + 1 < text.size()) {
      json first = json::parse(text.substr(0, end), nullptr, false);
      if (first.is_object()) {
        std::vector<Row> rows;
        JsonLinesReader lines(path);
        Row row;
        while (lines.next(row)) rows.push_back(std::move(row));
        return rows;
      }
    }
    fail_user("{}: malformed JSON ({}); the file must hold an array of objects, an object of columns, or one "
              "object per line",
              name, short_parse_error(error));
  }
  // Line (1-based) where each element of a top-level array starts, for error messages.
  std::vector<uint64_t> element_lines;
  {
    uint64_t line = 1;
    int depth = 0;
    bool in_string = false;
    bool escaped = false;
    bool expect_element = false;
    for (char c : text) {
      if (in_string) {
        if (c == '\n') ++line;
        if (escaped) escaped = false;
        else if (c == '\\') escaped = true;
        else if (c == '"') in_string = false;
        continue;
      }
      if (c == '\n') ++line;
      bool blank = c == ' ' || c == '\n' || c == '\r' || c == '\t';
      if (expect_element && !blank && c != ']') {
        element_lines.push_back(line);
        expect_element = false;
      }
      if (c == '"') in_string = true;
      if (c == '{' || c == '[') {
        ++depth;
        if (depth == 1 && c == '[') expect_element = true;
      } else if (c == '}' || c == ']') {
        --depth;
      } else if (c == ',' && depth == 1) {
        expect_element = true;
      }
    }
  }
  std::vector<Row> rows;
  if (document.is_array()) {
    size_t index = 0;
    for (auto& element : document) {
      uint64_t line = index < element_lines.size() ? element_lines[index] : 1;
      RowOrigin origin{name, line, true};
      if (!element.is_object()) {
        fail_user("{}: element {} of the array is a {}, expected an object like {{\"text\": \"...\"}}",
                  origin.describe(), index + 1, element.type_name());
      }
      rows.push_back(Row{std::move(element), origin});
      ++index;
    }
    return rows;
  }
  if (document.is_object()) {
    // An object of columns: {"col": [v0, v1, ...], ...} with equal lengths.
    size_t length = 0;
    bool first = true;
    for (auto& [key, column] : document.items()) {
      if (!column.is_array()) {
        fail_user("{}: the file is an object, so it must map column names to arrays, but column '{}' is a {}; "
                  "use JSON Lines or an array of objects instead",
                  name, key, column.type_name());
      }
      if (!first && column.size() != length) {
        fail_user("{}: column '{}' has {} values but the previous columns have {}; all columns need the same length",
                  name, key, column.size(), length);
      }
      length = column.size();
      first = false;
    }
    for (size_t i = 0; i < length; ++i) {
      json row = json::object();
      for (auto& [key, column] : document.items()) row[key] = std::move(column[i]);
      rows.push_back(Row{std::move(row), RowOrigin{name, i + 1, false}});
    }
    return rows;
  }
  fail_user("{}: the file holds a JSON {}, expected an array of objects or an object of columns", name,
            document.type_name());
}

class ParquetReader : public RowReader {
public:
  explicit ParquetReader(const std::filesystem::path& path) : file_(parquet::ParquetFile::open(path)), name_(path.string()) {}
  bool next(Row& row) override {
    while (cursor_ >= rows_.size()) {
      if (next_group_ >= file_.num_row_groups()) return false;
      rows_.clear();
      for (auto& value : file_.read_row_group(next_group_++)) rows_.emplace_back(std::move(value));
      cursor_ = 0;
    }
    row.value = std::move(rows_[cursor_++]);
    row.origin = RowOrigin{name_, ++row_number_, false};
    return true;
  }

private:
  parquet::ParquetFile file_;
  std::string name_;
  std::vector<json> rows_;
  size_t cursor_ = 0;
  size_t next_group_ = 0;
  uint64_t row_number_ = 0;
};

class MultiFileReader : public RowReader {
public:
  explicit MultiFileReader(std::vector<std::filesystem::path> files) : files_(std::move(files)) {}
  bool next(Row& row) override {
    while (true) {
      if (!current_) {
        if (next_file_ >= files_.size()) return false;
        current_ = open_one(files_[next_file_++]);
      }
      if (current_->next(row)) return true;
      current_.reset();
    }
  }

private:
  static std::unique_ptr<RowReader> open_one(const std::filesystem::path& path) {
    std::string extension = lower_extension(path);
    if (extension == ".jsonl" || extension == ".ndjson") return std::make_unique<JsonLinesReader>(path);
    if (extension == ".json") return std::make_unique<MemoryReader>(read_json_array_file(path));
    if (extension == ".parquet") return std::make_unique<ParquetReader>(path);
    if (extension == ".txt") {
      std::vector<Row> rows;
      rows.push_back(Row{json{{"text", read_whole_file(path)}}, RowOrigin{path.string(), 1, true}});
      return std::make_unique<MemoryReader>(std::move(rows));
    }
    fail_user("dataset file {} has an unsupported type '{}': use .jsonl, .json, .txt or .parquet", path.string(),
              extension);
  }

  std::vector<std::filesystem::path> files_;
  size_t next_file_ = 0;
  std::unique_ptr<RowReader> current_;
};

}  // namespace

std::string RowOrigin::describe() const {
  return is_line ? fmt::format("{}:{}", file, number) : fmt::format("{} row {}", file, number);
}

bool is_supported_data_file(const std::filesystem::path& path) {
  std::string extension = lower_extension(path);
  return extension == ".jsonl" || extension == ".ndjson" || extension == ".json" || extension == ".txt" ||
         extension == ".parquet";
}

std::unique_ptr<RowReader> open_row_reader(std::vector<std::filesystem::path> files) {
  return std::make_unique<MultiFileReader>(std::move(files));
}

}  // namespace surogate::data
