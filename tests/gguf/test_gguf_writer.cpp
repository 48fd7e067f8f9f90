// The GGUF layout (gguf/gguf_writer.h) read back byte by byte: header, typed key-values, tensor
// infos with aligned offsets, padded data.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "core/error.h"
#include "gguf/gguf_writer.h"

namespace surogate::gguf {
namespace {

class Reader {
 public:
  explicit Reader(std::vector<char> bytes) : bytes_(std::move(bytes)) {}
  template <typename T>
  T read() {
    T value;
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::string string() {
    const auto size = read<uint64_t>();
    std::string text(bytes_.data() + at_, size);
    at_ += size;
    return text;
  }
  size_t at() const { return at_; }
  const std::vector<char>& bytes() const { return bytes_; }

 private:
  std::vector<char> bytes_;
  size_t at_ = 0;
};

std::vector<char> file_bytes(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(stream), {}};
}

TEST(GgufWriter, WritesHeaderKeyValuesTensorInfosAndAlignedData) {
  const auto path = std::filesystem::temp_directory_path() / "surogate_gguf_writer_test.gguf";
  Metadata metadata;
  metadata.set_string("general.architecture", "llama");
  metadata.set_u32("llama.block_count", 2);
  metadata.set_f32("llama.rope.freq_base", 10000.0f);
  metadata.set_bool("tokenizer.ggml.add_bos_token", true);
  metadata.set_string_array("tokenizer.ggml.tokens", {"a", "bc"});
  metadata.set_i32_array("tokenizer.ggml.token_type", {1, 3});
  metadata.set_u32("llama.block_count", 3);  // replaces, keeps its place
  const std::vector<TensorInfo> tensors = {{"first", {3}, GgmlType::F32}, {"second", {32, 2}, GgmlType::Q8_0}};
  write_gguf(path, metadata, tensors, [](const TensorSink& sink) {
    const float first[3] = {1.0f, 2.0f, 3.0f};
    sink(std::as_bytes(std::span(first)));
    std::vector<std::byte> second(68, std::byte{0x5a});
    sink(second);
  });
  Reader reader(file_bytes(path));
  EXPECT_EQ(reader.read<uint32_t>(), 0x46554747u);
  EXPECT_EQ(reader.read<uint32_t>(), 3u);
  EXPECT_EQ(reader.read<uint64_t>(), 2u);
  EXPECT_EQ(reader.read<uint64_t>(), 6u);
  EXPECT_EQ(reader.string(), "general.architecture");
  EXPECT_EQ(reader.read<uint32_t>(), 8u);
  EXPECT_EQ(reader.string(), "llama");
  EXPECT_EQ(reader.string(), "llama.block_count");
  EXPECT_EQ(reader.read<uint32_t>(), 4u);
  EXPECT_EQ(reader.read<uint32_t>(), 3u);
  EXPECT_EQ(reader.string(), "llama.rope.freq_base");
  EXPECT_EQ(reader.read<uint32_t>(), 6u);
  EXPECT_EQ(reader.read<float>(), 10000.0f);
  EXPECT_EQ(reader.string(), "tokenizer.ggml.add_bos_token");
  EXPECT_EQ(reader.read<uint32_t>(), 7u);
  EXPECT_EQ(reader.read<uint8_t>(), 1u);
  EXPECT_EQ(reader.string(), "tokenizer.ggml.tokens");
  EXPECT_EQ(reader.read<uint32_t>(), 9u);
  EXPECT_EQ(reader.read<uint32_t>(), 8u);
  EXPECT_EQ(reader.read<uint64_t>(), 2u);
  EXPECT_EQ(reader.string(), "a");
  EXPECT_EQ(reader.string(), "bc");
  EXPECT_EQ(reader.string(), "tokenizer.ggml.token_type");
  EXPECT_EQ(reader.read<uint32_t>(), 9u);
  EXPECT_EQ(reader.read<uint32_t>(), 5u);
  EXPECT_EQ(reader.read<uint64_t>(), 2u);
  EXPECT_EQ(reader.read<int32_t>(), 1);
  EXPECT_EQ(reader.read<int32_t>(), 3);
  EXPECT_EQ(reader.string(), "first");
  EXPECT_EQ(reader.read<uint32_t>(), 1u);
  EXPECT_EQ(reader.read<uint64_t>(), 3u);
  EXPECT_EQ(reader.read<uint32_t>(), 0u);
  EXPECT_EQ(reader.read<uint64_t>(), 0u);
  EXPECT_EQ(reader.string(), "second");
  EXPECT_EQ(reader.read<uint32_t>(), 2u);
  EXPECT_EQ(reader.read<uint64_t>(), 32u);
  EXPECT_EQ(reader.read<uint64_t>(), 2u);
  EXPECT_EQ(reader.read<uint32_t>(), 8u);
  EXPECT_EQ(reader.read<uint64_t>(), 32u);  // 12 bytes of floats padded to 32
  const size_t data = (reader.at() + 31) / 32 * 32;
  float first[3];
  std::memcpy(first, reader.bytes().data() + data, sizeof(first));
  EXPECT_EQ(first[2], 3.0f);
  EXPECT_EQ(static_cast<unsigned char>(reader.bytes()[data + 32]), 0x5a);
  EXPECT_EQ(reader.bytes().size(), data + 32 + 96);  // 68 bytes padded to 96
  std::filesystem::remove(path);
}

TEST(GgufWriter, ATensorOfTheWrongSizeIsAnInternalErrorAndLeavesNoFile) {
  const auto path = std::filesystem::temp_directory_path() / "surogate_gguf_writer_bad.gguf";
  std::filesystem::remove(path);
  const std::vector<TensorInfo> tensors = {{"t", {4}, GgmlType::F16}};
  EXPECT_THROW(write_gguf(path, Metadata{}, tensors,
                          [](const TensorSink& sink) { sink(std::vector<std::byte>(6)); }),
               InternalError);
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace surogate::gguf
