// Page-level decoding for one column chunk; see column_chunk.h.
#include "data/parquet/column_chunk.h"

#include <cstring>

#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include "core/error.h"
#include "data/parquet/thrift_compact.h"

namespace surogate::data::parquet {
namespace {

[[noreturn]] void corrupt(const ColumnDescription& column, const std::string& what) {
  fail_user("Parquet file {}: column '{}': {}; the file is damaged or not written by a standard "
            "Parquet writer: rewrite it (e.g. with pyarrow.parquet.write_table)",
            column.file, column.dotted_path, what);
}

[[noreturn]] void unsupported(const ColumnDescription& column, const std::string& feature) {
  fail_user("Parquet file {}: column '{}' uses {}, which Surogate's Parquet reader does not "
            "support; rewrite the file with pyarrow using compression SNAPPY, GZIP, ZSTD or none "
            "and the default encodings",
            column.file, column.dotted_path, feature);
}

std::vector<uint8_t> decompress(Codec codec, const uint8_t* data, size_t size, size_t expected,
                                const ColumnDescription& column) {
  std::vector<uint8_t> out(expected);
  switch (codec) {
    case Codec::Uncompressed:
      if (size != expected) corrupt(column, "uncompressed page size mismatch");
      if (size > 0) std::memcpy(out.data(), data, size);
      return out;
    case Codec::Snappy: {
      size_t length = 0;
      if (!snappy::GetUncompressedLength(reinterpret_cast<const char*>(data), size, &length) ||
          length != expected ||
          !snappy::RawUncompress(reinterpret_cast<const char*>(data), size, reinterpret_cast<char*>(out.data()))) {
        corrupt(column, "invalid SNAPPY page");
      }
      return out;
    }
    case Codec::Zstd: {
      size_t written = ZSTD_decompress(out.data(), expected, data, size);
      if (ZSTD_isError(written) || written != expected) corrupt(column, "invalid ZSTD page");
      return out;
    }
    case Codec::Gzip: {
      z_stream stream{};
      if (inflateInit2(&stream, 15 + 32) != Z_OK) corrupt(column, "cannot start GZIP decoding");
      stream.next_in = const_cast<Bytef*>(data);
      stream.avail_in = static_cast<uInt>(size);
      stream.next_out = out.data();
      stream.avail_out = static_cast<uInt>(expected);
      int status = inflate(&stream, Z_FINISH);
      size_t written = stream.total_out;
      inflateEnd(&stream);
      if ((status != Z_STREAM_END && status != Z_OK && status != Z_BUF_ERROR) || written != expected) {
        corrupt(column, "invalid GZIP page");
      }
      return out;
    }
    default:
      unsupported(column, std::string("compression codec ") + codec_name(codec));
  }
}

int bit_width_of(int max_value) {
  int width = 0;
  while ((1 << width) <= max_value) ++width;
  return width;
}

// The RLE / bit-packed hybrid encoding of levels and dictionary indices.
class HybridDecoder {
public:
  HybridDecoder(const uint8_t* data, size_t size, int bit_width, const ColumnDescription& column)
      : data_(data), size_(size), bit_width_(bit_width), column_(column) {
    if (bit_width < 0 || bit_width > 32) corrupt(column, "bit width out of range");
  }

  void decode(size_t count, std::vector<uint32_t>& out) {
    out.reserve(out.size() + count);
    while (count > 0) {
      if (run_remaining_ == 0 && packed_remaining_ == 0) next_run();
      if (run_remaining_ > 0) {
        size_t take = std::min(count, run_remaining_);
        out.insert(out.end(), take, run_value_);
        run_remaining_ -= take;
        count -= take;
      } else {
        out.push_back(read_packed());
        --packed_remaining_;
        --count;
      }
    }
  }

private:
  uint8_t byte() {
    if (position_ >= size_) corrupt(column_, "level or index data ends early");
    return data_[position_++];
  }
  void next_run() {
    uint64_t header = 0;
    for (int shift = 0;; shift += 7) {
      if (shift > 63) corrupt(column_, "bad run header");
      uint8_t b = byte();
      header |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) break;
    }
    if (header & 1) {
      packed_remaining_ = static_cast<size_t>(header >> 1) * 8;
      if (packed_remaining_ == 0) corrupt(column_, "empty bit-packed run");
      bit_offset_ = position_ * 8;
      size_t bytes = (packed_remaining_ * bit_width_ + 7) / 8;
      if (bytes > size_ - position_) {
        // Writers may end the last group early; values past the end are never read.
        bytes = size_ - position_;
      }
      packed_end_ = position_ + bytes;
      position_ = packed_end_;
    } else {
      run_remaining_ = static_cast<size_t>(header >> 1);
      if (run_remaining_ == 0) corrupt(column_, "empty RLE run");
      uint32_t value = 0;
      for (int i = 0; i < (bit_width_ + 7) / 8; ++i) value |= static_cast<uint32_t>(byte()) << (8 * i);
      run_value_ = value;
    }
  }
  uint32_t read_packed() {
    uint64_t value = 0;
    for (int bit = 0; bit < bit_width_; ++bit) {
      size_t index = bit_offset_ + bit;
      if (index / 8 >= packed_end_) corrupt(column_, "bit-packed run ends early");
      value |= static_cast<uint64_t>((data_[index / 8] >> (index % 8)) & 1) << bit;
    }
    bit_offset_ += bit_width_;
    return static_cast<uint32_t>(value);
  }

