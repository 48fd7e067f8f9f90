// SafetensorsFile (one mapped file) and SafetensorsCheckpoint (a model folder, single-file or
// sharded via model.safetensors.index.json), plus conversion of float tensors to float32.
// All validation of the header itself lives in safetensors_header.cpp.
#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/bfloat16.h"
#include "core/error.h"
#include "io/mapped_file.h"

namespace surogate::io {

int64_t SafetensorsTensor::element_count() const {
  int64_t count = 1;
  for (int64_t dimension : shape) count *= dimension;
  return count;
}

// ---- SafetensorsFile ----

SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile file;
  file.path_ = path;
  file.mapping_ = std::make_unique<MappedFile>(path);
  std::span<const std::byte> bytes = file.mapping_->bytes();
  SafetensorsLayout layout = parse_safetensors_layout(bytes, path.string());
  SafetensorsHeader& header = layout.header;
  std::span<const std::byte> data = bytes.subspan(layout.data_offset);

  file.metadata_ = std::move(header.metadata);
  file.tensors_.reserve(header.entries.size());
  for (SafetensorsEntry& entry : header.entries) {
    SafetensorsTensor tensor;
    tensor.name = std::move(entry.name);
    tensor.dtype = entry.dtype;
    tensor.shape = std::move(entry.shape);
    tensor.bytes = data.subspan(entry.data_begin, entry.data_end - entry.data_begin);
    file.index_by_name_.emplace(tensor.name, file.tensors_.size());
    file.tensors_.push_back(std::move(tensor));
  }
  return file;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto found = index_by_name_.find(std::string(name));
  return found == index_by_name_.end() ? nullptr : &tensors_[found->second];
}

const SafetensorsTensor& SafetensorsFile::tensor(std::string_view name) const {
  const SafetensorsTensor* found = find(name);
  if (found == nullptr) {
    fail_user("{}: has no tensor named '{}'; check the model matches the expected architecture",
              path_.string(), name);
  }
  return *found;
}

// ---- SafetensorsCheckpoint ----

SafetensorsCheckpoint::SafetensorsCheckpoint(SafetensorsCheckpoint&&) noexcept = default;
SafetensorsCheckpoint& SafetensorsCheckpoint::operator=(SafetensorsCheckpoint&&) noexcept = default;
SafetensorsCheckpoint::~SafetensorsCheckpoint() = default;

namespace {

using nlohmann::json;

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) fail_user("cannot read {}; check that it exists and is readable", path.string());
  std::ostringstream content;
  content << stream.rdbuf();
  return content.str();
}

// A shard name from an index must stay inside the checkpoint folder.
void check_shard_name(const std::string& shard, const std::filesystem::path& index_path) {
  std::filesystem::path relative(shard);
  bool escapes = shard.empty() || relative.is_absolute();
  for (const auto& part : relative) escapes = escapes || part == "..";
  if (escapes) {
    fail_user("{}: weight_map names shard '{}', which is not a file name inside the model folder",
              index_path.string(), shard);
  }
}

}  // namespace

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::filesystem::path& dir_or_file) {
  namespace fs = std::filesystem;
  SafetensorsCheckpoint checkpoint;
  checkpoint.source_ = dir_or_file;
  std::error_code error;
  fs::path index_path;
  std::vector<fs::path> single_files;
  if (fs::is_directory(dir_or_file, error)) {
    if (fs::exists(dir_or_file / "model.safetensors.index.json")) {
      index_path = dir_or_file / "model.safetensors.index.json";
    } else if (fs::exists(dir_or_file / "model.safetensors")) {
      single_files.push_back(dir_or_file / "model.safetensors");
    } else {
      for (const auto& item : fs::directory_iterator(dir_or_file, error)) {
        const std::string name = item.path().filename().string();
        if (name.ends_with(".safetensors.index.json") && index_path.empty()) index_path = item.path();
        if (name.ends_with(".safetensors")) single_files.push_back(item.path());
      }
      std::sort(single_files.begin(), single_files.end());
      if (!index_path.empty()) single_files.clear();
    }
    if (index_path.empty() && single_files.empty()) {
      fail_user("{}: no model.safetensors or model.safetensors.index.json found; Surogate reads "
                "safetensors weights (convert .bin checkpoints with transformers' save_pretrained)",
                dir_or_file.string());
    }
  } else if (fs::exists(dir_or_file, error)) {
    if (dir_or_file.string().ends_with(".json")) {
      index_path = dir_or_file;
    } else {
      single_files.push_back(dir_or_file);
    }
  } else {
    fail_user("{}: no such file or folder; pass a model folder or a .safetensors file",
              dir_or_file.string());
  }

  if (!index_path.empty()) {
    json index = json::parse(read_text_file(index_path), nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.is_object()) {
      fail_user("{}: not valid JSON; re-download the model's index file", index_path.string());
    }
    if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
      fail_user("{}: missing the 'weight_map' object mapping tensor names to shard files",
                index_path.string());
    }
    if (index.contains("metadata") && index["metadata"].is_object()) {
      for (const auto& [key, value] : index["metadata"].items()) {
        checkpoint.metadata_[key] = value.is_string() ? value.get<std::string>() : value.dump();
      }
    }
    std::map<std::string, size_t> shard_index;
    const fs::path folder = index_path.parent_path();
    for (const auto& [name, shard_value] : index["weight_map"].items()) {
      if (!shard_value.is_string()) {
        fail_user("{}: weight_map entry '{}' must name a shard file", index_path.string(), name);
      }
      const std::string shard = shard_value.get<std::string>();
      auto [position, inserted] = shard_index.emplace(shard, checkpoint.files_.size());
      if (inserted) {
        check_shard_name(shard, index_path);
        if (!fs::exists(folder / shard)) {
          fail_user("{}: weight_map names shard '{}' which is missing from {}; re-download the model",
                    index_path.string(), shard, folder.string());
        }
        checkpoint.files_.push_back(SafetensorsFile::open(folder / shard));
      }
      const SafetensorsFile& file = checkpoint.files_[position->second];
      const SafetensorsTensor* tensor = file.find(name);
      if (tensor == nullptr) {
        fail_user("{}: weight_map puts tensor '{}' in '{}', but that shard does not hold it; the "
                  "download is incomplete or mixed: re-download the model", index_path.string(), name, shard);
      }
      size_t tensor_position = static_cast<size_t>(tensor - file.tensors().data());
      checkpoint.locations_[name] = {position->second, tensor_position};
    }
    return checkpoint;
  }

  for (const fs::path& path : single_files) {
    size_t file_position = checkpoint.files_.size();
    checkpoint.files_.push_back(SafetensorsFile::open(path));
    const SafetensorsFile& file = checkpoint.files_.back();
    for (size_t i = 0; i < file.tensors().size(); ++i) {
      const std::string& name = file.tensors()[i].name;
      if (!checkpoint.locations_.emplace(name, std::make_pair(file_position, i)).second) {
        fail_user("{}: tensor '{}' is also in another .safetensors file of {}; keep one set of weights "
                  "per folder or add a model.safetensors.index.json", path.string(), name,
                  dir_or_file.string());
      }
    }
  }
  if (checkpoint.files_.size() == 1) checkpoint.metadata_ = checkpoint.files_[0].metadata();
  return checkpoint;
}

