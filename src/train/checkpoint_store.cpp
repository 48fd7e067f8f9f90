#include "train/checkpoint_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace surogate::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kMarkerName = "complete.json";
constexpr const char* kPrefix = "checkpoint-";
constexpr const char* kPartialSuffix = ".partial";
constexpr const char* kDeletingSuffix = ".deleting";

// Removes a checkpoint folder so that a kill at any moment leaves nothing that looks like a
// checkpoint: the folder is first renamed (atomic) to `<name>.deleting`, which the next save
// removes if this removal is cut short.
void remove_checkpoint_folder(const fs::path& folder) {
  fs::path doomed = folder;
  doomed += kDeletingSuffix;
  fs::rename(folder, doomed);
  fs::remove_all(doomed);
}

}  // namespace

void fsync_path(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_user("cannot open '{}' to flush it to disk: {}", path.string(), std::strerror(errno));
  int result = ::fsync(fd);
  int saved_errno = errno;
  ::close(fd);
  if (result != 0) fail_user("cannot flush '{}' to disk: {}", path.string(), std::strerror(saved_errno));
}

void write_file_atomically(const fs::path& path, std::string_view contents) {
  fs::path temporary = path;
  temporary += ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) fail_user("cannot write '{}': check that the folder exists and is writable", temporary.string());
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    if (!out) fail_user("cannot write '{}' (disk full?)", temporary.string());
  }
  fsync_path(temporary);
  fs::rename(temporary, path);
  fsync_path(path.parent_path().empty() ? fs::path(".") : path.parent_path());
}

CheckpointStore::CheckpointStore(fs::path root, int total_limit) : root_(std::move(root)), total_limit_(total_limit) {}

std::optional<int64_t> CheckpointStore::step_of(const fs::path& checkpoint) {
  std::string name = checkpoint.filename().string();
  if (!name.starts_with(kPrefix)) return std::nullopt;
  std::string digits = name.substr(std::string(kPrefix).size());
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return std::nullopt;
  return std::stoll(digits);
}

bool CheckpointStore::is_complete(const fs::path& checkpoint) {
  std::error_code error;
  fs::path marker = checkpoint / kMarkerName;
  if (!fs::is_regular_file(marker, error)) return false;
  std::ifstream in(marker);
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("files") || !json["files"].is_object()) return false;
  for (const auto& [name, size] : json["files"].items()) {
    if (!size.is_number_unsigned()) return false;
    auto actual = fs::file_size(checkpoint / name, error);
    if (error || actual != size.get<uint64_t>()) return false;
  }
  return true;
}

std::vector<fs::path> CheckpointStore::complete_checkpoints() const {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code error;
  if (!fs::is_directory(root_, error)) return {};
  for (const auto& entry : fs::directory_iterator(root_, error)) {
    if (!entry.is_directory()) continue;
    auto step = step_of(entry.path());
    if (step && is_complete(entry.path())) found.emplace_back(*step, entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> paths;
  for (auto& [step, path] : found) paths.push_back(path);
  return paths;
}

std::optional<fs::path> CheckpointStore::latest() const {
  auto all = complete_checkpoints();
  if (all.empty()) return std::nullopt;
  return all.back();
}

void CheckpointStore::remove_stale_partials() const {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root_, error)) {
    if (!entry.is_directory()) continue;
    std::string name = entry.path().filename().string();
    if (!name.starts_with(kPrefix)) continue;
    if (name.ends_with(kPartialSuffix) || name.ends_with(kDeletingSuffix)) fs::remove_all(entry.path(), error);
  }
}

fs::path CheckpointStore::save(int64_t step, const std::function<void(const fs::path&)>& write_files) {
  std::error_code error;
  fs::create_directories(root_, error);
  if (error) fail_user("cannot create checkpoint folder '{}': {}", root_.string(), error.message());
  remove_stale_partials();

  fs::path final_path = root_ / (kPrefix + std::to_string(step));
  fs::path partial = final_path;
  partial += kPartialSuffix;
  fs::create_directories(partial);
  write_files(partial);

  nlohmann::json marker = {{"step", step}, {"files", nlohmann::json::object()}};
  for (const auto& entry : fs::recursive_directory_iterator(partial)) {
    if (!entry.is_regular_file()) continue;
    fsync_path(entry.path());
    marker["files"][fs::relative(entry.path(), partial).string()] = entry.file_size();
  }
  write_file_atomically(partial / kMarkerName, marker.dump(2));

  // A checkpoint of the same step from an earlier, interrupted run is replaced.
  if (fs::exists(final_path)) remove_checkpoint_folder(final_path);
  fs::rename(partial, final_path);
  fsync_path(root_);
  rotate();
  return final_path;
}

void CheckpointStore::rotate() const {
  if (total_limit_ <= 0) return;
  auto all = complete_checkpoints();
  while (static_cast<int>(all.size()) > total_limit_) {
    remove_checkpoint_folder(all.front());
    all.erase(all.begin());
  }
}

}  // namespace surogate::train
