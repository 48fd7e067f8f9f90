// The Hugging Face cache layout and the validation of names coming from the hub (repo ids,
// revisions, etags, file paths), without any network.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>

#include "io/hf_hub.h"
#include "io/hub_cache.h"
#include "io/hub_resolve.h"
#include "io/hub_settings.h"
#include "io_test_helpers.h"

namespace surogate::io {
namespace {

using testing::expect_user_error;
using testing::TemporaryFolder;

TEST(HubRepoSpec, ParsesIdAndRevision) {
  HubRepo repo = parse_repo_spec("Qwen/Qwen3-0.6B", RepoType::Model);
  EXPECT_EQ(repo.id, "Qwen/Qwen3-0.6B");
  EXPECT_EQ(repo.revision, "main");
  repo = parse_repo_spec("org/name@v1.0", RepoType::Dataset);
  EXPECT_EQ(repo.id, "org/name");
  EXPECT_EQ(repo.revision, "v1.0");
  EXPECT_EQ(parse_repo_spec("gpt2", RepoType::Model).id, "gpt2");
  for (const char* bad : {"a/b/c", "org/", "/name", "org/na me", "org/..", "org/name@", "org/name@../x", "a--b/c"}) {
    SCOPED_TRACE(bad);
    expect_user_error([&] { parse_repo_spec(bad, RepoType::Model); }, {bad});
  }
}

TEST(HubRepoSpec, LocalPathsAreNotRepoIds) {
  EXPECT_TRUE(looks_like_repo_id("Qwen/Qwen3-0.6B"));
  EXPECT_FALSE(looks_like_repo_id("./Qwen/Qwen3-0.6B"));
  EXPECT_FALSE(looks_like_repo_id("/models/qwen"));
  EXPECT_FALSE(looks_like_repo_id("a/b/c"));
  TemporaryFolder folder;
  EXPECT_FALSE(looks_like_repo_id(folder.path().string()));
  EXPECT_EQ(resolve_model(folder.path().string()), folder.path());
  expect_user_error([&] { resolve_model((folder.path() / "absent").string()); }, {"does not exist"});
}

TEST(HubCacheLayout, FolderNamesFollowHuggingFace) {
  HubCache models("/cache", parse_repo_spec("Qwen/Qwen3-0.6B", RepoType::Model));
  EXPECT_EQ(models.repo_folder(), "/cache/models--Qwen--Qwen3-0.6B");
  HubCache datasets("/cache", parse_repo_spec("HuggingFaceH4/ultrachat_200k", RepoType::Dataset));
  EXPECT_EQ(datasets.repo_folder(), "/cache/datasets--HuggingFaceH4--ultrachat_200k");
  EXPECT_EQ(datasets.blob_path("abc"), "/cache/datasets--HuggingFaceH4--ultrachat_200k/blobs/abc");
}

TEST(HubCacheLayout, SnapshotLinksAreRelativeAndRefsResolve) {
  TemporaryFolder folder;
  HubRepo repo = parse_repo_spec("org/name", RepoType::Model);
  HubCache cache(folder.path(), repo);
  const std::string commit(40, 'a');
  std::filesystem::create_directories(cache.blob_path("x").parent_path());
  std::ofstream(cache.blob_path("etag1")) << "content";
  EXPECT_FALSE(cache.cached_snapshot("main").has_value());
  cache.link_snapshot_file(commit, "sub/dir/file.txt", "etag1");
  std::filesystem::path link = cache.snapshot_folder(commit) / "sub/dir/file.txt";
  ASSERT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(std::filesystem::read_symlink(link), "../../../../blobs/etag1");
  EXPECT_EQ(testing::read_bytes(link), "content");
  cache.write_ref("main", commit);
  EXPECT_EQ(testing::read_bytes(cache.repo_folder() / "refs/main"), commit);
  EXPECT_EQ(cache.cached_snapshot("main"), cache.snapshot_folder(commit));
  EXPECT_EQ(cache.cached_snapshot(commit), cache.snapshot_folder(commit));
  EXPECT_FALSE(cache.cached_snapshot("dev").has_value());
}

TEST(HubNames, RejectsUnsafeNamesFromTheServer) {
  EXPECT_EQ(normalize_etag("\"abc123\""), "abc123");
  EXPECT_EQ(normalize_etag("W/\"abc-1\""), "abc-1");
  for (const char* bad : {"\"../x\"", "\"\"", "a/b", ".."}) expect_user_error([&] { normalize_etag(bad); }, {"ETag"});
  check_repo_file_name("data/train-00000.parquet");
  for (const char* bad : {"../x", "/etc/passwd", "a/../../b", "a//b", "./a", "a\\b"}) {
    SCOPED_TRACE(bad);
    expect_user_error([&] { check_repo_file_name(bad); }, {"not a safe relative path"});
  }
  check_commit_hash(std::string(40, 'f'));
  expect_user_error([] { check_commit_hash("main"); }, {"40-digit"});
}

using Variables = std::map<std::string, std::optional<std::string>>;

// Sets the HF_* variables for one test and restores the previous environment afterwards.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(const Variables& values) {
    for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME",
                             "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE",
                             "HF_ENDPOINT", "HF_HUB_DOWNLOAD_TIMEOUT"}) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      ::unsetenv(name);
    }
    for (const auto& [name, value] : values) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
    }
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST(HubSettings, CacheFolderPrecedenceFollowsHuggingfaceHub) {
  {
    ScopedEnvironment env(Variables{{"HOME", "/home/u"}});
    EXPECT_EQ(read_hub_settings().cache_dir, "/home/u/.cache/huggingface/hub");
    EXPECT_EQ(read_hub_settings().endpoint, "https://huggingface.co");
    EXPECT_FALSE(read_hub_settings().offline);
  }
  {
    ScopedEnvironment env(Variables{{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "/xdg"}});
    EXPECT_EQ(read_hub_settings().cache_dir, "/xdg/huggingface/hub");
  }
  {
    ScopedEnvironment env(Variables{{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "/xdg"}, {"HF_HOME", "/hf"}});
    EXPECT_EQ(read_hub_settings().cache_dir, "/hf/hub");
  }
  {
    ScopedEnvironment env(Variables{{"HOME", "/home/u"}, {"HF_HOME", "/hf"}, {"HF_HUB_CACHE", "/cache"}});
    EXPECT_EQ(read_hub_settings().cache_dir, "/cache");
  }
  {
    ScopedEnvironment env(Variables{});
    expect_user_error([] { read_hub_settings(); }, {"HF_HUB_CACHE", "HF_HOME"});
  }
}

