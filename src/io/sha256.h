// SHA-256 of files (OpenSSL libcrypto), used to verify Hugging Face LFS downloads against
// their ETag.
#pragma once

#include <filesystem>
#include <string>

namespace surogate::io {

// Lower-case hex digest of the file's content. Throws UserError when the file cannot be read.
std::string sha256_file_hex(const std::filesystem::path& path);

}  // namespace surogate::io
