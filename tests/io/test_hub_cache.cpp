// The Hugging Face cache layout and the validation of names coming from the hub (repo ids,
// revisions, etags, file paths), without any network.
#include <gtest/gtest.h>

#include <fstream>

#include "io/hf_hub.h"
#include "io/hub_cache.h"
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

}  // namespace
}  // namespace surogate::io
