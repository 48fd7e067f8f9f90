// What every libcurl transfer of io/ shares (hub_http.cpp's client, http_get.cpp's bounded GET):
// the library's one-time initialisation, the response-header collector, and the CA certificates.
#pragma once

#include <curl/curl.h>

#include <cstddef>
#include <map>
#include <string>

namespace surogate::io {

// curl_global_init, once per process.
void curl_global_once();

// CURLOPT_HEADERFUNCTION collecting the last response's headers into a
// std::map<std::string, std::string>* (lower-case names; a new status line starts over).
size_t collect_curl_header(char* data, size_t size, size_t count, void* headers);

// OpenSSL's SSL_CERT_FILE / SSL_CERT_DIR, when they name a file / folder, as the transfer's CA certificates
// (CURLOPT_CAINFO / CURLOPT_CAPATH): libcurl reads its build's CA bundle, not those variables,
// which a user behind a private CA sets for every other OpenSSL program.
void use_ca_environment(CURL* curl);

}  // namespace surogate::io