std::vector<std::string> SafetensorsCheckpoint::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(locations_.size());
  for (const auto& [name, location] : locations_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

const SafetensorsTensor* SafetensorsCheckpoint::find(std::string_view name) const {
  auto found = locations_.find(std::string(name));
  if (found == locations_.end()) return nullptr;
  return &files_[found->second.first].tensors()[found->second.second];
}

const SafetensorsTensor& SafetensorsCheckpoint::tensor(std::string_view name) const {
  const SafetensorsTensor* found = find(name);
  if (found == nullptr) {
    fail_user("{}: the checkpoint has no tensor named '{}'; check the model matches the expected "
              "architecture", source_.string(), name);
  }
  return *found;
}

const std::filesystem::path& SafetensorsCheckpoint::file_of(std::string_view name) const {
  tensor(name);
  return files_[locations_.find(std::string(name))->second.first].path();
}

uint64_t SafetensorsCheckpoint::total_size_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, location] : locations_) {
    total += files_[location.first].tensors()[location.second].bytes.size();
  }
  return total;
}

// ---- float32 conversion ----

namespace {

// Elements [begin, end) of `source` (dtype) widened into out[begin, end).
void widen_range(DType dtype, const std::byte* source, std::span<float> out, size_t begin, size_t end) {
  switch (dtype) {
    case DType::F32:
      if (end > begin) std::memcpy(out.data() + begin, source + begin * sizeof(float), (end - begin) * sizeof(float));
      return;
    case DType::F64:
      for (size_t i = begin; i < end; ++i) {
        double value;
        std::memcpy(&value, source + i * sizeof(double), sizeof(double));
        out[i] = static_cast<float>(value);
      }
      return;
    default:  // F16 / BF16
      for (size_t i = begin; i < end; ++i) {
        uint16_t bits;
        std::memcpy(&bits, source + i * 2, 2);
        out[i] = dtype == DType::F16 ? f16_to_float(bits) : bf16_to_float(bits);
      }
      return;
  }
}

}  // namespace

// Large tensors are widened by several threads, each over a contiguous range: the first touch of
// a memory-mapped file's pages then reads the disk in parallel too (an 8B model's load went from
// one core's conversion speed to the disk's).
void read_tensor_as_float32(const SafetensorsTensor& tensor, std::span<float> out) {
  const size_t count = static_cast<size_t>(tensor.element_count());
  SUROGATE_CHECK(out.size() == count, "output holds {} floats, tensor '{}' has {}", out.size(),
                 tensor.name, count);
  if (tensor.dtype != DType::F32 && tensor.dtype != DType::F64 && tensor.dtype != DType::F16 &&
      tensor.dtype != DType::BF16) {
    fail_user("tensor '{}' has dtype {}; only F64, F32, F16 and BF16 tensors can be read as float32",
              tensor.name, dtype_safetensors_name(tensor.dtype));
  }
  const std::byte* source = tensor.bytes.data();
  constexpr size_t kPerThread = size_t{1} << 22;  // 4M elements: below that one thread is as fast
  const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min(hardware, (count + kPerThread - 1) / kPerThread);
  if (threads <= 1) {
    widen_range(tensor.dtype, source, out, 0, count);
    return;
  }
  std::vector<std::thread> workers;
  for (size_t t = 1; t < threads; ++t) {
    workers.emplace_back(widen_range, tensor.dtype, source, out, count * t / threads, count * (t + 1) / threads);
  }
  widen_range(tensor.dtype, source, out, 0, count / threads);
  for (std::thread& worker : workers) worker.join();
}

std::vector<float> read_tensor_as_float32(const SafetensorsTensor& tensor) {
  std::vector<float> values(static_cast<size_t>(tensor.element_count()));
  read_tensor_as_float32(tensor, values);
  return values;
}

}  // namespace surogate::io