TEST(HubSettings, TokenOfflineEndpointAndTimeout) {
  TemporaryFolder folder;
  std::ofstream(folder.path() / "token") << "hf_file_token\n";
  {
    ScopedEnvironment env(Variables{{"HF_HOME", folder.path().string()}});
    EXPECT_EQ(read_hub_settings().token, "hf_file_token");  // what `huggingface-cli login` writes
  }
  {
    ScopedEnvironment env(Variables{{"HF_HOME", folder.path().string()}, {"HF_TOKEN", " hf_env \n"},
                           {"HF_HUB_OFFLINE", "1"}, {"HF_ENDPOINT", "http://127.0.0.1:9/"},
                           {"HF_HUB_DOWNLOAD_TIMEOUT", "5"}});
    HubSettings settings = read_hub_settings();
    EXPECT_EQ(settings.token, "hf_env");
    EXPECT_TRUE(settings.offline);
    EXPECT_EQ(settings.endpoint, "http://127.0.0.1:9");
    EXPECT_EQ(settings.timeout_seconds, 5);
  }
  for (const char* value : {"true", "YES", "on"}) {
    ScopedEnvironment env(Variables{{"HOME", "/home/u"}, {"HF_HUB_OFFLINE", value}});
    EXPECT_TRUE(read_hub_settings().offline) << value;
  }
  {
    ScopedEnvironment env(Variables{{"HOME", "/home/u"}, {"HF_HUB_OFFLINE", "0"}});
    EXPECT_FALSE(read_hub_settings().offline);
  }
  {
    ScopedEnvironment env(Variables{{"HOME", "/home/u"}, {"HF_HUB_DOWNLOAD_TIMEOUT", "soon"}});
    expect_user_error([] { read_hub_settings(); }, {"HF_HUB_DOWNLOAD_TIMEOUT", "soon"});
  }
}

TEST(HubResolve, OfflineWithoutCacheNamesTheRepoAndTheWayOut) {
  TemporaryFolder folder;
  ScopedEnvironment env(Variables{{"HF_HUB_CACHE", folder.path().string()}, {"HF_HUB_OFFLINE", "1"},
                         {"HF_ENDPOINT", "http://127.0.0.1:9"}});
  expect_user_error([] { resolve_hub_snapshot("org/data", RepoType::Dataset, "v2"); },
                    {"dataset 'org/data' (revision v2)", "datasets--org--data", "HF_HUB_OFFLINE",
                     "pass a local folder"});
  // A cached snapshot is used as is, by ref or by commit, with no network at all.
  HubCache cache(folder.path(), parse_repo_spec("org/data", RepoType::Dataset));
  const std::string commit(40, 'c');
  std::filesystem::create_directories(cache.snapshot_folder(commit));
  cache.write_ref("v2", commit);
  EXPECT_EQ(resolve_hub_snapshot("org/data", RepoType::Dataset, "v2"), cache.snapshot_folder(commit));
  EXPECT_EQ(resolve_hub_snapshot("org/data@v2", RepoType::Dataset), cache.snapshot_folder(commit));
  EXPECT_EQ(resolve_hub_snapshot("org/data", RepoType::Dataset, commit), cache.snapshot_folder(commit));
  expect_user_error([] { resolve_hub_snapshot("org/data@v2", RepoType::Dataset, "v3"); }, {"give it once"});
  expect_user_error([] { resolve_hub_snapshot("org/data", RepoType::Model, "v2"); }, {"model 'org/data'"});
  expect_user_error([] { resolve_hub_snapshot("not a/repo", RepoType::Dataset); }, {"not a/repo"});
}

}  // namespace
}  // namespace surogate::io
