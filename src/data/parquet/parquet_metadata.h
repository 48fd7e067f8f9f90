// Parquet's file footer (FileMetaData) and page headers, decoded from the Thrift compact
// protocol into plain structs. Only the fields the reader uses are kept; everything else is
// skipped so files from newer writers still open.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace surogate::data::parquet {

enum class PhysicalType : int32_t {
  Boolean = 0, Int32 = 1, Int64 = 2, Int96 = 3, Float = 4, Double = 5, ByteArray = 6, FixedLenByteArray = 7,
};
enum class Repetition : int32_t { Required = 0, Optional = 1, Repeated = 2 };
enum class Codec : int32_t { Uncompressed = 0, Snappy = 1, Gzip = 2, Lzo = 3, Brotli = 4, Lz4 = 5, Zstd = 6, Lz4Raw = 7 };
enum class Encoding : int32_t {
  Plain = 0, PlainDictionary = 2, Rle = 3, BitPacked = 4, DeltaBinaryPacked = 5,
  DeltaLengthByteArray = 6, DeltaByteArray = 7, RleDictionary = 8, ByteStreamSplit = 9,
};
enum class PageType : int32_t { DataPage = 0, IndexPage = 1, DictionaryPage = 2, DataPageV2 = 3 };

// The group annotations that change how a nested column reads as JSON.
enum class GroupKind { Plain, List, Map };

struct SchemaElement {
  std::string name;
  std::optional<PhysicalType> type;  // absent for groups
  Repetition repetition = Repetition::Required;
  int32_t num_children = 0;
  GroupKind group_kind = GroupKind::Plain;
};

struct ColumnChunkMeta {
  PhysicalType type = PhysicalType::ByteArray;
  std::vector<std::string> path;
  Codec codec = Codec::Uncompressed;
  int64_t num_values = 0;
  int64_t total_compressed_size = 0;
  int64_t data_page_offset = 0;
  std::optional<int64_t> dictionary_page_offset;
  bool external_file = false;  // file_path set: the chunk lives in another file
};

struct RowGroupMeta {
  std::vector<ColumnChunkMeta> columns;
  int64_t num_rows = 0;
};

struct FileMetaData {
  std::vector<SchemaElement> schema;  // depth-first, schema[0] is the root
  int64_t num_rows = 0;
  std::vector<RowGroupMeta> row_groups;
};

struct PageHeader {
  PageType type = PageType::DataPage;
  int32_t uncompressed_size = 0;
  int32_t compressed_size = 0;
  int32_t num_values = 0;
  Encoding encoding = Encoding::Plain;
  // Data page v2 only.
  int32_t num_nulls = 0;
  int32_t definition_levels_bytes = 0;
  int32_t repetition_levels_bytes = 0;
  bool is_compressed = true;
};

// Both throw ThriftError on malformed input. parse_page_header reports the header's byte length.
FileMetaData parse_file_metadata(const uint8_t* data, size_t size);
PageHeader parse_page_header(const uint8_t* data, size_t size, size_t* header_bytes);

const char* codec_name(Codec codec);
const char* encoding_name(Encoding encoding);
const char* physical_type_name(PhysicalType type);

}  // namespace surogate::data::parquet
