// The safetensors writer: header JSON with data_offsets in the given order, padded with spaces
// to 8 bytes as the Hugging Face writer does, streamed atomically (io/atomic_file.h); and the
// sharded writer producing the transformers file names and index.
#include "io/safetensors_writer.h"

#include <cctype>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"

namespace surogate::io {
namespace {

using nlohmann::ordered_json;

uint64_t expected_bytes(const TensorToWrite& tensor) {
  uint64_t count = 1;
  for (int64_t dimension : tensor.shape) {
    SUROGATE_CHECK(dimension >= 0, "tensor '{}' has a negative dimension", tensor.name);
    count *= static_cast<uint64_t>(dimension);
  }
  return count * dtype_size_bytes(tensor.dtype);
}

void check_tensors(std::span<const TensorToWrite> tensors) {
  std::set<std::string_view> names;
  for (const TensorToWrite& tensor : tensors) {
    SUROGATE_CHECK(!tensor.name.empty() && tensor.name != "__metadata__", "invalid tensor name '{}'",
                   tensor.name);
    SUROGATE_CHECK(names.insert(tensor.name).second, "tensor '{}' written twice", tensor.name);
    SUROGATE_CHECK(expected_bytes(tensor) == tensor.bytes.size(),
                   "tensor '{}': {} bytes given, shape x dtype needs {}", tensor.name,
                   tensor.bytes.size(), expected_bytes(tensor));
  }
}

std::string header_text(std::span<const TensorToWrite> tensors,
                        const std::map<std::string, std::string>& metadata) {
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json meta = ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  for (const TensorToWrite& tensor : tensors) {
    uint64_t size = tensor.bytes.size();
    header[tensor.name] = {{"dtype", std::string(dtype_safetensors_name(tensor.dtype))},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::string shard_name(std::string_view base_name, size_t index, size_t count) {
  return fmt::format("{}-{:05d}-of-{:05d}.safetensors", base_name, index + 1, count);
}

// "<base>-00001-of-00003.safetensors"-shaped names (any shard count).
bool is_shard_name(const std::string& name, std::string_view base_name) {
  const std::string prefix = std::string(base_name) + "-";
  constexpr std::string_view kSuffix = ".safetensors";
  if (!name.starts_with(prefix) || !name.ends_with(kSuffix)) return false;
  std::string_view middle(name);
  middle = middle.substr(prefix.size(), middle.size() - prefix.size() - kSuffix.size());
  if (middle.size() < 14 || middle.substr(5, 4) != "-of-") return false;
  for (size_t i = 0; i < middle.size(); ++i) {
    if (i >= 5 && i < 9) continue;
    if (!std::isdigit(static_cast<unsigned char>(middle[i]))) return false;
  }
  return true;
}

// Removes what an earlier save of `base_name` left in `directory` that this save did not write
// (old shards, an index next to a new single file, a single file next to a new index), so the
// reader never mixes two saves. Runs after the new files are complete: a crash before it leaves
// the old, self-consistent set readable.
void remove_stale_files(const std::filesystem::path& directory, std::string_view base_name,
                        const ShardedWriteResult& result) {
  namespace fs = std::filesystem;
  std::set<std::string> written;
  for (const fs::path& file : result.files) written.insert(file.filename().string());
  if (!result.index_file.empty()) written.insert(result.index_file.filename().string());
  const std::string single = std::string(base_name) + ".safetensors";
  const std::string index = single + ".index.json";
  std::error_code error;
  std::vector<fs::path> stale;
  for (const auto& item : fs::directory_iterator(directory, error)) {
    const std::string name = item.path().filename().string();
    if (written.count(name) != 0) continue;
    if (name == single || name == index || is_shard_name(name, base_name)) stale.push_back(item.path());
  }
  for (const fs::path& path : stale) {
    fs::remove(path, error);
    if (error) {
      fail_user("cannot remove the stale file {} left by an earlier save: {}; delete it by hand, it does not "
                "belong to the new checkpoint", path.string(), error.message());
    }
  }
}

}  // namespace

void write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                       const std::map<std::string, std::string>& metadata) {
  check_tensors(tensors);
  const std::string header = header_text(tensors, metadata);
  write_file_atomically(path, [&](const ByteSink& sink) {
    uint8_t length[8];
    uint64_t header_size = header.size();
    for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(header_size >> (8 * i));
    sink(length, sizeof(length));
    sink(header.data(), header.size());
    for (const TensorToWrite& tensor : tensors) sink(tensor.bytes.data(), tensor.bytes.size());
  });
}

ShardedWriteResult write_safetensors_sharded(const std::filesystem::path& directory,
                                             std::span<const TensorToWrite> tensors,
                                             uint64_t max_shard_bytes,
                                             const std::map<std::string, std::string>& metadata,
                                             std::string_view base_name) {
  SUROGATE_CHECK(max_shard_bytes > 0, "max_shard_bytes must be positive");
  check_tensors(tensors);
  // Greedy in order: start a new shard when the next tensor would overflow the current one.
  std::vector<std::pair<size_t, size_t>> shards;  // [first, last) tensor ranges
  uint64_t shard_bytes = 0;
  ShardedWriteResult result;
  for (size_t i = 0; i < tensors.size(); ++i) {
    uint64_t size = tensors[i].bytes.size();
    if (shards.empty() || (shard_bytes > 0 && shard_bytes + size > max_shard_bytes)) {
      shards.emplace_back(i, i);
      shard_bytes = 0;
    }
    shards.back().second = i + 1;
    shard_bytes += size;
    result.total_size_bytes += size;
  }
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (shards.size() <= 1) {
    std::filesystem::path path = directory / (std::string(base_name) + ".safetensors");
    write_safetensors(path, tensors, metadata);
    result.files.push_back(path);
    remove_stale_files(directory, base_name, result);
    return result;
  }
  ordered_json weight_map = ordered_json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string name = shard_name(base_name, s, shards.size());
    auto shard = tensors.subspan(shards[s].first, shards[s].second - shards[s].first);
    write_safetensors(directory / name, shard, metadata);
    result.files.push_back(directory / name);
    for (const TensorToWrite& tensor : shard) weight_map[tensor.name] = name;
  }
  ordered_json index = {{"metadata", {{"total_size", result.total_size_bytes}}},
                        {"weight_map", weight_map}};
  result.index_file = directory / (std::string(base_name) + ".safetensors.index.json");
  write_text_file_atomically(result.index_file, index.dump(2) + "\n");
  remove_stale_files(directory, base_name, result);
  return result;
}

uint64_t parse_byte_size(std::string_view text, std::string_view what) {
  size_t position = 0;
  while (position < text.size() && (std::isdigit(static_cast<unsigned char>(text[position])) ||
                                    text[position] == '.')) {
    ++position;
  }
  std::string number(text.substr(0, position));
  std::string unit(text.substr(position));
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double value = 0;
  bool valid = !number.empty() && number.find('.') == number.rfind('.');
  if (valid) value = std::stod(number);
  static const std::pair<std::string_view, double> kUnits[] = {
      {"", 1.0},         {"B", 1.0},         {"KB", 1e3},          {"MB", 1e6},
      {"GB", 1e9},       {"TB", 1e12},       {"KIB", 1024.0},      {"MIB", 1048576.0},
      {"GIB", 1073741824.0}, {"TIB", 1099511627776.0}};
  for (const auto& [name, scale] : kUnits) {
    if (valid && unit == name) {
      double bytes = std::floor(value * scale);
      if (bytes >= 1.0 && bytes < 1.8e19) return static_cast<uint64_t>(bytes);
    }
  }
  fail_user("{}: '{}' is not a size; write a positive number with an optional unit, e.g. 5GB, 500MB, 2GiB",
            what, text);
}

}  // namespace surogate::io
