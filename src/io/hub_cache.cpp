// Layout helpers for the Hugging Face cache; every write is a rename so concurrent readers
// never see a half-written ref or link.
#include "io/hub_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fstream>

#include "core/error.h"
#include "io/atomic_file.h"

namespace surogate::io {
namespace fs = std::filesystem;

namespace {

bool valid_id_part(const std::string& part) {
  if (part.empty() || part.size() > 96 || part == "." || part == ".." || part.starts_with('-') ||
      part.find("--") != std::string::npos) {
    return false;
  }
  for (unsigned char c : part) {
    if (!std::isalnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

}  // namespace

std::string_view repo_type_plural(RepoType type) { return type == RepoType::Model ? "models" : "datasets"; }

bool is_commit_hash(const std::string& text) {
  if (text.size() != 40) return false;
  for (unsigned char c : text) {
    if (!std::isxdigit(c) || std::isupper(c)) return false;
  }
  return true;
}

HubRepo parse_repo_spec(const std::string& spec, RepoType type) {
  HubRepo repo;
  repo.type = type;
  repo.id = spec;
  size_t at = spec.find('@');
  if (at != std::string::npos) {
    repo.id = spec.substr(0, at);
    repo.revision = spec.substr(at + 1);
    if (repo.revision.empty()) fail_user("'{}': the revision after '@' is empty", spec);
    if (repo.revision.find("..") != std::string::npos || repo.revision.starts_with('/') ||
        repo.revision.find('\\') != std::string::npos) {
      fail_user("'{}': '{}' is not a valid revision (a branch, tag or commit)", spec, repo.revision);
    }
  }
  size_t slash = repo.id.find('/');
  bool valid = slash == std::string::npos
                   ? valid_id_part(repo.id)
                   : repo.id.find('/', slash + 1) == std::string::npos &&
                         valid_id_part(repo.id.substr(0, slash)) && valid_id_part(repo.id.substr(slash + 1));
  if (!valid) {
    fail_user("'{}' is neither an existing local path nor a Hugging Face {} id like 'org/name' "
              "(optionally '@revision'); check the spelling", spec, type == RepoType::Model ? "model" : "dataset");
  }
  return repo;
}

HubCache::HubCache(fs::path cache_dir, const HubRepo& repo) {
  std::string folder = std::string(repo_type_plural(repo.type)) + "--" + repo.id;
  for (size_t position = folder.find('/'); position != std::string::npos; position = folder.find('/')) {
    folder.replace(position, 1, "--");
  }
  repo_folder_ = cache_dir / folder;
}

fs::path HubCache::blob_path(const std::string& etag) const { return repo_folder_ / "blobs" / etag; }

fs::path HubCache::snapshot_folder(const std::string& commit) const {
  return repo_folder_ / "snapshots" / commit;
}

fs::path HubCache::lock_path(const std::string& etag) const {
  return repo_folder_.parent_path() / ".locks" / repo_folder_.filename() / (etag + ".lock");
}

FileLock::FileLock(const fs::path& path) {
  std::error_code error;
  fs::create_directories(path.parent_path(), error);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    fail_user("cannot create the lock file {}: {}; check the Hugging Face cache folder is writable",
              path.string(), std::strerror(errno));
  }
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    int saved = errno;
    ::close(fd_);
    fail_user("cannot lock {}: {}", path.string(), std::strerror(saved));
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

std::optional<fs::path> HubCache::cached_snapshot(const std::string& revision) const {
  std::error_code error;
  if (is_commit_hash(revision) && fs::is_directory(snapshot_folder(revision), error)) {
    return snapshot_folder(revision);
  }
  std::ifstream stream(repo_folder_ / "refs" / revision);
  std::string commit;
  if (!stream || !std::getline(stream, commit) || !is_commit_hash(commit)) return std::nullopt;
  if (!fs::is_directory(snapshot_folder(commit), error)) return std::nullopt;
  return snapshot_folder(commit);
}

void HubCache::write_ref(const std::string& revision, const std::string& commit) const {
  if (revision == commit) return;
  const fs::path ref = repo_folder_ / "refs" / revision;  // "refs/pr/1" nests, as in huggingface_hub
  std::error_code error;
  fs::create_directories(ref.parent_path(), error);
  write_text_file_atomically(ref, commit);
}

void HubCache::link_snapshot_file(const std::string& commit, const std::string& file,
                                  const std::string& etag) const {
  fs::path link = snapshot_folder(commit) / file;
  std::error_code error;
  fs::create_directories(link.parent_path(), error);
  if (error) fail_user("cannot create {}: {}", link.parent_path().string(), error.message());
  fs::path target = blob_path(etag).lexically_relative(link.parent_path());
  fs::path temporary = link;
  temporary += ".link." + std::to_string(::getpid());
  fs::remove(temporary, error);
  fs::create_symlink(target, temporary, error);
  if (!error) fs::rename(temporary, link, error);
  if (error) {
    fs::remove(temporary, error);
    fail_user("cannot create the link {} in the Hugging Face cache: {}; check the cache folder is "
              "writable", link.string(), error.message());
  }
}

void check_repo_file_name(const std::string& name) {
  fs::path path(name);
  bool bad = name.empty() || path.is_absolute() || name.find('\\') != std::string::npos ||
             name.find("//") != std::string::npos || name.ends_with('/') ||
             name.find('\0') != std::string::npos;
  for (const auto& part : path) bad = bad || part == ".." || part == "." || part.empty();
  if (bad) fail_user("the hub listed a file named '{}', which is not a safe relative path; refusing it", name);
}

void check_commit_hash(const std::string& commit) {
  if (!is_commit_hash(commit)) {
    fail_user("the hub answered with '{}' as commit, not a 40-digit hash; check HF_ENDPOINT", commit);
  }
}

std::string normalize_etag(const std::string& etag) {
  std::string value = etag;
  if (value.starts_with("W/")) value = value.substr(2);
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
  bool valid = !value.empty() && value.size() <= 128 && value != "." && value != "..";
  for (unsigned char c : value) valid = valid && (std::isalnum(c) || c == '-' || c == '_' || c == '.');
  if (!valid) fail_user("the hub answered with an unusable ETag '{}'; check HF_ENDPOINT", etag);
  return value;
}

}  // namespace surogate::io
