// Checkpoint folders on disk; see checkpoint_store.h.
#include "train/checkpoint_store.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include <fmt/format.h>
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

// One manifest entry: {"bytes": n, "xxh3_64": "hex"}, or (manifests of earlier versions) the size
// alone. nullopt when the entry is malformed.
struct ManifestEntry {
  uint64_t bytes = 0;
  std::string checksum;  // empty: size only
};

std::optional<ManifestEntry> manifest_entry(const nlohmann::json& value) {
  if (value.is_number_unsigned()) return ManifestEntry{value.get<uint64_t>(), {}};
  if (!value.is_object() || !value.contains("bytes") || !value["bytes"].is_number_unsigned() ||
      !value.contains("xxh3_64") || !value["xxh3_64"].is_string()) {
    return std::nullopt;
  }
  return ManifestEntry{value["bytes"].get<uint64_t>(), value["xxh3_64"].get<std::string>()};
}

// The manifest's "files" object, or a description of why there is none.
std::optional<nlohmann::json> read_manifest_files(const fs::path& checkpoint, std::string& problem) {
  std::error_code error;
  fs::path marker = checkpoint / kMarkerName;
  if (!fs::is_regular_file(marker, error)) {
    problem = "it has no complete.json manifest (the save did not finish)";
    return std::nullopt;
  }
  std::ifstream in(marker);
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("files") || !json["files"].is_object() || json["files"].empty()) {
    problem = "its complete.json manifest is damaged";
    return std::nullopt;
  }
  return json["files"];
}

// Empty when every listed file has its recorded size (and, with `checksums`, its checksum).
std::string check_files(const fs::path& checkpoint, bool checksums) {
  std::string problem;
  std::optional<nlohmann::json> files = read_manifest_files(checkpoint, problem);
  if (!files) return problem;
  for (const auto& [name, value] : files->items()) {
    std::optional<ManifestEntry> entry = manifest_entry(value);
    if (!entry) return fmt::format("its manifest entry for '{}' is damaged", name);
    std::error_code error;
    const uint64_t actual = fs::file_size(checkpoint / name, error);
    if (error) return fmt::format("'{}' is missing", name);
    if (actual != entry->bytes) {
      return fmt::format("'{}' has {} bytes, the manifest says {} (truncated or overwritten)", name, actual,
                         entry->bytes);
    }
    if (checksums && !entry->checksum.empty()) {
      const std::string checksum = file_checksum(checkpoint / name);
      if (checksum != entry->checksum) {
        return fmt::format("'{}' has checksum {}, the manifest says {} (damaged on disk)", name, checksum,
                           entry->checksum);
      }
    }
  }
  return {};
}

}  // namespace

std::string file_checksum(const fs::path& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) fail_user("cannot read '{}' to check it: {}", path.string(), std::strerror(errno));
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state(XXH3_createState(), &XXH3_freeState);
  SUROGATE_CHECK(state != nullptr, "XXH3 state allocated");
  XXH3_64bits_reset(state.get());
  std::vector<char> buffer(size_t{8} << 20);
  while (size_t read = std::fread(buffer.data(), 1, buffer.size(), file.get())) {
    XXH3_64bits_update(state.get(), buffer.data(), read);
  }
  if (std::ferror(file.get())) fail_user("cannot read '{}' to check it (I/O error)", path.string());
  return fmt::format("{:016x}", static_cast<uint64_t>(XXH3_64bits_digest(state.get())));
}

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
  // A number past int64 (a stray folder such as checkpoint-9223372036854775808) is not a step this
  // engine writes: not a checkpoint, never a parse failure.
  int64_t step = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return step;
}

bool CheckpointStore::is_complete(const fs::path& checkpoint) { return check_files(checkpoint, false).empty(); }

std::string CheckpointStore::verification_problem(const fs::path& checkpoint) { return check_files(checkpoint, true); }

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

std::optional<fs::path> CheckpointStore::latest_verified(const std::function<void(const std::string&)>& warn) const {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code error;
  if (!fs::is_directory(root_, error)) return std::nullopt;
  for (const auto& entry : fs::directory_iterator(root_, error)) {
    if (!entry.is_directory()) continue;
    if (auto step = step_of(entry.path())) found.emplace_back(*step, entry.path());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [step, path] : found) {
    const std::string problem = verification_problem(path);
    if (problem.empty()) return path;
    if (warn) warn(fmt::format("checkpoint {} is skipped: {}", path.string(), problem));
  }
  return std::nullopt;
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

  // Every file flushed, then read back whole: the manifest records what is on disk.
  nlohmann::json marker = {{"format", "surogate-checkpoint-manifest"}, {"step", step},
                           {"files", nlohmann::json::object()}};
  for (const auto& entry : fs::recursive_directory_iterator(partial)) {
    if (!entry.is_regular_file()) continue;
    fsync_path(entry.path());
    marker["files"][fs::relative(entry.path(), partial).string()] = {{"bytes", entry.file_size()},
                                                                      {"xxh3_64", file_checksum(entry.path())}};
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
