// Streams the file through OpenSSL's EVP SHA-256 in 1 MiB chunks.
#include "io/sha256.h"

#include <openssl/evp.h>

#include <fstream>
#include <memory>
#include <vector>

#include "core/error.h"

namespace surogate::io {

std::string sha256_file_hex(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) fail_user("cannot read {} to verify its checksum", path.string());
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  SUROGATE_CHECK(context && EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) == 1,
                 "cannot initialise SHA-256");
  std::vector<char> buffer(1 << 20);
  while (stream) {
    stream.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    std::streamsize count = stream.gcount();
    if (count > 0) EVP_DigestUpdate(context.get(), buffer.data(), static_cast<size_t>(count));
  }
  if (stream.bad()) fail_user("error while reading {} to verify its checksum", path.string());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context.get(), digest, &length);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

}  // namespace surogate::io
