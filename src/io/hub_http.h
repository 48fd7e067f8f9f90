// A small libcurl client for the hub and the object stores: JSON GETs, form POSTs (OAuth token
// requests), HEADs without redirects (to read the X-Linked-* / X-Repo-Commit headers of the
// resolve endpoint), and file downloads that append to a partial file with a Range request.
// Requests carry a bearer token, or are signed with AWS Signature V4 by libcurl itself
// (CURLOPT_AWS_SIGV4) for S3. Connection failures throw HubUnreachableError so the
// caller can fall back to the cache; a transfer cut short throws HubInterruptedError.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/error.h"

namespace surogate::io {

// The endpoint could not be reached at all (DNS, refused connection, timeout).
class HubUnreachableError : public UserError {
 public:
  using UserError::UserError;
};

// A download stopped before its end; what arrived is kept and can be resumed.
class HubInterruptedError : public UserError {
 public:
  using UserError::UserError;
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case names, of the last response
  std::string body;
};

// Called with (bytes so far, total bytes or 0 when unknown).
using ProgressCallback = std::function<void(uint64_t, uint64_t)>;

// S3 request signing: libcurl computes the SigV4 Authorization header from these.
struct AwsSigning {
  std::string region;                        // e.g. "us-east-1"
  std::string access_key_id;
  std::string secret_access_key;
  std::optional<std::string> session_token;  // sent as x-amz-security-token (temporary credentials)
};

class HttpClient {
 public:
  HttpClient(std::optional<std::string> token, long timeout_seconds);
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;
  ~HttpClient();

  // Signs every later request with SigV4 for S3 instead of the bearer token.
  void sign_for_s3(AwsSigning signing) { aws_ = std::move(signing); }

  // GET following redirects; the body is kept in memory (for API JSON).
  HttpResponse get(const std::string& url);
  // POST of an application/x-www-form-urlencoded body; the answer's body is kept in memory.
  HttpResponse post_form(const std::string& url, const std::string& body);
  // HEAD without following redirects.
  HttpResponse head(const std::string& url);
  // GET following redirects into `file`: appends from `resume_from` bytes with a Range request
  // (a 200 answer restarts the file from zero). Returns the final response (body empty).
  HttpResponse download(const std::string& url, const std::filesystem::path& file, uint64_t resume_from,
                        const ProgressCallback& progress);

 private:
  struct Handle;
  std::unique_ptr<Handle> handle_;
  std::optional<std::string> token_;
  long timeout_seconds_;
  std::optional<AwsSigning> aws_;
};

// Percent-encodes a path segment list ("a/b c" → "a/b%20c"), keeping '/'.
std::string url_encode_path(const std::string& path);

}  // namespace surogate::io
