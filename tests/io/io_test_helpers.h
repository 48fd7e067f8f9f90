// Shared helpers for the io tests: a temporary folder removed at the end of each test, raw
// safetensors files built byte by byte (for malformed-input tests), and error-message checks.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include <unistd.h>

#include "core/error.h"

namespace surogate::io::testing {

class TemporaryFolder {
 public:
  TemporaryFolder() {
    std::random_device device;
    path_ = std::filesystem::temp_directory_path() /
            ("surogate-io-test-" + std::to_string(::getpid()) + "-" + std::to_string(device()));
    std::filesystem::create_directories(path_);
  }
  ~TemporaryFolder() {
    std::error_code error;
    std::filesystem::remove_all(path_, error);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string bytes(8, '\0');
  uint64_t size = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((size >> (8 * i)) & 0xff);
  return bytes + header + data;
}

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream stream(path, std::ios::binary);
  stream << bytes;
}

inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(stream), {});
}

// Runs `action`, expects a UserError whose message contains every `fragment`.
inline void expect_user_error(const std::function<void()>& action, std::initializer_list<std::string> fragments) {
  try {
    action();
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError& error) {
    std::string message = error.what();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos) << "message: " << message << "\nmissing: " << fragment;
    }
  }
}

}  // namespace surogate::io::testing
