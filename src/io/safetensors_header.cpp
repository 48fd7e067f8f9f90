// The safetensors header parser and validator. It is the only code that reads untrusted
// header JSON, so it checks everything a later reader relies on (offsets inside the data
// section, sizes consistent with shape x dtype, no duplicates, no gaps or overlaps) and is the
// target of fuzz/fuzz_safetensors_header.cpp.
#include <algorithm>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"

namespace surogate::io {
namespace {

using nlohmann::json;

constexpr std::string_view kFixHint = "the file is damaged or not a safetensors file; re-download or re-export it";

std::string dtype_list() {
  std::string names;
  for (DType dtype : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::F8_E4M3, DType::F8_E5M2,
                      DType::I64, DType::I32, DType::I16, DType::I8, DType::U8, DType::BOOL}) {
    if (!names.empty()) names += ", ";
    names += dtype_safetensors_name(dtype);
  }
  return names;
}

// Parses while rejecting duplicate keys in the top-level object (nlohmann would keep the last).
json parse_rejecting_duplicates(std::string_view text, const std::string& source) {
  std::set<std::string> top_level_keys;
  std::string duplicate;
  json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!top_level_keys.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json header = json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/false);
  if (header.is_discarded()) {
    fail_user("{}: the header is not valid JSON; {}", source, kFixHint);
  }
  if (!duplicate.empty()) {
    fail_user("{}: the header names tensor '{}' twice; {}", source, duplicate, kFixHint);
  }
  return header;
}

uint64_t unsigned_value(const json& value, const std::string& source, const std::string& tensor,
                        std::string_view field) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() < 0) {
    fail_user("{}: tensor '{}': {} holds a negative number; {}", source, tensor, field, kFixHint);
  }
  fail_user("{}: tensor '{}': {} must hold non-negative integers; {}", source, tensor, field, kFixHint);
}

SafetensorsEntry parse_entry(const std::string& name, const json& value, uint64_t data_size_bytes,
                             const std::string& source) {
  if (name.empty()) fail_user("{}: the header has a tensor with an empty name; {}", source, kFixHint);
  if (!value.is_object()) {
    fail_user("{}: tensor '{}': the header entry must be an object with dtype, shape and data_offsets; {}",
              source, name, kFixHint);
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(key)) fail_user("{}: tensor '{}': missing '{}'; {}", source, name, key, kFixHint);
  }
  SafetensorsEntry entry;
  entry.name = name;

  const json& dtype = value["dtype"];
  if (!dtype.is_string()) fail_user("{}: tensor '{}': dtype must be a string; {}", source, name, kFixHint);
  auto parsed_dtype = dtype_from_safetensors_name(dtype.get_ref<const std::string&>());
  if (!parsed_dtype) {
    fail_user("{}: tensor '{}': unknown dtype '{}' (supported: {})", source, name,
              dtype.get_ref<const std::string&>(), dtype_list());
  }
  entry.dtype = *parsed_dtype;

  const json& shape = value["shape"];
  if (!shape.is_array()) fail_user("{}: tensor '{}': shape must be a list; {}", source, name, kFixHint);
  uint64_t elements = 1;
  for (const json& dimension : shape) {
    uint64_t size = unsigned_value(dimension, source, name, "shape");
    if (size > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(elements, size, &elements)) {
      fail_user("{}: tensor '{}': shape is too large (element count overflows); {}", source, name, kFixHint);
    }
    entry.shape.push_back(static_cast<int64_t>(size));
  }
  uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(elements, dtype_size_bytes(entry.dtype), &expected_bytes)) {
    fail_user("{}: tensor '{}': shape is too large (byte size overflows); {}", source, name, kFixHint);
  }

  const json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    fail_user("{}: tensor '{}': data_offsets must be [begin, end]; {}", source, name, kFixHint);
  }
  entry.data_begin = unsigned_value(offsets[0], source, name, "data_offsets");
  entry.data_end = unsigned_value(offsets[1], source, name, "data_offsets");
  if (entry.data_end < entry.data_begin) {
    fail_user("{}: tensor '{}': data_offsets end {} is before begin {}; {}", source, name,
              entry.data_end, entry.data_begin, kFixHint);
  }
  if (entry.data_end > data_size_bytes) {
    fail_user("{}: tensor '{}': data_offsets [{}, {}] run past the end of the data ({} bytes); "
              "the file is truncated or damaged; re-download it",
              source, name, entry.data_begin, entry.data_end, data_size_bytes);
  }
  if (entry.data_end - entry.data_begin != expected_bytes) {
    fail_user("{}: tensor '{}': holds {} bytes but shape x {} needs {}; {}", source, name,
              entry.data_end - entry.data_begin, dtype_safetensors_name(entry.dtype), expected_bytes, kFixHint);
  }
  return entry;
}

