// One bounded GET of an http:// or https:// URL on libcurl (Debian's, with OpenSSL: the server's
// certificate and host name verified against the CA certificates, io/curl_session.h): no redirect
// followed (the caller follows them, to count them and say where they led), no credentials sent,
// the body of a 200 answer kept up to a cap and refused past it (before it is read, when the
// answer says its length). A transfer that fails throws HttpGetError saying which way, for the
// caller to word; a status other than 200 is the caller's to judge (status, and a redirect's
// Location). vision/image_download.h fetches dataset rows' image URLs with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace surogate::io {

struct HttpGetLimits {
  size_t max_bytes = size_t{64} << 20;
  long connect_timeout_s = 10;
  long read_timeout_s = 30;  // no byte of the answer for this long; not a bound on the whole body
};

struct HttpGetAnswer {
  long status = 0;
  std::string location;       // a redirect's Location header, as sent
  std::vector<uint8_t> body;  // a 200's body; empty for any other status
};

enum class HttpGetFailure {
  kConnect,         // refused, or the host name did not resolve
  kConnectTimeout,  // no connection within connect_timeout_s
  kRead,            // the connection closed early, or no data came for read_timeout_s
  kTlsHandshake,
  kCertificate,     // the server's certificate (or its host name) was not verified
  kCaCertificates,  // the CA certificates could not be read
  kOverCap,         // a 200's body is larger than max_bytes
  kOther,
};

class HttpGetError : public UserError {
public:
  HttpGetError(HttpGetFailure failure, const std::string& detail) : UserError(detail), failure_(failure) {}
  HttpGetFailure failure() const { return failure_; }

private:
  HttpGetFailure failure_;
};

// `url`: already percent-encoded where a request line needs it. The fragment is not sent.
HttpGetAnswer http_get(const std::string& url, const HttpGetLimits& limits);

}  // namespace surogate::io
