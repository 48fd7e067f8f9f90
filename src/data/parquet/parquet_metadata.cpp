// Field numbers follow parquet-format's parquet.thrift; see parquet_metadata.h.
#include "data/parquet/parquet_metadata.h"

#include "data/parquet/thrift_compact.h"

namespace surogate::data::parquet {
namespace {

// ConvertedType LIST = 3, MAP = 1, MAP_KEY_VALUE = 2; LogicalType union: MAP = 2, LIST = 3.
GroupKind read_logical_type(ThriftReader& reader) {
  GroupKind kind = GroupKind::Plain;
  reader.read_struct([&](int16_t id, ThriftType type) {
    if (id == 2) kind = GroupKind::Map;
    if (id == 3) kind = GroupKind::List;
    reader.skip(type);
  });
  return kind;
}

SchemaElement read_schema_element(ThriftReader& reader) {
  SchemaElement element;
  std::optional<GroupKind> logical;
  reader.read_struct([&](int16_t id, ThriftType type) {
    switch (id) {
      case 1: element.type = static_cast<PhysicalType>(reader.read_i32()); break;
      case 3: element.repetition = static_cast<Repetition>(reader.read_i32()); break;
      case 4: element.name = reader.read_string(); break;
      case 5: element.num_children = reader.read_i32(); break;
      case 6: {
        int32_t converted = reader.read_i32();
        if (converted == 3) element.group_kind = GroupKind::List;
        if (converted == 1 || converted == 2) element.group_kind = GroupKind::Map;
        break;
      }
      case 10: logical = read_logical_type(reader); break;
      default: reader.skip(type);
    }
  });
  if (logical && *logical != GroupKind::Plain) element.group_kind = *logical;
  return element;
}

ColumnChunkMeta read_column_metadata(ThriftReader& reader) {
  ColumnChunkMeta meta;
  reader.read_struct([&](int16_t id, ThriftType type) {
    switch (id) {
      case 1: meta.type = static_cast<PhysicalType>(reader.read_i32()); break;
      case 3: reader.read_list([&](ThriftType) { meta.path.push_back(reader.read_string()); }); break;
      case 4: meta.codec = static_cast<Codec>(reader.read_i32()); break;
      case 5: meta.num_values = reader.read_i64(); break;
      case 7: meta.total_compressed_size = reader.read_i64(); break;
      case 9: meta.data_page_offset = reader.read_i64(); break;
      case 11: meta.dictionary_page_offset = reader.read_i64(); break;
      default: reader.skip(type);
    }
  });
  return meta;
}

ColumnChunkMeta read_column_chunk(ThriftReader& reader) {
  ColumnChunkMeta meta;
  bool external = false;
  reader.read_struct([&](int16_t id, ThriftType type) {
    if (id == 1) {
      external = !reader.read_string().empty();
    } else if (id == 3) {
      meta = read_column_metadata(reader);
    } else {
      reader.skip(type);
    }
  });
  meta.external_file = external;
  return meta;
}

RowGroupMeta read_row_group(ThriftReader& reader) {
  RowGroupMeta group;
  reader.read_struct([&](int16_t id, ThriftType type) {
    if (id == 1) {
      reader.read_list([&](ThriftType) { group.columns.push_back(read_column_chunk(reader)); });
    } else if (id == 3) {
      group.num_rows = reader.read_i64();
    } else {
      reader.skip(type);
    }
  });
  return group;
}

}  // namespace

FileMetaData parse_file_metadata(const uint8_t* data, size_t size) {
  ThriftReader reader(data, size);
  FileMetaData meta;
  reader.read_struct([&](int16_t id, ThriftType type) {
    switch (id) {
      case 2: reader.read_list([&](ThriftType) { meta.schema.push_back(read_schema_element(reader)); }); break;
      case 3: meta.num_rows = reader.read_i64(); break;
      case 4: reader.read_list([&](ThriftType) { meta.row_groups.push_back(read_row_group(reader)); }); break;
      default: reader.skip(type);
    }
  });
  return meta;
}

PageHeader parse_page_header(const uint8_t* data, size_t size, size_t* header_bytes) {
  ThriftReader reader(data, size);
  PageHeader header;
  reader.read_struct([&](int16_t id, ThriftType type) {
    switch (id) {
      case 1: header.type = static_cast<PageType>(reader.read_i32()); break;
      case 2: header.uncompressed_size = reader.read_i32(); break;
      case 3: header.compressed_size = reader.read_i32(); break;
      case 5:  // DataPageHeader
        reader.read_struct([&](int16_t field, ThriftType field_type) {
          if (field == 1) header.num_values = reader.read_i32();
          else if (field == 2) header.encoding = static_cast<Encoding>(reader.read_i32());
          else reader.skip(field_type);
        });
        break;
      case 7:  // DictionaryPageHeader
        reader.read_struct([&](int16_t field, ThriftType field_type) {
          if (field == 1) header.num_values = reader.read_i32();
          else if (field == 2) header.encoding = static_cast<Encoding>(reader.read_i32());
          else reader.skip(field_type);
        });
        break;
      case 8:  // DataPageHeaderV2
        reader.read_struct([&](int16_t field, ThriftType field_type) {
          switch (field) {
            case 1: header.num_values = reader.read_i32(); break;
            case 2: header.num_nulls = reader.read_i32(); break;
            case 4: header.encoding = static_cast<Encoding>(reader.read_i32()); break;
            case 5: header.definition_levels_bytes = reader.read_i32(); break;
            case 6: header.repetition_levels_bytes = reader.read_i32(); break;
            case 7: header.is_compressed = reader.read_bool(field_type); break;
            default: reader.skip(field_type);
          }
        });
        break;
      default: reader.skip(type);
    }
  });
  *header_bytes = reader.position();
  return header;
}

const char* codec_name(Codec codec) {
  switch (codec) {
    case Codec::Uncompressed: return "UNCOMPRESSED";
    case Codec::Snappy: return "SNAPPY";
    case Codec::Gzip: return "GZIP";
    case Codec::Lzo: return "LZO";
    case Codec::Brotli: return "BROTLI";
    case Codec::Lz4: return "LZ4";
    case Codec::Zstd: return "ZSTD";
    case Codec::Lz4Raw: return "LZ4_RAW";
  }
  return "unknown codec";
}

const char* encoding_name(Encoding encoding) {
  switch (encoding) {
    case Encoding::Plain: return "PLAIN";
    case Encoding::PlainDictionary: return "PLAIN_DICTIONARY";
    case Encoding::Rle: return "RLE";
    case Encoding::BitPacked: return "BIT_PACKED";
    case Encoding::DeltaBinaryPacked: return "DELTA_BINARY_PACKED";
    case Encoding::DeltaLengthByteArray: return "DELTA_LENGTH_BYTE_ARRAY";
    case Encoding::DeltaByteArray: return "DELTA_BYTE_ARRAY";
    case Encoding::RleDictionary: return "RLE_DICTIONARY";
    case Encoding::ByteStreamSplit: return "BYTE_STREAM_SPLIT";
  }
  return "unknown encoding";
}

const char* physical_type_name(PhysicalType type) {
  switch (type) {
    case PhysicalType::Boolean: return "BOOLEAN";
    case PhysicalType::Int32: return "INT32";
    case PhysicalType::Int64: return "INT64";
    case PhysicalType::Int96: return "INT96";
    case PhysicalType::Float: return "FLOAT";
    case PhysicalType::Double: return "DOUBLE";
    case PhysicalType::ByteArray: return "BYTE_ARRAY";
    case PhysicalType::FixedLenByteArray: return "FIXED_LEN_BYTE_ARRAY";
  }
  return "unknown type";
}

}  // namespace surogate::data::parquet
