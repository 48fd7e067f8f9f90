// resolve_model / resolve_dataset: local paths as is; hub ids through the cache. Online, the
// revision is resolved to a commit with the API, each wanted file is looked up with HEAD on the
// resolve endpoint (etag, size, commit) and downloaded into blobs/ unless already there;
// refs/<revision> is written last, so a ref always points at a complete snapshot. When the
// endpoint cannot be reached, or HF_HUB_OFFLINE=1, the cached snapshot is used.
#include "io/hf_hub.h"

#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/hub_cache.h"
#include "io/hub_http.h"
#include "io/hub_resolve.h"
#include "io/hub_settings.h"
#include "io/sha256.h"

namespace surogate::io {
namespace fs = std::filesystem;

namespace {

constexpr int kDownloadAttempts = 3;

struct RemoteFile {
  std::string etag;
  std::optional<uint64_t> size;
  std::string url;  // where to GET it
};

std::string repo_url_prefix(const HubSettings& settings, const HubRepo& repo) {
  return settings.endpoint + (repo.type == RepoType::Dataset ? "/datasets/" : "/") + repo.id;
}

std::string format_bytes(uint64_t bytes) {
  if (bytes >= 1'000'000'000) return fmt::format("{:.2f} GB", static_cast<double>(bytes) / 1e9);
  if (bytes >= 1'000'000) return fmt::format("{:.1f} MB", static_cast<double>(bytes) / 1e6);
  if (bytes >= 1'000) return fmt::format("{:.1f} kB", static_cast<double>(bytes) / 1e3);
  return fmt::format("{} B", bytes);
}

std::string header(const HttpResponse& response, const std::string& name) {
  auto found = response.headers.find(name);
  return found == response.headers.end() ? std::string() : found->second;
}

// Turns an HTTP error status into the message the user needs.
void check_status(const HttpResponse& response, const HubRepo& repo, const std::string& what) {
  if (response.status >= 200 && response.status < 400) return;
  const std::string code = header(response, "x-error-code");
  const std::string kind = repo.type == RepoType::Model ? "model" : "dataset";
  if (code == "RevisionNotFound") {
    fail_user("{} '{}' has no revision '{}'; check the branch, tag or commit after '@'", kind, repo.id,
              repo.revision);
  }
  if (code == "EntryNotFound") fail_user("{} '{}' has no file {}", kind, repo.id, what);
  if (code == "GatedRepo") {
    fail_user("{} '{}' is gated: accept its terms on its hub page, then set HF_TOKEN to a token of "
              "that account", kind, repo.id);
  }
  if (response.status == 401 || response.status == 403) {
    fail_user("access to {} '{}' was refused (HTTP {}): it is gated or private; set HF_TOKEN to a "
              "token with access (and accept the terms on its hub page)", kind, repo.id, response.status);
  }
  if (response.status == 404 || code == "RepositoryNotFound") {
    fail_user("{} '{}' was not found on the hub (HTTP 404); check the id (and the revision), or set "
              "HF_TOKEN if it is private", kind, repo.id);
  }
  fail_user("the hub answered HTTP {} for {} of {} '{}'; try again later", response.status, what, kind, repo.id);
}

// A revision is one URL segment: "refs/pr/1" → "refs%2Fpr%2F1" (as huggingface_hub quotes it).
std::string encode_revision(const std::string& revision) {
  std::string encoded;
  for (char c : url_encode_path(revision)) encoded += c == '/' ? std::string("%2F") : std::string(1, c);
  return encoded;
}

bool wanted_model_file(const std::string& name) {
  if (name.find('/') != std::string::npos) return false;  // sub-folders hold other formats
  static const char* kNames[] = {"config.json",          "generation_config.json", "tokenizer.json",
                                 "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                                 "vocab.json",           "merges.txt",             "added_tokens.json",
                                 "chat_template.jinja",  "chat_template.json"};
  for (const char* wanted : kNames) {
    if (name == wanted) return true;
  }
  return name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json");
}

std::vector<std::string> select_files(const nlohmann::json& info, const HubRepo& repo,
                                      const std::vector<std::string>& patterns) {
  std::vector<std::string> all;
  if (info.contains("siblings") && info["siblings"].is_array()) {
    for (const auto& sibling : info["siblings"]) {
      if (sibling.is_object() && sibling.contains("rfilename") && sibling["rfilename"].is_string()) {
        all.push_back(sibling["rfilename"].get<std::string>());
      }
    }
  }
  std::vector<std::string> selected;
  bool has_config = false, has_safetensors = false, has_other_weights = false;
  for (const std::string& name : all) {
    if (name == ".gitattributes") continue;
    check_repo_file_name(name);
    bool match = patterns.empty();
    for (const std::string& pattern : patterns) match = match || ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
    if (repo.type == RepoType::Model) {
      has_config = has_config || name == "config.json";
      has_safetensors = has_safetensors || name.ends_with(".safetensors");
      has_other_weights = has_other_weights || name.ends_with(".bin") || name.ends_with(".pth") ||
                          name.ends_with(".gguf");
      if (match && wanted_model_file(name)) selected.push_back(name);
    } else if (match) {
      selected.push_back(name);
    }
  }
  if (repo.type == RepoType::Model && !patterns.empty() && selected.empty()) {
    fail_user("model '{}' has no config, tokenizer or safetensors file matching the requested patterns", repo.id);
  }
  if (repo.type == RepoType::Model) {
    if (!has_config) {
      fail_user("model '{}' has no config.json: it is not a Hugging Face transformers model", repo.id);
    }
    if (!has_safetensors && has_other_weights) {
      fail_user("model '{}' has no .safetensors weights (only .bin/.pth/.gguf); Surogate reads safetensors: "
                "convert it with transformers' save_pretrained(safe_serialization=True) and pass the folder",
                repo.id);
    }
  } else if (selected.empty()) {
    fail_user("dataset '{}' has no files matching the requested patterns", repo.id);
  }
  return selected;
}

// The weight files a model needs, picked the way transformers picks them: the shards named by
// model.safetensors.index.json, else model.safetensors, else every top-level *.safetensors.
// Repos often carry a second copy in another layout (Mistral's consolidated.safetensors), which
// would double the download. `fetch_now` downloads one file and returns its local path (used for
// the index, which must be read before the shards are chosen).
std::vector<std::string> drop_unneeded_weights(const std::vector<std::string>& files, const HubRepo& repo,
                                               const std::function<fs::path(const std::string&)>& fetch_now) {
  constexpr std::string_view kIndex = "model.safetensors.index.json";
  auto listed = [&](std::string_view name) { return std::find(files.begin(), files.end(), name) != files.end(); };
  std::set<std::string> needed;
  if (listed(kIndex)) {
    const fs::path index_path = fetch_now(std::string(kIndex));
    std::ifstream stream(index_path);
    nlohmann::json index = nlohmann::json::parse(stream, nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      fail_user("model '{}': {} is not an index with a 'weight_map' object; the repo is broken, use a local "
                "folder instead", repo.id, kIndex);
    }
    needed.insert(std::string(kIndex));
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) fail_user("model '{}': {} maps '{}' to a non-string", repo.id, kIndex, tensor);
      const std::string& shard_name = shard.get_ref<const std::string&>();
      check_repo_file_name(shard_name);
      if (!listed(shard_name)) {
        fail_user("model '{}': {} names shard '{}', which the repo does not have (or --include excluded)",
                  repo.id, kIndex, shard_name);
      }
      needed.insert(shard_name);
    }
  } else if (listed("model.safetensors")) {
    needed.insert("model.safetensors");
  } else {
    return files;
  }
  std::vector<std::string> kept;
  for (const std::string& name : files) {
    const bool weights = name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json");
    if (!weights || needed.count(name) != 0) kept.push_back(name);
  }
  return kept;
}

class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::string label) : label_(std::move(label)), tty_(::isatty(STDERR_FILENO) == 1) {}
  void operator()(uint64_t done, uint64_t total) {
    if (total == 0) return;
    int percent = static_cast<int>(done * 100 / total);
    if (tty_ && percent != last_percent_) {
      std::fprintf(stderr, "\r  %s: %3d%% of %s", label_.c_str(), percent, format_bytes(total).c_str());
    } else if (!tty_ && percent / 25 != last_percent_ / 25) {
      std::fprintf(stderr, "  %s: %d%% of %s\n", label_.c_str(), percent, format_bytes(total).c_str());
    }
    last_percent_ = percent;
  }
  ~ProgressPrinter() {
    if (tty_ && last_percent_ >= 0) std::fprintf(stderr, "\n");
  }

