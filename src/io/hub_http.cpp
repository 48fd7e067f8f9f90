// libcurl easy handle (RAII) with per-request header collection. Only the last response's
// headers are kept (a new status line resets them), which is what the hub protocol needs.
#include "io/hub_http.h"

#include <curl/curl.h>

#include <cctype>
#include <cstdio>

#include "io/curl_session.h"

namespace surogate::io {
namespace {

size_t collect_body(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

struct FileSink {
  std::FILE* file = nullptr;
  long* status = nullptr;
  bool truncated = false;
  bool failed = false;
  const std::filesystem::path* path = nullptr;
};

size_t write_file(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<FileSink*>(user);
  if (sink->file == nullptr) return 0;
  size_t bytes = size * count;
  if (std::fwrite(data, 1, bytes, sink->file) != bytes) {
    sink->failed = true;
    return 0;
  }
  return bytes;
}

struct ProgressState {
  const ProgressCallback* callback;
  uint64_t offset;
};

int report_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
  auto* state = static_cast<ProgressState*>(user);
  if (*state->callback) {
    uint64_t full = total > 0 ? state->offset + static_cast<uint64_t>(total) : 0;
    (*state->callback)(state->offset + static_cast<uint64_t>(now), full);
  }
  return 0;
}

bool is_connection_error(CURLcode code) {
  return code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST ||
         code == CURLE_COULDNT_RESOLVE_PROXY || code == CURLE_OPERATION_TIMEDOUT ||
         code == CURLE_SSL_CONNECT_ERROR || code == CURLE_SEND_ERROR || code == CURLE_RECV_ERROR ||
         code == CURLE_GOT_NOTHING;
}

}  // namespace

struct HttpClient::Handle {
  CURL* curl = nullptr;
  ~Handle() {
    if (curl != nullptr) curl_easy_cleanup(curl);
  }
};

// A curl_slist freed on scope exit.
class HeaderList {
 public:
  void add(const std::string& header) { list_ = curl_slist_append(list_, header.c_str()); }
  curl_slist* get() const { return list_; }
  ~HeaderList() { curl_slist_free_all(list_); }

 private:
  curl_slist* list_ = nullptr;
};

HttpClient::HttpClient(std::optional<std::string> token, long timeout_seconds)
    : handle_(std::make_unique<Handle>()), token_(std::move(token)), timeout_seconds_(timeout_seconds) {
  curl_global_once();
  handle_->curl = curl_easy_init();
  SUROGATE_CHECK(handle_->curl != nullptr, "curl_easy_init failed");
}

HttpClient::~HttpClient() = default;

namespace {

// SHA-256 of an empty body: the payload hash of every request we sign (GET / HEAD / list).
constexpr const char* kEmptyPayloadSha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

void prepare(CURL* curl, const std::string& url, long timeout_seconds, HeaderList& headers,
             const std::optional<std::string>& token, const std::optional<AwsSigning>& aws,
             std::map<std::string, std::string>& response_headers) {
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "surogate");
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, timeout_seconds);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, timeout_seconds);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, collect_curl_header);
  use_ca_environment(curl);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response_headers);
  headers.add("Accept-Encoding: identity");
  if (aws) {
    // libcurl signs the request (its canonical headers include the x-amz-* ones added here).
    const std::string provider = "aws:amz:" + aws->region + ":s3";
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, provider.c_str());
    curl_easy_setopt(curl, CURLOPT_USERNAME, aws->access_key_id.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, aws->secret_access_key.c_str());
    headers.add(std::string("x-amz-content-sha256: ") + kEmptyPayloadSha256);
    if (aws->session_token) headers.add("x-amz-security-token: " + *aws->session_token);
  } else if (token) {
    // curl drops this header when a redirect leads to another host (e.g. the CDN).
    headers.add("Authorization: Bearer " + *token);
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.get());
}

[[noreturn]] void fail_transfer(CURLcode code, const std::string& url) {
  if (is_connection_error(code)) {
    throw HubUnreachableError(fmt::format("cannot reach {}: {}", url, curl_easy_strerror(code)));
  }
  fail_user("request to {} failed: {}", url, curl_easy_strerror(code));
}

}  // namespace

