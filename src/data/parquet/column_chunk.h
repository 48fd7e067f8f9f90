// Decoding one column chunk of one row group: its pages (dictionary, data v1, data v2) are
// decompressed (UNCOMPRESSED, SNAPPY, GZIP, ZSTD) and decoded (PLAIN, PLAIN_DICTIONARY /
// RLE_DICTIONARY, RLE / bit-packed hybrid levels) into repetition levels, definition levels and
// the defined values as JSON. Record assembly (nesting) happens in parquet_file.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/parquet/parquet_metadata.h"

namespace surogate::data::parquet {

struct ColumnLevels {
  std::vector<int16_t> repetition;  // one per value slot (empty when max_repetition == 0)
  std::vector<int16_t> definition;  // one per value slot (empty when max_definition == 0)
  std::vector<nlohmann::json> values;  // one per slot whose definition level is the maximum
  size_t slots = 0;
};

struct ColumnDescription {
  std::string file;     // for error messages
  std::string dotted_path;
  int16_t max_repetition = 0;
  int16_t max_definition = 0;
};

// `chunk_bytes` holds the file bytes of the chunk, starting at the first page of the chunk.
// Throws UserError naming the file, column and unsupported feature or corruption.
ColumnLevels decode_column_chunk(const ColumnChunkMeta& meta, const ColumnDescription& column,
                                 const uint8_t* chunk_bytes, size_t chunk_size);

}  // namespace surogate::data::parquet