 private:
  std::string label_;
  bool tty_;
  int last_percent_ = -1;
};

// HEAD on the resolve URL: the etag and size of the file (LFS files answer with a redirect
// carrying X-Linked-Etag / X-Linked-Size; plain files with ETag / Content-Length).
RemoteFile lookup_file(HttpClient& http, const HubSettings& settings, const HubRepo& repo,
                       const std::string& commit, const std::string& name) {
  RemoteFile remote;
  remote.url = repo_url_prefix(settings, repo) + "/resolve/" + commit + "/" + url_encode_path(name);
  HttpResponse response = http.head(remote.url);
  // Relative redirects (renamed repos) are followed; absolute ones lead to the file storage.
  for (int hop = 0; hop < 5 && response.status >= 300 && response.status < 400 &&
                    header(response, "x-linked-etag").empty() && header(response, "location").starts_with('/');
       ++hop) {
    remote.url = settings.endpoint + header(response, "location");
    response = http.head(remote.url);
  }
  check_status(response, repo, name);
  std::string etag = header(response, "x-linked-etag");
  if (etag.empty()) etag = header(response, "etag");
  if (etag.empty()) fail_user("the hub gave no ETag for {} of '{}'; check HF_ENDPOINT", name, repo.id);
  remote.etag = normalize_etag(etag);
  std::string size = header(response, "x-linked-size");
  if (size.empty()) size = header(response, "content-length");
  if (!size.empty() && size.find_first_not_of("0123456789") == std::string::npos && size.size() < 20) {
    remote.size = std::stoull(size);
  }
  return remote;
}

