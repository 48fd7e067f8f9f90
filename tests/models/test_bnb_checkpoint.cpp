// Weights saved by bitsandbytes in 4 bits (models/bnb_checkpoint.h) through models::load_hf_weights,
// built from what bitsandbytes 0.50.2 itself computed (tests/fixtures/nf4/bnb_nf4.safetensors: its
// quantize_4bit state and its dequantize_4bit output) laid out as transformers saves a Linear4bit:
// dequantized on load to bitsandbytes' own values (equal to its dequantize_4bit output once rounded
// to its bf16), plain and double-quantized; handed to a Bnb4bitSink as stored (codes, absmax, nested
// state and offset as written); and each damaged or missing piece one UserError naming the tensor.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/bfloat16.h"
#include "core/error.h"
#include "fixture_tensor.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "models/weight_io.h"
#include "quant/nf4.h"
#include "user_error_of.h"

namespace surogate::models {
namespace {

namespace fs = std::filesystem;

const io::SafetensorsFile& bnb() {
  static const io::SafetensorsFile file =
      io::SafetensorsFile::open(std::string(SUROGATE_FIXTURES_DIR) + "/nf4/bnb_nf4.safetensors");
  return file;
}

template <typename T>
std::vector<T> read(const std::string& name) {
  return testing::fixture_tensor<T>(bnb(), name);
}

const std::string kName = "model.layers.0.mlp.down_proj.weight";
const graph::Shape kShape{128, 256};  // the fixture's case b64: blocks of 64

std::vector<ParameterSpec> specs(bool bnb_checkpoint) {
  return {ParameterSpec{"layers.0.mlp.down_proj.weight", kName, kShape, std::nullopt, bnb_checkpoint}};
}

struct Layout {
  bool double_quant = true;
  bool drop_state = false;
  std::string state_shape = "[128, 256]";
};

// The fixture's case b64 saved as transformers saves a bitsandbytes 4-bit Linear weight.
fs::path write_checkpoint(const std::string& tag, const Layout& layout) {
  static std::deque<std::vector<std::byte>> keep;  // the bytes the writer views (a deque: they stay put)
  auto bytes = [](const auto& values) {
    keep.emplace_back(std::as_bytes(std::span(values)).begin(), std::as_bytes(std::span(values)).end());
    return std::span<const std::byte>(keep.back());
  };
  const std::string prefix = layout.double_quant ? "b64.dq." : "b64.";
  const float offset = read<float>("b64.dq.offset").at(0);
  std::string state = "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"bfloat16\", \"shape\": " +
                      layout.state_shape;
  if (layout.double_quant) {
    state += fmt::format(", \"nested_blocksize\": 256, \"nested_dtype\": \"float32\", \"nested_offset\": {}", offset);
  }
  state += "}";
  const std::vector<uint8_t> packed = read<uint8_t>(prefix + "packed");
  std::vector<io::TensorToWrite> tensors = {
      {kName, DType::U8, {static_cast<int64_t>(packed.size()), 1}, bytes(packed)},
      {kName + ".quant_map", DType::F32, {16}, bytes(quant::kNf4Levels)},
  };
  if (!layout.drop_state) {
    tensors.push_back({kName + ".quant_state.bitsandbytes__nf4", DType::U8, {static_cast<int64_t>(state.size())},
                       bytes(std::vector<uint8_t>(state.begin(), state.end()))});
  }
  if (layout.double_quant) {
    const std::vector<uint8_t> codes = read<uint8_t>("b64.dq.absmax");
    const std::vector<float> absmax2 = read<float>("b64.dq.absmax2");
    tensors.push_back({kName + ".absmax", DType::U8, {static_cast<int64_t>(codes.size())}, bytes(codes)});
    tensors.push_back({kName + ".nested_absmax", DType::F32, {static_cast<int64_t>(absmax2.size())}, bytes(absmax2)});
    tensors.push_back({kName + ".nested_quant_map", DType::F32, {256}, bytes(read<float>("dynamic_code"))});
  } else {
    const std::vector<float> absmax = read<float>("b64.absmax");
    tensors.push_back({kName + ".absmax", DType::F32, {static_cast<int64_t>(absmax.size())}, bytes(absmax)});
  }
  const fs::path dir = fs::temp_directory_path() / ("surogate_bnb_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  io::write_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

TEST(BnbCheckpoint, DoubleQuantizedWeightsDequantizeToBitsandbytesValues) {
  const fs::path dir = write_checkpoint("dq", {});
  const std::vector<float> loaded = load_hf_weights_as_float32(dir, specs(true)).at(0);
  const std::vector<uint16_t> expected = read<uint16_t>("b64.dequantized");  // dequantize_4bit, bf16
  ASSERT_EQ(loaded.size(), expected.size());
  for (size_t i = 0; i < loaded.size(); ++i) ASSERT_EQ(float_to_bf16(loaded[i]), expected[i]) << "element " << i;

  // As stored: the state as written, nothing passed on to the float sink.
  int sunk = 0, taken = 0;
  load_hf_weights(
      dir, specs(true), [&](const ParameterSpec&, const io::SafetensorsTensor&) { ++sunk; }, {},
      [&](const ParameterSpec& spec, const Bnb4bitTensor& tensor) {
        EXPECT_EQ(spec.hf_name, kName);
        EXPECT_EQ(tensor.quant_type, "nf4");
        EXPECT_EQ(tensor.block_size, 64);
        EXPECT_EQ(tensor.numel, 128 * 256);
        EXPECT_TRUE(tensor.double_quant());
        EXPECT_EQ(tensor.nested_block_size, 256);
        EXPECT_EQ(tensor.nested_offset, read<float>("b64.dq.offset").at(0));
        EXPECT_EQ(tensor.quant_map, quant::kNf4Levels);
        const std::vector<uint8_t> packed = read<uint8_t>("b64.dq.packed");
        EXPECT_EQ(0, std::memcmp(tensor.codes.bytes.data(), packed.data(), packed.size()));
        EXPECT_EQ(io::read_tensor_as_float32(*tensor.nested_absmax), read<float>("b64.dq.absmax2"));
        ++taken;
        return true;
      });
  EXPECT_EQ(taken, 1);
  EXPECT_EQ(sunk, 0);
  fs::remove_all(dir);
}

TEST(BnbCheckpoint, PlainAbsmaxWeightsDequantizeToLevelTimesAbsmax) {
  const fs::path dir = write_checkpoint("plain", {.double_quant = false});
  const std::vector<float> loaded = load_hf_weights_as_float32(dir, specs(true)).at(0);
  const std::vector<uint8_t> packed = read<uint8_t>("b64.packed");
  const std::vector<float> absmax = read<float>("b64.absmax");
  for (size_t i = 0; i < loaded.size(); ++i) {
    const uint8_t code = i % 2 == 0 ? packed[i / 2] >> 4 : packed[i / 2] & 0x0F;
    ASSERT_EQ(loaded[i], quant::kNf4Levels[code] * absmax[i / 64]) << "element " << i;
  }
  fs::remove_all(dir);
}

TEST(BnbCheckpoint, DamagedOrMisplacedStateIsOneErrorNamingTheTensor) {
  const fs::path dir = write_checkpoint("errors", {});
  // A U8 weight in a checkpoint whose config.json does not say bitsandbytes.
  std::string message = error_of([&] { load_hf_weights_as_float32(dir, specs(false)); });
  EXPECT_NE(message.find(kName), std::string::npos) << message;
  EXPECT_NE(message.find("quantization_config"), std::string::npos) << message;
  fs::remove_all(dir);

  const fs::path no_state = write_checkpoint("no_state", {.drop_state = true});
  message = error_of([&] { load_hf_weights_as_float32(no_state, specs(true)); });
  EXPECT_NE(message.find(kName + ".quant_state.bitsandbytes__nf4"), std::string::npos) << message;
  EXPECT_NE(message.find("is missing"), std::string::npos) << message;
  fs::remove_all(no_state);

  const fs::path wrong_shape = write_checkpoint("wrong_shape", {.state_shape = "[256, 128]"});
  message = error_of([&] { load_hf_weights_as_float32(wrong_shape, specs(true)); });
  EXPECT_NE(message.find("gives the shape [256,128] but config.json implies [128, 256]"), std::string::npos)
      << message;
  fs::remove_all(wrong_shape);
}

}  // namespace
}  // namespace surogate::models
