// SafetensorsFile / SafetensorsCheckpoint: reading valid files of every dtype, lookups across
// shards, float32 conversion, and one clear error per kind of damaged file or index.
#include <gtest/gtest.h>

#include <cstring>

#include "core/bfloat16.h"
#include "io/safetensors.h"
#include "io_test_helpers.h"

namespace surogate::io {
namespace {

using testing::expect_user_error;
using testing::safetensors_bytes;
using testing::TemporaryFolder;
using testing::write_bytes;

std::string float_bytes(std::initializer_list<float> values) {
  std::string bytes;
  for (float value : values) bytes.append(reinterpret_cast<const char*>(&value), sizeof(value));
  return bytes;
}

TEST(SafetensorsReader, ReadsTensorsAndMetadata) {
  TemporaryFolder folder;
  std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]},)"
      R"("a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  write_bytes(folder.path() / "m.safetensors", safetensors_bytes(header, float_bytes({1, 2, 3, 4, 5})));
  SafetensorsFile file = SafetensorsFile::open(folder.path() / "m.safetensors");
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensors()[0].name, "a");  // offset order
  EXPECT_EQ(file.metadata().at("format"), "pt");
  const SafetensorsTensor& b = file.tensor("b");
  EXPECT_EQ(b.shape, std::vector<int64_t>{2});
  EXPECT_EQ(b.element_count(), 2);
  EXPECT_EQ(read_tensor_as_float32(b), (std::vector<float>{4, 5}));
  EXPECT_EQ(file.find("missing"), nullptr);
  expect_user_error([&] { file.tensor("missing"); }, {"m.safetensors", "missing"});
}

TEST(SafetensorsReader, AcceptsEveryDtypeAndEmptyTensors) {
  TemporaryFolder folder;
  const std::pair<const char*, int> dtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2},
                                                {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I64", 8}, {"I32", 4},
                                                {"I16", 2}, {"I8", 1}, {"U8", 1}, {"BOOL", 1}};
  std::string header = "{";
  size_t offset = 0;
  for (const auto& [name, size] : dtypes) {
    header += fmt::format(R"("t_{}":{{"dtype":"{}","shape":[2,1],"data_offsets":[{},{}]}},)", name, name,
                          offset, offset + 2 * size);
    offset += 2 * size;
  }
  header += fmt::format(R"("empty":{{"dtype":"F32","shape":[0,4],"data_offsets":[{},{}]}}}})", offset, offset);
  write_bytes(folder.path() / "all.safetensors", safetensors_bytes(header, std::string(offset, '\x01')));
  SafetensorsFile file = SafetensorsFile::open(folder.path() / "all.safetensors");
  EXPECT_EQ(file.tensors().size(), 13u);
  for (const auto& [name, size] : dtypes) {
    const SafetensorsTensor& tensor = file.tensor(std::string("t_") + name);
    EXPECT_EQ(tensor.dtype, *dtype_from_safetensors_name(name));
    EXPECT_EQ(tensor.bytes.size(), static_cast<size_t>(2 * size));
  }
  EXPECT_EQ(file.tensor("empty").element_count(), 0);
  expect_user_error([&] { read_tensor_as_float32(file.tensor("t_I32")); }, {"t_I32", "I32"});
}

TEST(SafetensorsReader, ConvertsHalfPrecisionToFloat) {
  TemporaryFolder folder;
  uint16_t half[2] = {0x3c00, 0xc000};                          // 1.0, -2.0
  uint16_t brain[2] = {float_to_bf16(0.5f), float_to_bf16(3.0f)};
  double wide[1] = {0.25};
  std::string data(reinterpret_cast<const char*>(half), 4);
  data.append(reinterpret_cast<const char*>(brain), 4);
  data.append(reinterpret_cast<const char*>(wide), 8);
  std::string header = R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                       R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]},)"
                       R"("d":{"dtype":"F64","shape":[],"data_offsets":[8,16]}})";
  write_bytes(folder.path() / "h.safetensors", safetensors_bytes(header, data));
  SafetensorsFile file = SafetensorsFile::open(folder.path() / "h.safetensors");
  EXPECT_EQ(read_tensor_as_float32(file.tensor("h")), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(read_tensor_as_float32(file.tensor("b")), (std::vector<float>{0.5f, 3.0f}));
  EXPECT_EQ(read_tensor_as_float32(file.tensor("d")), (std::vector<float>{0.25f}));
}

TEST(SafetensorsReader, FileLevelErrorsNameTheFile) {
  TemporaryFolder folder;
  auto path = folder.path() / "bad.safetensors";
  write_bytes(path, "abc");
  expect_user_error([&] { SafetensorsFile::open(path); }, {"bad.safetensors", "too short"});
  write_bytes(path, safetensors_bytes("{}", "").substr(0, 8) + "{");  // says 2, holds 1
  expect_user_error([&] { SafetensorsFile::open(path); }, {"bad.safetensors", "truncated"});
  std::string huge(8, '\0');
  huge[4] = 1;  // 2^32 bytes
  write_bytes(path, huge + "{}");
  expect_user_error([&] { SafetensorsFile::open(path); }, {"bad.safetensors", "100 MB"});
  expect_user_error([&] { SafetensorsFile::open(folder.path() / "absent.safetensors"); }, {"absent.safetensors"});
}

struct BadHeader {
  const char* label;
  std::string header;
  uint64_t data_size;
  std::string fragment;
};

