// A tensor of a committed fixture file as a vector of its element type (the raw bytes copied:
// safetensors spans are not aligned for their element type), for tests that compare against
// what an oracle wrote (tests/fixtures/nf4/, tests/fixtures/nvfp4/).
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace surogate::testing {

template <typename T>
std::vector<T> fixture_tensor(const io::SafetensorsFile& file, const std::string& name) {
  const io::SafetensorsTensor& tensor = file.tensor(name);
  std::vector<T> values(tensor.bytes.size() / sizeof(T));
  std::memcpy(values.data(), tensor.bytes.data(), tensor.bytes.size());
  return values;
}

}  // namespace surogate::testing
