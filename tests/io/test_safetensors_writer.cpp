// The writer: byte layout (8-byte aligned, space-padded header), round trips through the reader
// for every dtype, sharding by size with the transformers names and index, atomic replacement,
// and max_shard_size parsing.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "io_test_helpers.h"

namespace surogate::io {
namespace {

using testing::expect_user_error;
using testing::read_bytes;
using testing::TemporaryFolder;

std::span<const std::byte> as_bytes(const std::vector<float>& values) {
  return std::as_bytes(std::span<const float>(values));
}

TEST(SafetensorsWriter, HeaderIsPaddedToEightBytesWithSpaces) {
  TemporaryFolder folder;
  std::vector<float> values = {1, 2, 3};
  TensorToWrite tensor{"weight", DType::F32, {3}, as_bytes(values)};
  write_safetensors(folder.path() / "a.safetensors", std::span(&tensor, 1), {{"format", "pt"}});
  std::string bytes = read_bytes(folder.path() / "a.safetensors");
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ(header_size % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + header_size + 12);
  std::string header = bytes.substr(8, header_size);
  EXPECT_EQ(header.front(), '{');
  size_t end = header.find_last_not_of(' ');
  EXPECT_EQ(header[end], '}');
  auto parsed = nlohmann::json::parse(header);
  EXPECT_EQ(parsed["__metadata__"]["format"], "pt");
  EXPECT_EQ(parsed["weight"]["data_offsets"], nlohmann::json::array({0, 12}));
}

TEST(SafetensorsWriter, RoundTripsEveryDtype) {
  TemporaryFolder folder;
  std::vector<std::vector<std::byte>> storage;
  std::vector<TensorToWrite> tensors;
  int index = 0;
  for (DType dtype : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::F8_E4M3, DType::F8_E5M2,
                      DType::I64, DType::I32, DType::I16, DType::I8, DType::U8, DType::BOOL}) {
    std::vector<std::byte> bytes(dtype_size_bytes(dtype) * 6);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>((i * 7 + index) & 0xff);
    storage.push_back(std::move(bytes));
    tensors.push_back({"t" + std::to_string(index++), dtype, {2, 3}, storage.back()});
  }
  std::vector<std::byte> nothing;
  tensors.push_back({"empty", DType::F32, {0}, nothing});
  write_safetensors(folder.path() / "all.safetensors", tensors);
  SafetensorsFile file = SafetensorsFile::open(folder.path() / "all.safetensors");
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (const TensorToWrite& written : tensors) {
    const SafetensorsTensor& read = file.tensor(written.name);
    EXPECT_EQ(read.dtype, written.dtype);
    EXPECT_EQ(read.shape, written.shape);
    ASSERT_EQ(read.bytes.size(), written.bytes.size());
    EXPECT_TRUE(std::equal(read.bytes.begin(), read.bytes.end(), written.bytes.begin())) << written.name;
  }
}

TEST(SafetensorsWriter, ShardsBySizeWithIndex) {
  TemporaryFolder folder;
  std::vector<float> a(100, 1.0f), b(100, 2.0f), c(300, 3.0f), d(10, 4.0f);  // 400, 400, 1200, 40 bytes
  std::vector<TensorToWrite> tensors = {{"a", DType::F32, {100}, as_bytes(a)},
                                        {"b", DType::F32, {10, 10}, as_bytes(b)},
                                        {"c", DType::F32, {300}, as_bytes(c)},
                                        {"d", DType::F32, {10}, as_bytes(d)}};
  ShardedWriteResult result = write_safetensors_sharded(folder.path() / "out", tensors, 800, {{"format", "pt"}});
  ASSERT_EQ(result.files.size(), 3u);  // [a b] [c (over the limit, alone)] [d]
  EXPECT_EQ(result.files[0].filename(), "model-00001-of-00003.safetensors");
  EXPECT_EQ(result.files[2].filename(), "model-00003-of-00003.safetensors");
  EXPECT_EQ(result.total_size_bytes, 2040u);
  auto index = nlohmann::json::parse(read_bytes(result.index_file));
  EXPECT_EQ(index["metadata"]["total_size"], 2040);
  EXPECT_EQ(index["weight_map"]["b"], "model-00001-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["c"], "model-00002-of-00003.safetensors");
  SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(folder.path() / "out");
  EXPECT_EQ(checkpoint.tensor_count(), 4u);
  EXPECT_EQ(read_tensor_as_float32(checkpoint.tensor("c")), c);
  EXPECT_EQ(checkpoint.tensor("b").shape, (std::vector<int64_t>{10, 10}));
  EXPECT_EQ(SafetensorsFile::open(result.files[1]).metadata().at("format"), "pt");
}

TEST(SafetensorsWriter, OneShardMeansNoIndex) {
  TemporaryFolder folder;
  std::vector<float> a(4, 1.0f);
  TensorToWrite tensor{"a", DType::F32, {4}, as_bytes(a)};
  ShardedWriteResult result = write_safetensors_sharded(folder.path(), std::span(&tensor, 1), 1'000'000);
  ASSERT_EQ(result.files.size(), 1u);
  EXPECT_EQ(result.files[0].filename(), "model.safetensors");
  EXPECT_TRUE(result.index_file.empty());
  EXPECT_FALSE(std::filesystem::exists(folder.path() / "model.safetensors.index.json"));
}

TEST(SafetensorsWriter, ASecondSaveRemovesTheFilesOfTheFirst) {
  TemporaryFolder folder;
  std::vector<float> a(100, 1.0f), b(100, 2.0f), c(100, 3.0f);
  std::vector<TensorToWrite> tensors = {{"a", DType::F32, {100}, as_bytes(a)},
                                        {"b", DType::F32, {100}, as_bytes(b)},
                                        {"c", DType::F32, {100}, as_bytes(c)}};
  auto names = [&] {
    std::set<std::string> found;
    for (const auto& item : std::filesystem::directory_iterator(folder.path())) {
      found.insert(item.path().filename().string());
    }
    return found;
  };
  testing::write_bytes(folder.path() / "notes.txt", "kept");
  testing::write_bytes(folder.path() / "adapter_model.safetensors", "kept: another base name");
  EXPECT_EQ(write_safetensors_sharded(folder.path(), tensors, 400).files.size(), 3u);
  EXPECT_EQ(write_safetensors_sharded(folder.path(), tensors, 800).files.size(), 2u);  // 3 shards -> 2
  EXPECT_EQ(names(), (std::set<std::string>{"notes.txt", "adapter_model.safetensors",
                                            "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                            "model.safetensors.index.json"}));
  write_safetensors_sharded(folder.path(), tensors, 1'000'000);  // one file: the index must go
  EXPECT_EQ(names(), (std::set<std::string>{"notes.txt", "adapter_model.safetensors", "model.safetensors"}));
  EXPECT_EQ(SafetensorsCheckpoint::open(folder.path()).tensor_count(), 3u);
  write_safetensors_sharded(folder.path(), tensors, 400);  // sharded again: the single file must go
  EXPECT_FALSE(std::filesystem::exists(folder.path() / "model.safetensors"));
  EXPECT_EQ(read_tensor_as_float32(SafetensorsCheckpoint::open(folder.path()).tensor("c")), c);
}

TEST(SafetensorsWriter, ReplacesAtomicallyAndLeavesNoTemporaryFiles) {
  TemporaryFolder folder;
  std::vector<float> first(4, 1.0f), second(2, 2.0f);
  TensorToWrite one{"x", DType::F32, {4}, as_bytes(first)};
  TensorToWrite two{"x", DType::F32, {2}, as_bytes(second)};
  auto path = folder.path() / "model.safetensors";
  write_safetensors(path, std::span(&one, 1));
  {
    SafetensorsFile open_before = SafetensorsFile::open(path);  // a reader keeps its mapping
    write_safetensors(path, std::span(&two, 1));
    EXPECT_EQ(read_tensor_as_float32(open_before.tensor("x")), first);
  }
  EXPECT_EQ(read_tensor_as_float32(SafetensorsFile::open(path).tensor("x")), second);
  size_t entries = 0;
  for (const auto& item : std::filesystem::directory_iterator(folder.path())) {
    ++entries;
    EXPECT_EQ(item.path().filename(), "model.safetensors");
  }
  EXPECT_EQ(entries, 1u);
}

TEST(SafetensorsWriter, MismatchedBytesAreABug) {
  TemporaryFolder folder;
  std::vector<float> values(3, 0.0f);
  TensorToWrite tensor{"x", DType::F32, {4}, as_bytes(values)};
  EXPECT_THROW(write_safetensors(folder.path() / "x.safetensors", std::span(&tensor, 1)), InternalError);
  EXPECT_FALSE(std::filesystem::exists(folder.path() / "x.safetensors"));
}

TEST(ByteSize, ParsesTransformersStyleSizes) {
  EXPECT_EQ(parse_byte_size("5GB", "max_shard_size"), 5'000'000'000u);
  EXPECT_EQ(parse_byte_size("500MB", "max_shard_size"), 500'000'000u);
  EXPECT_EQ(parse_byte_size("2GiB", "max_shard_size"), 2147483648u);
  EXPECT_EQ(parse_byte_size("1.5kb", "max_shard_size"), 1500u);
  EXPECT_EQ(parse_byte_size("1024", "max_shard_size"), 1024u);
  for (const char* bad : {"", "GB", "5XB", "-1GB", "0", "1.2.3MB"}) {
    expect_user_error([&] { parse_byte_size(bad, "max_shard_size"); }, {"max_shard_size"});
  }
}

}  // namespace
}  // namespace surogate::io
