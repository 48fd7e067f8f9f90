// Shared by the vision tests: the fixture folder (scripts/make_vision_fixtures.py writes it), file
// bytes and the SHA-256 the fixtures record of raw arrays.
#pragma once

#include <openssl/evp.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace surogate::vision::testing {

inline std::filesystem::path fixtures_dir() { return std::filesystem::path(SUROGATE_FIXTURES_DIR) / "vision"; }

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& file) {
  std::ifstream stream(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>()};
}

inline std::string sha256_hex(const void* data, size_t size) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data, size, digest, &length, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

}  // namespace surogate::vision::testing
