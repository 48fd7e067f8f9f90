// io/curl_session.h.
#include "io/curl_session.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace surogate::io {

void curl_global_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t collect_curl_header(char* data, size_t size, size_t count, void* user) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(user);
  std::string line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    headers->clear();
    return size * count;
  }
  size_t colon = line.find(':');
  if (colon == std::string::npos) return size * count;
  std::string name = line.substr(0, colon);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(value.begin());
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.pop_back();
  (*headers)[name] = value;
  return size * count;
}

void use_ca_environment(CURL* curl) {
  // As OpenSSL reads them: a name that does not exist is passed over, not an error.
  std::error_code error;
  if (const char* file = std::getenv("SSL_CERT_FILE"); file != nullptr && std::filesystem::is_regular_file(file, error)) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, file);
  }
  if (const char* folder = std::getenv("SSL_CERT_DIR"); folder != nullptr && std::filesystem::is_directory(folder, error)) {
    curl_easy_setopt(curl, CURLOPT_CAPATH, folder);
  }
}

}  // namespace surogate::io