TEST(SafetensorsReader, RejectsEveryKindOfBadHeader) {
  const std::vector<BadHeader> cases = {
      {"invalid json", R"({"a":)", 0, "not valid JSON"},
      {"not object", R"([1,2])", 0, "must be a JSON object"},
      {"entry not object", R"({"a":5})", 0, "must be an object"},
      {"missing dtype", R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4, "missing 'dtype'"},
      {"unknown dtype", R"({"a":{"dtype":"F12","shape":[1],"data_offsets":[0,4]}})", 4, "unknown dtype 'F12'"},
      {"negative shape", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, "negative"},
      {"float shape", R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4, "non-negative integers"},
      {"overflowing shape",
       R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4, "overflows"},
      {"byte overflow", R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]}})", 4,
       "overflows"},
      {"offsets arity", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4, "[begin, end]"},
      {"offsets reversed", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", 4, "before begin"},
      {"out of range", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4, "past the end"},
      {"size mismatch", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4, "needs 8"},
      {"duplicate", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
       2, "twice"},
      {"overlap", R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
       3, "overlaps"},
      {"gap", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})",
       3, "unused bytes"},
      {"trailing data", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 5, "tensors use 1"},
      {"metadata not strings", R"({"__metadata__":{"k":1}})", 0, "__metadata__"},
      {"empty name", R"({"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1, "empty name"},
      // Deep nesting must not exhaust the stack (parser and destructor are not recursive).
      {"deep nesting", R"({"a":)" + std::string(200000, '[') + std::string(200000, ']') + "}", 0,
       "must be an object"},
      {"deep unterminated", std::string(200000, '['), 0, "not valid JSON"},
  };
  for (const BadHeader& bad : cases) {
    SCOPED_TRACE(bad.label);
    expect_user_error([&] { parse_safetensors_header(bad.header, bad.data_size, "x.safetensors"); },
                      {"x.safetensors", bad.fragment});
  }
}

void write_shard(const std::filesystem::path& path, const std::string& name, float value) {
  std::string header = fmt::format(R"({{"{}":{{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}}})", name);
  write_bytes(path, safetensors_bytes(header, float_bytes({value})));
}

TEST(SafetensorsCheckpoint, LooksUpAcrossShards) {
  TemporaryFolder folder;
  write_shard(folder.path() / "model-00001-of-00002.safetensors", "x", 1.0f);
  write_shard(folder.path() / "model-00002-of-00002.safetensors", "y", 2.0f);
  write_bytes(folder.path() / "model.safetensors.index.json",
              R"({"metadata":{"total_size":8},"weight_map":{"x":"model-00001-of-00002.safetensors",)"
              R"("y":"model-00002-of-00002.safetensors"}})");
  SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(folder.path());
  EXPECT_EQ(checkpoint.tensor_names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(read_tensor_as_float32(checkpoint.tensor("y")), (std::vector<float>{2.0f}));
  EXPECT_EQ(checkpoint.file_of("x").filename(), "model-00001-of-00002.safetensors");
  EXPECT_EQ(checkpoint.metadata().at("total_size"), "8");
  EXPECT_EQ(checkpoint.total_size_bytes(), 8u);
  EXPECT_EQ(checkpoint.files().size(), 2u);
  SafetensorsCheckpoint moved = std::move(checkpoint);  // spans survive a move
  EXPECT_EQ(read_tensor_as_float32(moved.tensor("x")), (std::vector<float>{1.0f}));
  expect_user_error([&] { moved.tensor("z"); }, {"no tensor named 'z'"});
}

TEST(SafetensorsCheckpoint, SingleFileFolderAndDirectFile) {
  TemporaryFolder folder;
  write_shard(folder.path() / "model.safetensors", "w", 7.0f);
  EXPECT_TRUE(SafetensorsCheckpoint::open(folder.path()).contains("w"));
  EXPECT_TRUE(SafetensorsCheckpoint::open(folder.path() / "model.safetensors").contains("w"));
}

TEST(SafetensorsCheckpoint, IndexErrorsNameTheProblem) {
  TemporaryFolder folder;
  expect_user_error([&] { SafetensorsCheckpoint::open(folder.path()); }, {"no model.safetensors"});
  auto index = folder.path() / "model.safetensors.index.json";
  write_bytes(index, R"({"weight_map":{"x":"missing.safetensors"}})");
  expect_user_error([&] { SafetensorsCheckpoint::open(folder.path()); },
                    {"model.safetensors.index.json", "missing.safetensors", "missing"});
  write_shard(folder.path() / "a.safetensors", "x", 1.0f);
  write_bytes(index, R"({"weight_map":{"x":"a.safetensors","q":"a.safetensors"}})");
  expect_user_error([&] { SafetensorsCheckpoint::open(folder.path()); }, {"'q'", "does not hold it"});
  write_bytes(index, R"({"weight_map":{"x":"../a.safetensors"}})");
  expect_user_error([&] { SafetensorsCheckpoint::open(folder.path()); }, {"not a file name inside"});
  write_bytes(index, R"({"metadata":{}})");
  expect_user_error([&] { SafetensorsCheckpoint::open(folder.path()); }, {"weight_map"});
  write_bytes(index, R"({"weight_map":)");
  expect_user_error([&] { SafetensorsCheckpoint::open(folder.path()); }, {"not valid JSON"});
}

}  // namespace
}  // namespace surogate::io