std::map<std::string, std::string> parse_metadata(const json& value, const std::string& source) {
  if (value.is_null()) return {};
  if (!value.is_object()) fail_user("{}: __metadata__ must be an object of strings; {}", source, kFixHint);
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      fail_user("{}: __metadata__ key '{}' must hold a string; {}", source, key, kFixHint);
    }
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

// Tensors must tile the data section exactly: sorted by offset, each begins where the
// previous ended, the last ends at the end of the data.
void check_contiguous(std::vector<SafetensorsEntry>& entries, uint64_t data_size_bytes,
                      const std::string& source) {
  std::sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.data_begin != b.data_begin ? a.data_begin < b.data_begin : a.data_end < b.data_end;
  });
  uint64_t cursor = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const SafetensorsEntry& entry = entries[i];
    if (entry.data_begin < cursor) {
      fail_user("{}: tensor '{}' overlaps tensor '{}' in the data section; {}", source, entry.name,
                entries[i - 1].name, kFixHint);
    }
    if (entry.data_begin > cursor) {
      fail_user("{}: there are {} unused bytes before tensor '{}' in the data section; {}", source,
                entry.data_begin - cursor, entry.name, kFixHint);
    }
    cursor = entry.data_end;
  }
  if (cursor != data_size_bytes) {
    fail_user("{}: the data section holds {} bytes but the tensors use {}; {}", source, data_size_bytes,
              cursor, kFixHint);
  }
}

}  // namespace

SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t data_size_bytes,
                                           const std::string& source) {
  if (header_json.size() > kSafetensorsMaxHeaderBytes) {
    fail_user("{}: the header is {} bytes, over the 100 MB limit; {}", source, header_json.size(), kFixHint);
  }
  json header = parse_rejecting_duplicates(header_json, source);
  if (!header.is_object()) {
    fail_user("{}: the header must be a JSON object mapping tensor names to entries; {}", source, kFixHint);
  }
  SafetensorsHeader result;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      result.metadata = parse_metadata(value, source);
    } else {
      result.entries.push_back(parse_entry(key, value, data_size_bytes, source));
    }
  }
  check_contiguous(result.entries, data_size_bytes, source);
  return result;
}

SafetensorsLayout parse_safetensors_layout(std::span<const std::byte> bytes, const std::string& source) {
  if (bytes.size() < 8) {
    fail_user("{}: the file is {} bytes, too short to be a safetensors file (needs at least 8); {}", source,
              bytes.size(), kFixHint);
  }
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | static_cast<uint8_t>(bytes[i]);
  if (header_bytes > kSafetensorsMaxHeaderBytes) {
    fail_user("{}: the header length field says {} bytes, over the 100 MB limit; {}", source, header_bytes,
              kFixHint);
  }
  if (header_bytes > bytes.size() - 8) {
    fail_user("{}: the header length field says {} bytes but the file holds only {} after it; the file "
              "is truncated: re-download it", source, header_bytes, bytes.size() - 8);
  }
  std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), header_bytes);
  SafetensorsLayout layout;
  layout.data_offset = 8 + header_bytes;
  layout.header = parse_safetensors_header(text, bytes.size() - layout.data_offset, source);
  return layout;
}

}  // namespace surogate::io