HttpResponse HttpClient::get(const std::string& url) {
  HttpResponse response;
  HeaderList headers;
  prepare(handle_->curl, url, timeout_seconds_, headers, token_, aws_, response.headers);
  curl_easy_setopt(handle_->curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(handle_->curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(handle_->curl, CURLOPT_WRITEFUNCTION, collect_body);
  curl_easy_setopt(handle_->curl, CURLOPT_WRITEDATA, &response.body);
  CURLcode code = curl_easy_perform(handle_->curl);
  if (code != CURLE_OK) fail_transfer(code, url);
  curl_easy_getinfo(handle_->curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

HttpResponse HttpClient::post_form(const std::string& url, const std::string& body) {
  HttpResponse response;
  HeaderList headers;
  prepare(handle_->curl, url, timeout_seconds_, headers, token_, aws_, response.headers);
  headers.add("Content-Type: application/x-www-form-urlencoded");
  curl_easy_setopt(handle_->curl, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(handle_->curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(handle_->curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(handle_->curl, CURLOPT_WRITEFUNCTION, collect_body);
  curl_easy_setopt(handle_->curl, CURLOPT_WRITEDATA, &response.body);
  CURLcode code = curl_easy_perform(handle_->curl);
  if (code != CURLE_OK) fail_transfer(code, url);
  curl_easy_getinfo(handle_->curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

HttpResponse HttpClient::head(const std::string& url) {
  HttpResponse response;
  HeaderList headers;
  prepare(handle_->curl, url, timeout_seconds_, headers, token_, aws_, response.headers);
  curl_easy_setopt(handle_->curl, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(handle_->curl, CURLOPT_FOLLOWLOCATION, 0L);
  CURLcode code = curl_easy_perform(handle_->curl);
  if (code != CURLE_OK) fail_transfer(code, url);
  curl_easy_getinfo(handle_->curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

HttpResponse HttpClient::download(const std::string& url, const std::filesystem::path& file,
                                  uint64_t resume_from, const ProgressCallback& progress) {
  HttpResponse response;
  HeaderList headers;
  prepare(handle_->curl, url, timeout_seconds_, headers, token_, aws_, response.headers);
  if (resume_from > 0) headers.add(fmt::format("Range: bytes={}-", resume_from));
  curl_easy_setopt(handle_->curl, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(handle_->curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(handle_->curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(handle_->curl, CURLOPT_FAILONERROR, 0L);

  // The file is opened once the status is known: 206 appends, 200 starts over, errors write nothing.
  FileSink sink;
  sink.path = &file;
  struct OpenOnFirstWrite {
    FileSink* sink;
    CURL* curl;
    uint64_t resume_from;
    bool opened = false;
  } opener{&sink, handle_->curl, resume_from};
  auto write = [](char* data, size_t size, size_t count, void* user) -> size_t {
    auto* state = static_cast<OpenOnFirstWrite*>(user);
    if (!state->opened) {
      state->opened = true;
      long status = 0;
      curl_easy_getinfo(state->curl, CURLINFO_RESPONSE_CODE, &status);
      if (status == 206 && state->resume_from > 0) {
        state->sink->file = std::fopen(state->sink->path->c_str(), "ab");
      } else if (status == 200) {
        state->sink->file = std::fopen(state->sink->path->c_str(), "wb");
      } else {
        return size * count;  // an error body: drop it
      }
      if (state->sink->file == nullptr) {
        state->sink->failed = true;
        return 0;
      }
    }
    if (state->sink->file == nullptr) return size * count;
    return write_file(data, size, count, state->sink);
  };
  curl_easy_setopt(handle_->curl, CURLOPT_WRITEFUNCTION, +write);
  curl_easy_setopt(handle_->curl, CURLOPT_WRITEDATA, &opener);
  ProgressState progress_state{&progress, resume_from};
  curl_easy_setopt(handle_->curl, CURLOPT_XFERINFOFUNCTION, report_progress);
  curl_easy_setopt(handle_->curl, CURLOPT_XFERINFODATA, &progress_state);
  curl_easy_setopt(handle_->curl, CURLOPT_NOPROGRESS, 0L);

  CURLcode code = curl_easy_perform(handle_->curl);
  curl_easy_getinfo(handle_->curl, CURLINFO_RESPONSE_CODE, &response.status);
  bool close_failed = false;
  if (sink.file != nullptr) close_failed = std::fclose(sink.file) != 0;
  if (sink.failed || close_failed) {
    fail_user("cannot write {}: check free disk space and permissions of its folder (the download cache)",
              file.string());
  }
  if (code == CURLE_PARTIAL_FILE || (code == CURLE_OPERATION_TIMEDOUT && sink.file != nullptr) ||
      (code == CURLE_RECV_ERROR && sink.file != nullptr)) {
    throw HubInterruptedError(fmt::format("the download of {} stopped early ({})", url,
                                          curl_easy_strerror(code)));
  }
  if (code != CURLE_OK) fail_transfer(code, url);
  return response;
}

std::string url_encode_path(const std::string& path) {
  std::string encoded;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      encoded += static_cast<char>(c);
    } else {
      encoded += fmt::format("%{:02X}", c);
    }
  }
  return encoded;
}

}  // namespace surogate::io
