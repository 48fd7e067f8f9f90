// Footer reading, the schema tree, and record assembly from repetition / definition levels
// (the Dremel algorithm) into JSON rows; see parquet_file.h.
#include "data/parquet/parquet_file.h"

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "data/parquet/column_chunk.h"
#include "data/parquet/thrift_compact.h"

namespace surogate::data::parquet {
namespace {

using nlohmann::json;

struct SchemaNode {
  const SchemaElement* element = nullptr;
  std::vector<SchemaNode> children;
  int16_t definition_level = 0;  // cumulative, including this node
  int16_t repetition_level = 0;  // cumulative, including this node
  bool leaf() const { return element->type.has_value(); }
};

struct LeafColumn {
  std::vector<const SchemaNode*> path;  // from the top-level field down to the leaf
  std::string dotted_path;
};

SchemaNode build_node(const std::vector<SchemaElement>& schema, size_t& cursor, int16_t definition, int16_t repetition,
                      const std::string& file) {
  if (cursor >= schema.size()) fail_user("Parquet file {}: the schema in the footer is truncated", file);
  SchemaNode node;
  node.element = &schema[cursor++];
  if (cursor > 1) {  // the root carries no level
    if (node.element->repetition != Repetition::Required) ++definition;
    if (node.element->repetition == Repetition::Repeated) ++repetition;
  }
  node.definition_level = definition;
  node.repetition_level = repetition;
  if (node.element->num_children < 0 || static_cast<size_t>(node.element->num_children) > schema.size()) {
    fail_user("Parquet file {}: the schema in the footer is malformed", file);
  }
  for (int32_t i = 0; i < node.element->num_children; ++i) {
    node.children.push_back(build_node(schema, cursor, definition, repetition, file));
  }
  if (!node.element->type && node.children.empty() && cursor > 1) {
    fail_user("Parquet file {}: group '{}' has no fields", file, node.element->name);
  }
  return node;
}

void collect_leaves(const SchemaNode& node, std::vector<const SchemaNode*>& prefix, std::vector<LeafColumn>& out) {
  for (const auto& child : node.children) {
    prefix.push_back(&child);
    if (child.leaf()) {
      LeafColumn leaf{prefix, {}};
      for (const auto* step : prefix) leaf.dotted_path += (leaf.dotted_path.empty() ? "" : ".") + step->element->name;
      out.push_back(std::move(leaf));
    } else {
      collect_leaves(child, prefix, out);
    }
    prefix.pop_back();
  }
}

// Writes one column's triplets into the raw (un-annotated) JSON records.
void assemble_column(const LeafColumn& leaf, ColumnLevels& levels, std::vector<json>& rows,
                     const std::string& file) {
  const int16_t max_definition = leaf.path.back()->definition_level;
  std::vector<size_t> element_index(leaf.path.size(), 0);
  long record = -1;
  size_t value_cursor = 0;
  for (size_t slot = 0; slot < levels.slots; ++slot) {
    int16_t repetition = levels.repetition.empty() ? 0 : levels.repetition[slot];
    int16_t definition = levels.definition.empty() ? max_definition : levels.definition[slot];
    if (repetition == 0) {
      ++record;
      std::fill(element_index.begin(), element_index.end(), 0);
    } else {
      bool found = false;
      for (size_t i = 0; i < leaf.path.size(); ++i) {
        const SchemaNode* node = leaf.path[i];
        if (node->element->repetition != Repetition::Repeated) continue;
        if (node->repetition_level == repetition) {
          ++element_index[i];
          found = true;
        } else if (node->repetition_level > repetition) {
          element_index[i] = 0;
        }
      }
      if (!found) fail_user("Parquet file {}: column '{}' has an invalid repetition level", file, leaf.dotted_path);
    }
    if (record < 0 || static_cast<size_t>(record) >= rows.size()) {
      fail_user("Parquet file {}: column '{}' holds more rows than the row group declares", file, leaf.dotted_path);
    }
    json* cursor = &rows[static_cast<size_t>(record)];
    for (size_t i = 0; i < leaf.path.size(); ++i) {
      const SchemaNode* node = leaf.path[i];
      const std::string& name = node->element->name;
      bool repeated = node->element->repetition == Repetition::Repeated;
      if (definition < node->definition_level) {
        if (!cursor->contains(name)) (*cursor)[name] = repeated ? json::array() : json(nullptr);
        break;
      }
      json& slot_value = (*cursor)[name];
      if (i + 1 == leaf.path.size()) {
        if (value_cursor >= levels.values.size()) {
          fail_user("Parquet file {}: column '{}' has fewer values than its levels say", file, leaf.dotted_path);
        }
        json& value = levels.values[value_cursor];
        ++value_cursor;
        if (repeated) {
          if (!slot_value.is_array()) slot_value = json::array();
          slot_value[element_index[i]] = std::move(value);
        } else {
          slot_value = std::move(value);
        }
      } else if (repeated) {
        if (!slot_value.is_array()) slot_value = json::array();
        while (slot_value.size() <= element_index[i]) slot_value.push_back(json::object());
        cursor = &slot_value[element_index[i]];
      } else {
        if (!slot_value.is_object()) slot_value = json::object();
        cursor = &slot_value;
      }
    }
  }
  if (static_cast<size_t>(record + 1) != rows.size()) {
    fail_user("Parquet file {}: column '{}' holds {} rows but the row group declares {}", file, leaf.dotted_path,
              record + 1, rows.size());
  }
}

void convert_field(json& value, const SchemaNode& node);

// Rewrites one (non-repeated) instance of `node` from raw level-assembled form into plain JSON.
void convert_value(json& value, const SchemaNode& node) {
  if (node.leaf() || value.is_null()) return;
  const SchemaElement& element = *node.element;
  if (element.group_kind != GroupKind::Plain && node.children.size() == 1 &&
      node.children[0].element->repetition == Repetition::Repeated) {
    const SchemaNode& repeated = node.children[0];
    json items = value.contains(repeated.element->name) ? value[repeated.element->name] : json::array();
    if (element.group_kind == GroupKind::Map && repeated.children.size() == 2) {
      json object = json::object();
      for (auto& item : items) {
        json key = item.value(repeated.children[0].element->name, json(nullptr));
        json mapped = item.value(repeated.children[1].element->name, json(nullptr));
        convert_field(mapped, repeated.children[1]);
        object[key.is_string() ? key.get<std::string>() : key.dump()] = std::move(mapped);
      }
      value = std::move(object);
      return;
    }
    json list = json::array();
    // Three-level lists (list / element) unwrap the single inner field; legacy two-level lists
    // whose repeated group is named "array" or "<name>_tuple" are lists of structs.
    bool unwrap = !repeated.leaf() && repeated.children.size() == 1 && repeated.element->name != "array" &&
                  repeated.element->name != element.name + "_tuple";
    for (auto& item : items) {
      if (unwrap) {
        const SchemaNode& inner = repeated.children[0];
        json unwrapped = item.is_object() ? item.value(inner.element->name, json(nullptr)) : json(nullptr);
        convert_field(unwrapped, inner);
        list.push_back(std::move(unwrapped));
      } else {
        convert_value(item, repeated);
        list.push_back(std::move(item));
      }
    }
    value = std::move(list);
    return;
  }
  for (const auto& child : node.children) {
    if (value.contains(child.element->name)) convert_field(value[child.element->name], child);
  }
}

void convert_field(json& value, const SchemaNode& node) {
  if (node.element->repetition == Repetition::Repeated && value.is_array()) {
    for (auto& item : value) convert_value(item, node);
  } else {
    convert_value(value, node);
  }
}

}  // namespace

ParquetFile ParquetFile::open(const std::filesystem::path& path) {
  ParquetFile file;
  file.path_ = path;
  const std::string name = path.string();
  std::ifstream stream(path, std::ios::binary);
  if (!stream) fail_user("cannot open Parquet file {}: check that it exists and is readable", name);
  stream.seekg(0, std::ios::end);
  file.file_size_ = static_cast<uint64_t>(stream.tellg());
  if (file.file_size_ < 12) fail_user("Parquet file {} is too short to be a Parquet file", name);
  char head[4];
  stream.seekg(0);
  stream.read(head, 4);
  char tail[8];
  stream.seekg(static_cast<std::streamoff>(file.file_size_ - 8));
  stream.read(tail, 8);
  if (std::memcmp(tail + 4, "PARE", 4) == 0) {
    fail_user("Parquet file {} is encrypted, which Surogate does not support: decrypt it first", name);
  }
  if (std::memcmp(head, "PAR1", 4) != 0 || std::memcmp(tail + 4, "PAR1", 4) != 0) {
    fail_user("{} is not a Parquet file (no PAR1 magic); it may be truncated", name);
  }
  uint32_t footer_size;
  std::memcpy(&footer_size, tail, 4);
  if (footer_size > file.file_size_ - 12) fail_user("Parquet file {}: footer size is corrupt (truncated file?)", name);
  std::vector<uint8_t> footer(footer_size);
  stream.seekg(static_cast<std::streamoff>(file.file_size_ - 8 - footer_size));
  stream.read(reinterpret_cast<char*>(footer.data()), footer_size);
  if (!stream) fail_user("cannot read the footer of Parquet file {}", name);
  try {
    file.metadata_ = parse_file_metadata(footer.data(), footer.size());
  } catch (const ThriftError& e) {
    fail_user("Parquet file {}: the footer is corrupt ({}); rewrite the file", name, e.what());
  }
  if (file.metadata_.schema.empty()) fail_user("Parquet file {} has no schema", name);
  return file;
}

std::vector<std::string> ParquetFile::column_names() const {
  std::vector<std::string> names;
  size_t cursor = 0;
  SchemaNode root = build_node(metadata_.schema, cursor, 0, 0, path_.string());
  for (const auto& child : root.children) names.push_back(child.element->name);
  return names;
}

std::vector<json> ParquetFile::read_row_group(size_t index) const {
  const std::string name = path_.string();
  SUROGATE_CHECK(index < metadata_.row_groups.size(), "row group {} of {}", index, metadata_.row_groups.size());
  size_t cursor = 0;
  SchemaNode root = build_node(metadata_.schema, cursor, 0, 0, name);
  std::vector<LeafColumn> leaves;
  std::vector<const SchemaNode*> prefix;
  collect_leaves(root, prefix, leaves);
  const RowGroupMeta& group = metadata_.row_groups[index];
  if (group.columns.size() != leaves.size()) {
    fail_user("Parquet file {}: row group {} has {} columns but the schema has {}", name, index, group.columns.size(),
              leaves.size());
  }
  if (group.num_rows < 0) fail_user("Parquet file {}: negative row count in row group {}", name, index);
  // A valid empty file (pyarrow writes one row group of 0 rows) has column chunks that point at
  // nothing: there is nothing to read, and the shard contributes no rows.
  if (group.num_rows == 0) return {};
  std::vector<json> rows(static_cast<size_t>(group.num_rows), json::object());
  std::ifstream stream(path_, std::ios::binary);
  for (size_t c = 0; c < leaves.size(); ++c) {
    const ColumnChunkMeta& meta = group.columns[c];
    const LeafColumn& leaf = leaves[c];
    if (meta.external_file) {
      fail_user("Parquet file {}: column '{}' is stored in an external file, which is not supported", name,
                leaf.dotted_path);
    }
    int64_t start = meta.data_page_offset;
    if (meta.dictionary_page_offset && *meta.dictionary_page_offset > 0 && *meta.dictionary_page_offset < start) {
      start = *meta.dictionary_page_offset;
    }
    if (start < 4 || meta.total_compressed_size < 0 ||
        static_cast<uint64_t>(start) + static_cast<uint64_t>(meta.total_compressed_size) > file_size_ - 8) {
      fail_user("Parquet file {}: column '{}' points outside the file (truncated file?)", name, leaf.dotted_path);
    }
    std::vector<uint8_t> bytes(static_cast<size_t>(meta.total_compressed_size));
    stream.seekg(start);
    stream.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!stream) fail_user("Parquet file {}: cannot read column '{}'", name, leaf.dotted_path);
    ColumnDescription description{name, leaf.dotted_path, leaf.path.back()->repetition_level,
                                  leaf.path.back()->definition_level};
    ColumnLevels levels = decode_column_chunk(meta, description, bytes.data(), bytes.size());
    assemble_column(leaf, levels, rows, name);
  }
  for (auto& row : rows) {
    for (const auto& field : root.children) {
      if (row.contains(field.element->name)) convert_field(row[field.element->name], field);
    }
  }
  return rows;
}

}  // namespace surogate::data::parquet
