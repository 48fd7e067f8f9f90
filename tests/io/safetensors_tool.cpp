// Test helper for tests/python/test_safetensors_interop.py (not installed):
//   safetensors_tool write-sample OUT_DIR MAX_SHARD_BYTES   writes known tensors of every float and
//                                                           int dtype, sharded when they exceed the limit
//   safetensors_tool dump PATH                              prints every tensor as JSON
//                                                           ({name: {dtype, shape, values}})
//   safetensors_tool resave-config IN_DIR OUT_DIR           load_model_config + save_model_config
//                                                           (checked with transformers' AutoConfig)
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/bfloat16.h"
#include "core/error.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"

namespace {

using namespace surogate;
using namespace surogate::io;

template <typename T>
std::vector<std::byte> pack(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

int write_sample(const std::string& directory, uint64_t max_shard_bytes) {
  std::vector<float> f32(24);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<float>(i) * 0.5f - 3.0f;
  std::vector<uint16_t> f16, bf16;
  for (float value : f32) {
    f16.push_back(float_to_f16(value));
    bf16.push_back(float_to_bf16(value));
  }
  std::vector<double> f64 = {1e-300, -2.5, 3.14159265358979};
  std::vector<int64_t> i64 = {-(int64_t{1} << 40), 0, 7};
  std::vector<int32_t> i32 = {-5, 6};
  std::vector<uint8_t> u8 = {0, 255, 17};
  std::vector<uint8_t> flags = {1, 0, 1, 1};
  std::vector<std::vector<std::byte>> storage = {pack(f32), pack(f16), pack(bf16), pack(f64),
                                                 pack(i64), pack(i32), pack(u8),  pack(flags)};
  std::vector<TensorToWrite> tensors = {
      {"model.layers.0.weight", DType::F32, {4, 6}, storage[0]}, {"half", DType::F16, {2, 3, 4}, storage[1]},
      {"brain", DType::BF16, {24}, storage[2]},                  {"wide", DType::F64, {3}, storage[3]},
      {"long", DType::I64, {3}, storage[4]},                     {"int", DType::I32, {2, 1}, storage[5]},
      {"bytes", DType::U8, {3}, storage[6]},                     {"mask", DType::BOOL, {2, 2}, storage[7]}};
  ShardedWriteResult result = write_safetensors_sharded(directory, tensors, max_shard_bytes, {{"format", "pt"}});
  for (const auto& file : result.files) std::printf("%s\n", file.c_str());
  return 0;
}

nlohmann::json values_of(const SafetensorsTensor& tensor) {
  nlohmann::json values = nlohmann::json::array();
  const size_t count = static_cast<size_t>(tensor.element_count());
  auto read = [&](auto sample) {
    using T = decltype(sample);
    for (size_t i = 0; i < count; ++i) {
      T value;
      std::memcpy(&value, tensor.bytes.data() + i * sizeof(T), sizeof(T));
      values.push_back(value);
    }
  };
  switch (tensor.dtype) {
    case DType::F64: read(double{}); break;
    case DType::F32: case DType::F16: case DType::BF16:
      for (float value : read_tensor_as_float32(tensor)) values.push_back(value);
      break;
    case DType::I64: read(int64_t{}); break;
    case DType::I32: read(int32_t{}); break;
    case DType::I16: read(int16_t{}); break;
    case DType::I8: read(int8_t{}); break;
    default: read(uint8_t{}); break;
  }
  return values;
}

int dump(const std::string& path) {
  SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(path);
  nlohmann::json out = nlohmann::json::object();
  for (const std::string& name : checkpoint.tensor_names()) {
    const SafetensorsTensor& tensor = checkpoint.tensor(name);
    out[name] = {{"dtype", std::string(dtype_safetensors_name(tensor.dtype))},
                 {"shape", tensor.shape},
                 {"values", values_of(tensor)}};
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 4 && std::strcmp(argv[1], "write-sample") == 0) {
      return write_sample(argv[2], std::stoull(argv[3]));
    }
    if (argc == 3 && std::strcmp(argv[1], "dump") == 0) return dump(argv[2]);
    if (argc == 4 && std::strcmp(argv[1], "resave-config") == 0) {
      save_model_config(load_model_config(argv[2]), argv[3]);
      return 0;
    }
    std::fprintf(stderr, "usage: safetensors_tool write-sample OUT_DIR MAX_SHARD_BYTES | dump PATH | resave-config IN OUT\n");
    return 2;
  } catch (const surogate::UserError& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 2;
  }
}
