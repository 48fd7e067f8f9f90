#include "vision/image_download.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/http_get.h"
#include "vision/sigpipe_blocked.h"

namespace surogate::vision {
namespace {

// A URL split into its origin ("https://host:port") and request target ("/path?query", the
// fragment dropped): what a redirect's Location resolves against.
struct Url {
  std::string origin;
  std::string target;
};

// Bytes a request line may not carry are percent-encoded, the rest (an existing %XX, '+', the
// reserved characters) kept as given: what Python's requests.utils.requote_uri does to the URLs
// transformers' load_image fetches.
std::string requote(std::string_view target) {
  static constexpr std::string_view kUnsafe = "\"<>\\^`{|}";
  std::string out;
  for (const char c : target) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f || kUnsafe.find(c) != std::string_view::npos) {
      out += fmt::format("%{:02X}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

Url split_url(std::string_view url) {
  const size_t scheme_end = url.find("://");
  const size_t authority_begin = scheme_end + 3;
  const size_t authority_end = url.find_first_of("/?#", authority_begin);
  Url out{std::string(url.substr(0, authority_end)), ""};
  if (authority_end != std::string_view::npos) {
    out.target = std::string(url.substr(authority_end, url.find('#', authority_end) - authority_end));
  }
  if (out.target.empty() || out.target.front() != '/') out.target = "/" + out.target;
  return out;
}

// A redirect's Location against the URL that answered it: absolute, scheme-relative ("//host/x"),
// absolute-path ("/x") or relative to the answering path's folder ("x").
std::string resolve_location(const Url& from, const std::string& location) {
  if (is_image_url(location)) return location;
  if (location.starts_with("//")) return from.origin.substr(0, from.origin.find("://") + 1) + location;
  if (location.starts_with("/")) return from.origin + location;
  const std::string path = from.target.substr(0, from.target.find('?'));
  return from.origin + path.substr(0, path.rfind('/') + 1) + location;
}

bool is_redirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

std::string describe(io::HttpGetFailure failure, const DownloadLimits& limits, const std::string& detail) {
  switch (failure) {
    case io::HttpGetFailure::kConnect:
      return "could not connect (the connection was refused, or the host was not found)";
    case io::HttpGetFailure::kConnectTimeout:
      return fmt::format("no connection within {} s", limits.connect_timeout_s);
    case io::HttpGetFailure::kRead:
      return fmt::format("reading the response failed (the connection closed, or no data came for {} s)",
                         limits.read_timeout_s);
    case io::HttpGetFailure::kTlsHandshake:
      return "the TLS handshake failed";
    case io::HttpGetFailure::kCertificate:
      return "the server's certificate was not verified against the system's CA certificates (OpenSSL's "
             "SSL_CERT_FILE / SSL_CERT_DIR name others)";
    case io::HttpGetFailure::kCaCertificates:
      return "the CA certificates could not be loaded";
    case io::HttpGetFailure::kOverCap: {
      const size_t mib = size_t{1} << 20;
      return fmt::format("the body is larger than the {} allowed for a downloaded image",
                         limits.max_bytes % mib == 0 ? fmt::format("{} MiB", limits.max_bytes / mib)
                                                     : fmt::format("{} bytes", limits.max_bytes));
    }
    case io::HttpGetFailure::kOther:
      break;
  }
  return detail;
}

io::HttpGetAnswer fetch_once(const std::string& url, const DownloadLimits& limits,
                             const std::function<std::string()>& what) {
  const io::HttpGetLimits bounds{.max_bytes = limits.max_bytes,
                                 .connect_timeout_s = limits.connect_timeout_s,
                                 .read_timeout_s = limits.read_timeout_s};
  try {
    return io::http_get(url, bounds);
  } catch (const io::HttpGetError& error) {
    fail_user("{}: {}", what(), describe(error.failure(), limits, error.what()));
  }
}

}  // namespace

bool is_image_url(std::string_view reference) {
  return reference.starts_with("http://") || reference.starts_with("https://");
}

ImageBytes download_image(std::string_view url, std::string_view field, const DownloadLimits& limits) {
  const SigpipeBlocked no_sigpipe;
  std::string current = requote(url);
  for (int redirects = 0;; ++redirects) {
    auto what = [&] {
      return current == url ? fmt::format("{}: downloading image {}", field, url)
                            : fmt::format("{}: downloading image {} (redirected to {})", field, url, current);
    };
    const Url split = split_url(current);
    // user:password@host: the client would take "user:password@host" for the host name.
    if (split.origin.find('@') != std::string::npos) {
      fail_user("{}: credentials in an image URL (user:password@) are not supported; download the image and "
                "give its path", what());
    }
    io::HttpGetAnswer answer = fetch_once(current, limits, what);
    if (answer.status == 200) return ImageBytes{std::string(url), std::move(answer.body)};
    if (!is_redirect(answer.status) || answer.location.empty()) {
      fail_user("{}: the server answered HTTP status {}{}", what(), answer.status,
                is_redirect(answer.status) ? " without a Location" : "");
    }
    if (redirects == limits.max_redirects) {
      fail_user("{}: more than {} redirects", what(), limits.max_redirects);
    }
    if (answer.location.find("://") != std::string::npos && !is_image_url(answer.location)) {
      fail_user("{}: redirected to {}, which is not an http:// or https:// URL", what(), answer.location);
    }
    current = requote(resolve_location(split, answer.location));
  }
}

}  // namespace surogate::vision