bool is_sha256_hex(const std::string& text) {
  if (text.size() != 64) return false;
  for (unsigned char c : text) {
    if (!std::isxdigit(c)) return false;
  }
  return true;
}

// Moves a finished .incomplete file into blobs/ after checking its size and (LFS) sha256.
void verify_and_commit(const fs::path& incomplete, const fs::path& blob, const RemoteFile& remote,
                       const HubRepo& repo, const std::string& name) {
  std::error_code error;
  uint64_t size = fs::file_size(incomplete, error);
  if (remote.size && size != *remote.size) {
    fs::remove(incomplete, error);
    fail_user("the download of {} from '{}' has {} bytes but the hub announced {}; the partial file was "
              "deleted: run again", name, repo.id, size, *remote.size);
  }
  if (is_sha256_hex(remote.etag)) {
    std::string digest = sha256_file_hex(incomplete);
    if (digest != remote.etag) {
      fs::remove(incomplete, error);
      fail_user("the download of {} from '{}' is corrupt: its sha256 is {} but the hub announced {}; "
                "the file was deleted: run again (check HF_ENDPOINT or any proxy if it keeps failing)",
                name, repo.id, digest, remote.etag);
    }
  }
  fs::rename(incomplete, blob, error);
  if (error) fail_user("cannot move {} into place: {}", blob.string(), error.message());
}

void fetch_blob(HttpClient& http, const RemoteFile& remote, const fs::path& blob, const HubRepo& repo,
                const std::string& name) {
  std::error_code error;
  fs::create_directories(blob.parent_path(), error);
  if (error) fail_user("cannot create {}: {}; check HF_HUB_CACHE", blob.parent_path().string(), error.message());
  fs::path incomplete = blob;
  incomplete += ".incomplete";
  for (int attempt = 1;; ++attempt) {
    uint64_t have = fs::exists(incomplete, error) ? fs::file_size(incomplete, error) : 0;
    if (remote.size && have > *remote.size) {
      fs::remove(incomplete, error);
      have = 0;
    }
    if (remote.size && have == *remote.size && have > 0) break;  // finished earlier, not yet verified
    if (have > 0) std::fprintf(stderr, "  resuming %s at %s\n", name.c_str(), format_bytes(have).c_str());
    ProgressPrinter printer(name);
    try {
      HttpResponse response = http.download(remote.url, incomplete, have,
                                             [&](uint64_t done, uint64_t total) { printer(done, total); });
      if (response.status == 416) {  // range not satisfiable: start over
        fs::remove(incomplete, error);
        if (attempt < kDownloadAttempts) continue;
      }
      check_status(response, repo, name);
      break;
    } catch (const HubInterruptedError& interrupted) {
      if (attempt >= kDownloadAttempts) {
        fail_user("{}; the partial file is kept at {}: run the same command again to resume",
                  interrupted.what(), incomplete.string());
      }
      std::fprintf(stderr, "  %s: transfer interrupted, retrying (%d of %d)\n", name.c_str(), attempt + 1,
                   kDownloadAttempts);
    }
  }
  verify_and_commit(incomplete, blob, remote, repo, name);
}

