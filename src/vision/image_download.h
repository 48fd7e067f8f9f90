// A row image given by an http:// or https:// URL, fetched with io/http_get.h (libcurl with
// OpenSSL: https verifies the server's certificate against the system's CA store, which OpenSSL's
// SSL_CERT_FILE / SSL_CERT_DIR variables can replace). Redirects are followed here up to a
// limit, the body is capped, and every failure (a status other than 200, a refused connection or an
// unknown host, a timeout, a body over the cap, too many redirects, a certificate refused) is one
// UserError naming `field` (the dataset file and row) and the URL. Decoding is the caller's: the
// bytes come back named by the URL, so a body that is not an image fails in the decoder naming it.
#pragma once

#include <cstddef>
#include <string_view>

#include "vision/decoded_image.h"

namespace surogate::vision {

struct DownloadLimits {
  // A photo of the decoder's largest size (kDefaultMaxDecodedPixels) is far below this as JPEG or
  // WebP; a larger body is refused before it is all read.
  size_t max_bytes = size_t{64} << 20;
  int connect_timeout_s = 10;
  int read_timeout_s = 30;  // between two reads of the response, not for the whole body
  int max_redirects = 5;
};

bool is_image_url(std::string_view reference);

ImageBytes download_image(std::string_view url, std::string_view field, const DownloadLimits& limits = {});

}  // namespace surogate::vision