  const uint8_t* data_;
  size_t size_;
  int bit_width_;
  const ColumnDescription& column_;
  size_t position_ = 0;
  size_t run_remaining_ = 0;
  uint32_t run_value_ = 0;
  size_t packed_remaining_ = 0;
  size_t bit_offset_ = 0;
  size_t packed_end_ = 0;
};

void decode_levels(const uint8_t* data, size_t size, int max_level, size_t count, std::vector<int16_t>& out,
                   const ColumnDescription& column) {
  std::vector<uint32_t> raw;
  HybridDecoder decoder(data, size, bit_width_of(max_level), column);
  decoder.decode(count, raw);
  for (uint32_t level : raw) {
    if (level > static_cast<uint32_t>(max_level)) corrupt(column, "level above the column's maximum");
    out.push_back(static_cast<int16_t>(level));
  }
}

// Reads `count` PLAIN values (BYTE_ARRAY as text; formatters validate UTF-8) of `type` from [data, data+size).
void decode_plain(PhysicalType type, const uint8_t* data, size_t size, size_t count,
                  std::vector<nlohmann::json>& out, const ColumnDescription& column) {
  size_t position = 0;
  auto need = [&](size_t bytes) {
    if (bytes > size - position) corrupt(column, "value data ends early");
  };
  for (size_t i = 0; i < count; ++i) {
    switch (type) {
      case PhysicalType::Boolean: {
        size_t byte_index = i / 8;
        if (byte_index >= size) corrupt(column, "value data ends early");
        out.emplace_back(((data[byte_index] >> (i % 8)) & 1) != 0);
        break;
      }
      case PhysicalType::Int32: {
        need(4);
        int32_t value;
        std::memcpy(&value, data + position, 4);
        position += 4;
        out.emplace_back(value);
        break;
      }
      case PhysicalType::Int64: {
        need(8);
        int64_t value;
        std::memcpy(&value, data + position, 8);
        position += 8;
        out.emplace_back(value);
        break;
      }
      case PhysicalType::Float: {
        need(4);
        float value;
        std::memcpy(&value, data + position, 4);
        position += 4;
        out.emplace_back(value);
        break;
      }
      case PhysicalType::Double: {
        need(8);
        double value;
        std::memcpy(&value, data + position, 8);
        position += 8;
        out.emplace_back(value);
        break;
      }
      case PhysicalType::ByteArray: {
        need(4);
        uint32_t length;
        std::memcpy(&length, data + position, 4);
        position += 4;
        need(length);
        std::string text(reinterpret_cast<const char*>(data + position), length);
        position += length;
        out.emplace_back(std::move(text));
        break;
      }
      default:
        unsupported(column, std::string("physical type ") + physical_type_name(type));
    }
  }
}

}  // namespace