fs::path offline_snapshot(const HubCache& cache, const HubRepo& repo, const std::string& reason) {
  if (auto snapshot = cache.cached_snapshot(repo.revision)) return *snapshot;
  const std::string kind = repo.type == RepoType::Model ? "model" : "dataset";
  fail_user("{} '{}' (revision {}) is not in the Hugging Face cache at {} and {}; pass a local folder "
            "instead, or download it first with `surogate download {}` while online",
            kind, repo.id, repo.revision, cache.repo_folder().string(), reason,
            repo.id + (repo.type == RepoType::Dataset ? " --dataset" : ""));
}

// The revision API's answer ({"sha", "siblings"}), or nullopt when the hub cannot be reached, or
// answers 5xx / 429 while `cache_fallback` holds a snapshot (a note on stderr says so).
std::optional<nlohmann::json> fetch_revision_info(HttpClient& http, const HubSettings& settings, const HubRepo& repo,
                                                  const HubCache* cache_fallback) {
  const std::string api = settings.endpoint + "/api/" + std::string(repo_type_plural(repo.type)) + "/" +
                          repo.id + "/revision/" + encode_revision(repo.revision);
  HttpResponse response;
  try {
    response = http.get(api);
  } catch (const HubUnreachableError& unreachable) {
    if (cache_fallback != nullptr && cache_fallback->cached_snapshot(repo.revision)) {
      std::fprintf(stderr, "note: %s; using the cached copy of '%s'\n", unreachable.what(), repo.id.c_str());
      return std::nullopt;
    }
    if (cache_fallback != nullptr) {
      offline_snapshot(*cache_fallback, repo, fmt::format("the hub is unreachable ({})", unreachable.what()));
    }
    return std::nullopt;
  }
  // A hub that is up but failing (5xx, rate limited) is treated like an unreachable one when a
  // cached snapshot exists, as huggingface_hub does; 4xx answers (missing, gated) are not.
  if ((response.status >= 500 || response.status == 429) && cache_fallback != nullptr &&
      cache_fallback->cached_snapshot(repo.revision)) {
    std::fprintf(stderr, "note: the hub answered HTTP %ld; using the cached copy of '%s'\n", response.status,
                 repo.id.c_str());
    return std::nullopt;
  }
  check_status(response, repo, "the file list");
  nlohmann::json info = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (info.is_discarded() || !info.is_object() || !info.contains("sha") || !info["sha"].is_string()) {
    fail_user("the hub's answer for '{}' at {} is not the expected JSON; check HF_ENDPOINT", repo.id, api);
  }
  check_commit_hash(info["sha"].get<std::string>());
  return info;
}

fs::path resolve_online(const HubSettings& settings, const HubRepo& repo, const HubCache& cache,
                        const std::vector<std::string>& patterns) {
  HttpClient http(settings.token, settings.timeout_seconds);
  std::optional<nlohmann::json> answer = fetch_revision_info(http, settings, repo, &cache);
  if (!answer) return *cache.cached_snapshot(repo.revision);
  const nlohmann::json& info = *answer;
  const std::string commit = info["sha"].get<std::string>();
  std::vector<std::string> files = select_files(info, repo, patterns);
  const fs::path snapshot = cache.snapshot_folder(commit);
  std::error_code error;
  size_t fetched = 0;
  auto fetch = [&](const std::string& name) -> fs::path {
    if (fs::exists(snapshot / name, error)) return snapshot / name;  // a live link to a finished blob
    RemoteFile remote = lookup_file(http, settings, repo, commit, name);
    fs::path blob = cache.blob_path(remote.etag);
    if (!fs::exists(blob, error)) {
      // Another process (a second rank, a Python tool) may be fetching the same blob: wait for it,
      // then look again.
      FileLock lock(cache.lock_path(remote.etag));
      if (!fs::exists(blob, error)) {
        if (fetched++ == 0) {
          std::fprintf(stderr, "downloading %s into %s\n", repo.id.c_str(), cache.repo_folder().c_str());
        }
        std::fprintf(stderr, "  %s%s\n", name.c_str(),
                     remote.size ? fmt::format(" ({})", format_bytes(*remote.size)).c_str() : "");
        fetch_blob(http, remote, blob, repo, name);
      }
    }
    cache.link_snapshot_file(commit, name, remote.etag);
    return snapshot / name;
  };
  if (repo.type == RepoType::Model) files = drop_unneeded_weights(files, repo, fetch);
  for (const std::string& name : files) fetch(name);
  fs::create_directories(snapshot, error);
  cache.write_ref(repo.revision, commit);
  return snapshot;
}

