// The Hugging Face cache layout (shared with huggingface_hub):
//   <cache>/<models|datasets>--org--name/blobs/<etag>            file contents, named by etag
//                                        blobs/<etag>.incomplete partial download (resumable)
//                                        snapshots/<commit>/<path> relative symlinks into blobs
//                                        refs/<revision>           the commit a revision points to
// Also the validation of every name that comes from the network before it becomes a path.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "io/hf_hub.h"

namespace surogate::io {

struct HubRepo {
  RepoType type = RepoType::Model;
  std::string id;                  // "org/name"
  std::string revision = "main";
};

// Parses "org/name" or "org/name@revision"; throws UserError for an invalid id.
HubRepo parse_repo_spec(const std::string& spec, RepoType type);
std::string_view repo_type_plural(RepoType type);  // "models" / "datasets"

class HubCache {
 public:
  HubCache(std::filesystem::path cache_dir, const HubRepo& repo);

  const std::filesystem::path& repo_folder() const { return repo_folder_; }
  std::filesystem::path blob_path(const std::string& etag) const;
  std::filesystem::path snapshot_folder(const std::string& commit) const;
  // <cache>/.locks/<repo folder>/<etag>.lock, the lock file huggingface_hub also uses (flock), so
  // Surogate processes and Python tools never download the same blob at once.
  std::filesystem::path lock_path(const std::string& etag) const;

  // The commit refs/<revision> names (or the revision itself when it is a commit hash with a
  // snapshot folder), if its snapshot exists.
  std::optional<std::filesystem::path> cached_snapshot(const std::string& revision) const;
  void write_ref(const std::string& revision, const std::string& commit) const;
  // Makes snapshots/<commit>/<file> a relative symlink to blobs/<etag>.
  void link_snapshot_file(const std::string& commit, const std::string& file, const std::string& etag) const;

 private:
  std::filesystem::path repo_folder_;
};

// An exclusive flock on a lock file, held for the object's lifetime (waits for other holders).
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path);
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  int fd_ = -1;
};

// Names from the server: a repo file path must be relative without "..", a commit 40 hex
// digits, an etag plain characters. Throw UserError (a broken or hostile server).
void check_repo_file_name(const std::string& name);
void check_commit_hash(const std::string& commit);
// Strips W/ and quotes; throws UserError when unusable as a file name.
std::string normalize_etag(const std::string& etag);
bool is_commit_hash(const std::string& text);

}  // namespace surogate::io