ColumnLevels decode_column_chunk(const ColumnChunkMeta& meta, const ColumnDescription& column,
                                 const uint8_t* chunk_bytes, size_t chunk_size) {
  if (meta.type == PhysicalType::Int96 || meta.type == PhysicalType::FixedLenByteArray) {
    unsupported(column, std::string("physical type ") + physical_type_name(meta.type));
  }
  ColumnLevels levels;
  std::vector<nlohmann::json> dictionary;
  bool has_dictionary = false;
  size_t position = 0;
  while (levels.slots < static_cast<size_t>(meta.num_values)) {
    if (position >= chunk_size) corrupt(column, "column chunk ends before all values were read");
    size_t header_bytes = 0;
    PageHeader header;
    try {
      header = parse_page_header(chunk_bytes + position, chunk_size - position, &header_bytes);
    } catch (const ThriftError& e) {
      corrupt(column, std::string("bad page header: ") + e.what());
    }
    position += header_bytes;
    if (header.compressed_size < 0 || header.uncompressed_size < 0 ||
        static_cast<size_t>(header.compressed_size) > chunk_size - position) {
      corrupt(column, "page size runs past the column chunk");
    }
    const uint8_t* page = chunk_bytes + position;
    size_t page_size = static_cast<size_t>(header.compressed_size);
    position += page_size;

    if (header.type == PageType::IndexPage) continue;
    if (header.type == PageType::DictionaryPage) {
      if (header.encoding != Encoding::Plain && header.encoding != Encoding::PlainDictionary) {
        unsupported(column, std::string("dictionary encoding ") + encoding_name(header.encoding));
      }
      std::vector<uint8_t> bytes = decompress(meta.codec, page, page_size, header.uncompressed_size, column);
      dictionary.clear();
      decode_plain(meta.type, bytes.data(), bytes.size(), static_cast<size_t>(header.num_values),
                   dictionary, column);
      has_dictionary = true;
      continue;
    }
    if (header.type != PageType::DataPage && header.type != PageType::DataPageV2) {
      unsupported(column, "an unknown page type");
    }
    if (header.num_values < 0) corrupt(column, "negative value count");
    size_t count = static_cast<size_t>(header.num_values);

    std::vector<uint8_t> body;
    const uint8_t* values_data = nullptr;
    size_t values_size = 0;
    std::vector<int16_t> page_repetition;
    std::vector<int16_t> page_definition;
    if (header.type == PageType::DataPage) {
      body = decompress(meta.codec, page, page_size, header.uncompressed_size, column);
      size_t offset = 0;
      auto read_prefixed_levels = [&](int max_level, std::vector<int16_t>& out) {
        if (body.size() - offset < 4) corrupt(column, "level data ends early");
        uint32_t length;
        std::memcpy(&length, body.data() + offset, 4);
        offset += 4;
        if (length > body.size() - offset) corrupt(column, "level data length runs past the page");
        decode_levels(body.data() + offset, length, max_level, count, out, column);
        offset += length;
      };
      if (column.max_repetition > 0) read_prefixed_levels(column.max_repetition, page_repetition);
      if (column.max_definition > 0) read_prefixed_levels(column.max_definition, page_definition);
      values_data = body.data() + offset;
      values_size = body.size() - offset;
    } else {
      size_t levels_bytes = static_cast<size_t>(header.repetition_levels_bytes) +
                            static_cast<size_t>(header.definition_levels_bytes);
      if (header.repetition_levels_bytes < 0 || header.definition_levels_bytes < 0 || levels_bytes > page_size) {
        corrupt(column, "level sizes run past the page");
      }
      if (column.max_repetition > 0) {
        decode_levels(page, header.repetition_levels_bytes, column.max_repetition, count, page_repetition, column);
      }
      if (column.max_definition > 0) {
        decode_levels(page + header.repetition_levels_bytes, header.definition_levels_bytes, column.max_definition,
                      count, page_definition, column);
      }
      const uint8_t* compressed_values = page + levels_bytes;
      size_t compressed_size = page_size - levels_bytes;
      if (header.uncompressed_size < static_cast<int32_t>(levels_bytes)) corrupt(column, "bad page sizes");
      size_t expected = static_cast<size_t>(header.uncompressed_size) - levels_bytes;
      if (header.is_compressed) {
        body = decompress(meta.codec, compressed_values, compressed_size, expected, column);
      } else {
        body.assign(compressed_values, compressed_values + compressed_size);
      }
      values_data = body.data();
      values_size = body.size();
    }

    size_t defined = count;
    if (column.max_definition > 0) {
      defined = 0;
      for (int16_t level : page_definition) defined += level == column.max_definition ? 1 : 0;
    }
    if (header.encoding == Encoding::Plain) {
      decode_plain(meta.type, values_data, values_size, defined, levels.values, column);
    } else if (header.encoding == Encoding::PlainDictionary || header.encoding == Encoding::RleDictionary) {
      if (!has_dictionary) corrupt(column, "dictionary-encoded page without a dictionary page");
      if (defined > 0) {
        if (values_size < 1) corrupt(column, "dictionary index data missing");
        std::vector<uint32_t> indices;
        HybridDecoder decoder(values_data + 1, values_size - 1, values_data[0], column);
        decoder.decode(defined, indices);
        for (uint32_t index : indices) {
          if (index >= dictionary.size()) corrupt(column, "dictionary index out of range");
          levels.values.push_back(dictionary[index]);
        }
      }
    } else if (header.encoding == Encoding::Rle && meta.type == PhysicalType::Boolean) {
      // Booleans in v2 pages: a 4-byte length, then the hybrid encoding with bit width 1.
      if (values_size < 4) corrupt(column, "boolean data ends early");
      uint32_t length;
      std::memcpy(&length, values_data, 4);
      if (length > values_size - 4) corrupt(column, "boolean data length runs past the page");
      std::vector<uint32_t> bits;
      HybridDecoder decoder(values_data + 4, length, 1, column);
      decoder.decode(defined, bits);
      for (uint32_t bit : bits) levels.values.emplace_back(bit != 0);
    } else {
      unsupported(column, std::string("value encoding ") + encoding_name(header.encoding));
    }
    levels.repetition.insert(levels.repetition.end(), page_repetition.begin(), page_repetition.end());
    levels.definition.insert(levels.definition.end(), page_definition.begin(), page_definition.end());
    levels.slots += count;
  }
  return levels;
}

}  // namespace surogate::data::parquet