fs::path resolve(const HubRepo& repo, const std::vector<std::string>& patterns) {
  const HubSettings settings = read_hub_settings();
  const HubCache cache(settings.cache_dir, repo);
  if (settings.offline) return offline_snapshot(cache, repo, "HF_HUB_OFFLINE is set");
  return resolve_online(settings, repo, cache, patterns);
}

bool looks_like_local_path(const std::string& text) {
  return text.starts_with('/') || text.starts_with("./") || text.starts_with("../") || text.starts_with('~') ||
         text == "." || text == ".." || std::count(text.begin(), text.end(), '/') > 1;
}

}  // namespace

bool looks_like_repo_id(const std::string& text) {
  std::error_code error;
  if (text.empty() || fs::exists(text, error) || looks_like_local_path(text)) return false;
  try {
    parse_repo_spec(text, RepoType::Model);
    return true;
  } catch (const UserError&) {
    return false;
  }
}

fs::path resolve_model(const std::string& model_or_path, const std::vector<std::string>& file_patterns) {
  std::error_code error;
  if (fs::is_directory(model_or_path, error)) return model_or_path;
  if (fs::exists(model_or_path, error)) {
    fail_user("model '{}' is a file; pass the model folder (holding config.json) or a hub id", model_or_path);
  }
  if (looks_like_local_path(model_or_path)) {
    fail_user("model folder '{}' does not exist; check the path", model_or_path);
  }
  return resolve(parse_repo_spec(model_or_path, RepoType::Model), file_patterns);
}

fs::path resolve_hub_snapshot(const std::string& repo_id, RepoType type, const std::string& revision,
                              const std::vector<std::string>& file_patterns) {
  HubRepo repo = parse_repo_spec(repo_id, type);
  if (revision.empty()) fail_user("'{}': the revision is empty; give a branch, tag or commit", repo_id);
  if (repo_id.find('@') == std::string::npos) {
    repo = parse_repo_spec(repo_id + "@" + revision, type);  // validates the revision the same way
  } else if (revision != "main" && revision != repo.revision) {
    fail_user("'{}' names revision '{}' but revision '{}' was also requested; give it once", repo_id,
              repo.revision, revision);
  }
  return resolve(repo, file_patterns);
}

std::optional<HubFileList> list_hub_files(const std::string& repo_id, RepoType type, const std::string& revision) {
  HubRepo repo = parse_repo_spec(repo_id.find('@') == std::string::npos ? repo_id + "@" + revision : repo_id, type);
  const HubSettings settings = read_hub_settings();
  if (settings.offline) return std::nullopt;
  HttpClient http(settings.token, settings.timeout_seconds);
  std::optional<nlohmann::json> info = fetch_revision_info(http, settings, repo, nullptr);
  if (!info) return std::nullopt;
  HubFileList list{(*info)["sha"].get<std::string>(), {}};
  if (info->contains("siblings") && (*info)["siblings"].is_array()) {
    for (const auto& sibling : (*info)["siblings"]) {
      if (sibling.is_object() && sibling.contains("rfilename") && sibling["rfilename"].is_string()) {
        const std::string& name = sibling["rfilename"].get_ref<const std::string&>();
        check_repo_file_name(name);
        list.files.push_back(name);
      }
    }
  }
  return list;
}

fs::path resolve_dataset(const std::string& dataset_or_path, const std::vector<std::string>& file_patterns) {
  std::error_code error;
  if (fs::exists(dataset_or_path, error)) return dataset_or_path;
  if (looks_like_local_path(dataset_or_path)) {
    fail_user("dataset path '{}' does not exist; check the path", dataset_or_path);
  }
  return resolve(parse_repo_spec(dataset_or_path, RepoType::Dataset), file_patterns);
}

}  // namespace surogate::io
