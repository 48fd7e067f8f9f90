// io/http_get.h on a libcurl easy handle per call.
#include "io/http_get.h"

#include <curl/curl.h>

#include <map>
#include <memory>

#include "io/curl_session.h"

namespace surogate::io {
namespace {

struct Transfer {
  CURL* curl = nullptr;
  const HttpGetLimits* limits = nullptr;
  std::map<std::string, std::string> headers;
  HttpGetAnswer answer;
  bool over_cap = false;
};

long status_of(CURL* curl) {
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

// Headers: a 200 whose Content-Length is over the cap ends the transfer before its body.
size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const size_t taken = collect_curl_header(data, size, count, &transfer->headers);
  const auto length = transfer->headers.find("content-length");
  if (length != transfer->headers.end() && status_of(transfer->curl) == 200) {
    try {
      if (std::stoull(length->second) > transfer->limits->max_bytes) {
        transfer->over_cap = true;
        return 0;
      }
    } catch (const std::exception&) {
      // not a number: the body's own size decides below
    }
  }
  return taken;
}

// Body: kept for a 200 (up to the cap), dropped for an error page or a redirect's body.
size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  if (status_of(transfer->curl) != 200) return bytes;
  std::vector<uint8_t>& body = transfer->answer.body;
  if (body.size() + bytes > transfer->limits->max_bytes) {
    transfer->over_cap = true;
    return 0;
  }
  body.insert(body.end(), data, data + bytes);
  return bytes;
}

HttpGetFailure failure_of(CURLcode code, CURL* curl) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return HttpGetFailure::kConnect;
    case CURLE_OPERATION_TIMEDOUT: {
      curl_off_t connected = 0;  // µs to the connection; 0: none was made
      curl_easy_getinfo(curl, CURLINFO_CONNECT_TIME_T, &connected);
      return connected == 0 ? HttpGetFailure::kConnectTimeout : HttpGetFailure::kRead;
    }
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SEND_ERROR:
      return HttpGetFailure::kRead;
    case CURLE_SSL_CONNECT_ERROR:
      return HttpGetFailure::kTlsHandshake;
    case CURLE_PEER_FAILED_VERIFICATION:
      return HttpGetFailure::kCertificate;
    case CURLE_SSL_CACERT_BADFILE:
      return HttpGetFailure::kCaCertificates;
    default:
      return HttpGetFailure::kOther;
  }
}

}  // namespace

HttpGetAnswer http_get(const std::string& url, const HttpGetLimits& limits) {
  curl_global_once();
  const std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> handle(curl_easy_init(), curl_easy_cleanup);
  if (!handle) throw HttpGetError(HttpGetFailure::kOther, "curl_easy_init failed");
  CURL* curl = handle.get();
  Transfer transfer{curl, &limits, {}, {}, false};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "surogate");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, limits.connect_timeout_s);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, limits.read_timeout_s);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  use_ca_environment(curl);
  const CURLcode code = curl_easy_perform(curl);
  if (transfer.over_cap) throw HttpGetError(HttpGetFailure::kOverCap, "the body is over the cap");
  if (code != CURLE_OK) throw HttpGetError(failure_of(code, curl), curl_easy_strerror(code));
  transfer.answer.status = status_of(curl);
  const auto location = transfer.headers.find("location");
  if (location != transfer.headers.end()) transfer.answer.location = location->second;
  if (transfer.answer.status != 200) transfer.answer.body.clear();
  return std::move(transfer.answer);
}

}  // namespace surogate::io
