// A Parquet file read by Surogate's own code (Debian 12 ships no Arrow C++). Rows come out as
// JSON objects, one row group at a time, so a large file streams. Nested columns are assembled
// from repetition / definition levels; LIST-annotated groups become JSON arrays and MAP groups
// JSON objects, so pyarrow's list<struct<role, content>> reads as [{"role":..,"content":..}].
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/parquet/parquet_metadata.h"

namespace surogate::data::parquet {

class ParquetFile {
public:
  // Reads and validates the footer; throws UserError naming the file on any problem.
  static ParquetFile open(const std::filesystem::path& path);

  int64_t num_rows() const { return metadata_.num_rows; }
  size_t num_row_groups() const { return metadata_.row_groups.size(); }
  std::vector<std::string> column_names() const;  // top-level field names
  // All rows of one row group, each a JSON object keyed by top-level field name.
  std::vector<nlohmann::json> read_row_group(size_t index) const;

private:
  std::filesystem::path path_;
  uint64_t file_size_ = 0;
  FileMetaData metadata_;
};

}  // namespace surogate::data::parquet
