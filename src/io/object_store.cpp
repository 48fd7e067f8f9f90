// s3:// and gs:// listing, caching and download; see object_store.h.
#include "io/object_store.h"

#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/cloud_credentials.h"
#include "io/hub_http.h"
#include "io/environment.h"
#include "io/percent_encoding.h"

namespace surogate::io {
namespace {

namespace fs = std::filesystem;

constexpr int kObjectDownloadAttempts = 3;
constexpr long kTimeoutSeconds = 30;

struct ObjectEntry {
  std::string key;
  uint64_t size = 0;
  std::string etag;                 // as listed, quotes removed
  std::optional<std::string> md5;   // hex, when the store gives the object's MD5
};

// One store: how to list and fetch, and where its copies live.
struct Store {
  ObjectUrl url;
  std::string text;                 // the URL as given, for messages
  std::unique_ptr<HttpClient> http = std::make_unique<HttpClient>(std::nullopt, kTimeoutSeconds);
  std::string base;                 // S3: endpoint/bucket or https://bucket.s3.region.amazonaws.com; GCS: endpoint
  std::string host_folder;          // the cache folder of the endpoint
};

fs::path cache_root() {
  if (auto folder = environment_variable("SUROGATE_CACHE")) return fs::path(*folder) / "objects";
  if (auto folder = environment_variable("XDG_CACHE_HOME")) return fs::path(*folder) / "surogate" / "objects";
  return fs::path(environment_variable("HOME").value_or("/")) / ".cache" / "surogate" / "objects";
}

std::string folder_name_of(const std::string& endpoint) {
  std::string host = endpoint.substr(endpoint.find("://") + 3);
  for (char& c : host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
  }
  return host;
}

std::string xml_unescape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out += text[i];
      continue;
    }
    const size_t end = text.find(';', i);
    if (end == std::string::npos) {
      out += text[i];
      continue;
    }
    const std::string entity = text.substr(i + 1, end - i - 1);
    if (entity == "amp") out += '&';
    else if (entity == "lt") out += '<';
    else if (entity == "gt") out += '>';
    else if (entity == "quot") out += '"';
    else if (entity == "apos") out += '\'';
    else if (entity.size() > 1 && entity[0] == '#') {
      const unsigned long code = entity[1] == 'x' ? std::strtoul(entity.c_str() + 2, nullptr, 16)
                                                  : std::strtoul(entity.c_str() + 1, nullptr, 10);
      // UTF-8 encode.
      if (code < 0x80) out += static_cast<char>(code);
      else if (code < 0x800) out += {static_cast<char>(0xC0 | (code >> 6)), static_cast<char>(0x80 | (code & 0x3F))};
      else if (code < 0x10000) {
        out += {static_cast<char>(0xE0 | (code >> 12)), static_cast<char>(0x80 | ((code >> 6) & 0x3F)),
                static_cast<char>(0x80 | (code & 0x3F))};
      } else {
        out += {static_cast<char>(0xF0 | (code >> 18)), static_cast<char>(0x80 | ((code >> 12) & 0x3F)),
                static_cast<char>(0x80 | ((code >> 6) & 0x3F)), static_cast<char>(0x80 | (code & 0x3F))};
      }
    } else {
      out += text.substr(i, end - i + 1);
    }
    i = end;
  }
  return out;
}

// The text of every <tag>…</tag> in `xml` from `from` on (S3's XML is flat where we read it).
std::vector<std::string> xml_elements(const std::string& xml, const std::string& tag) {
  std::vector<std::string> values;
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  for (size_t start = xml.find(open); start != std::string::npos; start = xml.find(open, start)) {
    const size_t end = xml.find(close, start);
    if (end == std::string::npos) break;
    values.push_back(xml.substr(start + open.size(), end - start - open.size()));
    start = end + close.size();
  }
  return values;
}

std::string strip_quotes(std::string etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return etag;
}

bool is_md5_hex(const std::string& text) {
  if (text.size() != 32) return false;
  for (unsigned char c : text) {
    if (!std::isxdigit(c)) return false;
  }
  return true;
}

std::optional<std::string> base64_to_hex(const std::string& text) {
  std::string bytes(text.size(), '\0');
  const int length = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()),
                                     reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (length < 0) return std::nullopt;
  size_t size = static_cast<size_t>(length);
  for (size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) --size;  // padding decodes to zeros
  std::string hex;
  for (size_t i = 0; i < size; ++i) hex += fmt::format("{:02x}", static_cast<unsigned char>(bytes[i]));
  return hex;
}

std::string md5_file_hex(const fs::path& file) {
  std::ifstream stream(file, std::ios::binary);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(context.get(), EVP_md5(), nullptr);
  std::vector<char> buffer(1 << 20);
  while (stream) {
    stream.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    EVP_DigestUpdate(context.get(), buffer.data(), static_cast<size_t>(stream.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context.get(), digest, &length);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

// Keys become local paths: no absolute keys, no "." / ".." segments, no empty segments.
bool safe_key(const std::string& key) {
  if (key.empty() || key.front() == '/') return false;
  size_t start = 0;
  while (start <= key.size()) {
    const size_t end = std::min(key.find('/', start), key.size());
    const std::string segment = key.substr(start, end - start);
    if ((segment.empty() && end != key.size()) || segment == "." || segment == "..") return false;
    start = end + 1;
  }
  return true;
}

[[noreturn]] void fail_status(const Store& store, long status, const std::string& body, const std::string& what) {
  std::string code, message;
  if (store.url.scheme == "s3") {
    auto codes = xml_elements(body, "Code"), messages = xml_elements(body, "Message");
    if (!codes.empty()) code = codes.front();
    if (!messages.empty()) message = xml_unescape(messages.front());
  } else {
    nlohmann::json answer = nlohmann::json::parse(body, nullptr, false);
    if (answer.is_object() && answer.contains("error") && answer["error"].is_object()) {
      message = answer["error"].value("message", "");
    }
  }
  const std::string detail = code.empty() && message.empty() ? std::string()
                                                              : fmt::format(" ({}{}{})", code, code.empty() || message.empty() ? "" : ": ", message);
  const bool s3 = store.url.scheme == "s3";
  if (status == 401 || status == 403) {
    fail_user("{}: access denied when {} (HTTP {}){}; check the credentials ({}) and that they may read bucket '{}'",
              store.text, what, status, detail,
              s3 ? "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN or AWS_PROFILE"
                 : "GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_OAUTH_ACCESS_TOKEN",
              store.url.bucket);
  }
  if (status == 404) {
    fail_user("{}: not found when {} (HTTP 404){}; check the bucket and key", store.text, what, detail);
  }
  if (s3 && (status == 301 || code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed")) {
    fail_user("{}: bucket '{}' is in another region{}; set AWS_REGION to its region", store.text, store.url.bucket,
              detail);
  }
  fail_user("{}: the store answered HTTP {} when {}{}; try again later", store.text, status, what, detail);
}

std::vector<ObjectEntry> list_s3(Store& store, const std::string& prefix) {
  std::vector<ObjectEntry> entries;
  std::optional<std::string> token;
  do {
    // Parameters in sorted order and AWS-encoded: the query SigV4 signs is the one sent.
    std::string query = token ? "continuation-token=" + percent_encode(*token) + "&" : "";
    query += "list-type=2&prefix=" + percent_encode(prefix);
    HttpResponse response = store.http->get(store.base + "/?" + query);
    if (response.status != 200) fail_status(store, response.status, response.body, "listing the bucket");
    for (const std::string& contents : xml_elements(response.body, "Contents")) {
      ObjectEntry entry;
      auto keys = xml_elements(contents, "Key"), sizes = xml_elements(contents, "Size"),
           etags = xml_elements(contents, "ETag");
      if (keys.empty()) continue;
      entry.key = xml_unescape(keys.front());
      entry.size = sizes.empty() ? 0 : std::strtoull(sizes.front().c_str(), nullptr, 10);
      entry.etag = etags.empty() ? std::string() : strip_quotes(xml_unescape(etags.front()));
      if (is_md5_hex(entry.etag)) entry.md5 = entry.etag;  // single-part uploads: the ETag is the MD5
      entries.push_back(std::move(entry));
    }
    token.reset();
    auto truncated = xml_elements(response.body, "IsTruncated");
    auto next = xml_elements(response.body, "NextContinuationToken");
    if (!truncated.empty() && truncated.front() == "true" && !next.empty()) token = xml_unescape(next.front());
  } while (token);
  return entries;
}

std::vector<ObjectEntry> list_gcs(Store& store, const std::string& prefix) {
  std::vector<ObjectEntry> entries;
  std::optional<std::string> token;
  do {
    std::string url = store.base + "/storage/v1/b/" + percent_encode(store.url.bucket) + "/o?prefix=" + percent_encode(prefix);
    if (token) url += "&pageToken=" + percent_encode(*token);
    HttpResponse response = store.http->get(url);
    if (response.status != 200) fail_status(store, response.status, response.body, "listing the bucket");
    nlohmann::json answer = nlohmann::json::parse(response.body, nullptr, false);
    if (answer.is_discarded() || !answer.is_object()) {
      fail_user("{}: the store's listing is not JSON; check STORAGE_EMULATOR_HOST", store.text);
    }
    for (const auto& item : answer.value("items", nlohmann::json::array())) {
      if (!item.is_object() || !item.contains("name")) continue;
      ObjectEntry entry;
      entry.key = item["name"].get<std::string>();
      const auto& size = item.value("size", nlohmann::json("0"));
      entry.size = size.is_string() ? std::strtoull(size.get<std::string>().c_str(), nullptr, 10) : size.get<uint64_t>();
      entry.etag = item.value("etag", item.value("generation", std::string()));
      if (item.contains("md5Hash") && item["md5Hash"].is_string()) entry.md5 = base64_to_hex(item["md5Hash"].get<std::string>());
      if (entry.etag.empty() && entry.md5) entry.etag = *entry.md5;
      entries.push_back(std::move(entry));
    }
    token.reset();
    if (answer.contains("nextPageToken") && answer["nextPageToken"].is_string()) {
      token = answer["nextPageToken"].get<std::string>();
    }
  } while (token);
  return entries;
}

std::string object_url(const Store& store, const std::string& key) {
  if (store.url.scheme == "s3") return store.base + "/" + url_encode_path(key);
  return store.base + "/storage/v1/b/" + percent_encode(store.url.bucket) + "/o/" + percent_encode(key) + "?alt=media";
}

// A cache-safe form of an ETag (file names).
std::string etag_tag(const std::string& etag) {
  std::string tag;
  for (char c : etag) tag += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return tag.substr(0, 80);
}

void fetch_object(Store& store, const ObjectEntry& entry, const fs::path& local) {
  const fs::path etag_file = local.parent_path() / ("." + local.filename().string() + ".etag");
  std::error_code error;
  if (fs::exists(local, error) && fs::file_size(local, error) == entry.size) {
    std::ifstream stream(etag_file);
    std::string cached;
    std::getline(stream, cached);
    if (cached == entry.etag) return;  // the listed version is already here
  }
  fs::create_directories(local.parent_path(), error);
  if (error) fail_user("{}: cannot create {}: {}; check SUROGATE_CACHE", store.text, local.parent_path().string(), error.message());
  const fs::path incomplete =
      local.parent_path() / ("." + local.filename().string() + "." + etag_tag(entry.etag) + ".incomplete");
  const std::string url = object_url(store, entry.key);
  std::fprintf(stderr, "  %s://%s/%s (%llu bytes)\n", store.url.scheme.c_str(), store.url.bucket.c_str(),
               entry.key.c_str(), static_cast<unsigned long long>(entry.size));
  for (int attempt = 1;; ++attempt) {
    uint64_t have = fs::exists(incomplete, error) ? fs::file_size(incomplete, error) : 0;
    if (have > entry.size) {
      fs::remove(incomplete, error);
      have = 0;
    }
    if (have == entry.size && entry.size > 0) break;
    try {
      if (entry.size == 0) {
        write_text_file_atomically(incomplete, "");
        break;
      }
      HttpResponse response = store.http->download(url, incomplete, have, {});
      if (response.status == 416 && attempt < kObjectDownloadAttempts) {
        fs::remove(incomplete, error);
        continue;
      }
      if (response.status != 200 && response.status != 206) {
        fail_status(store, response.status, response.body, "downloading " + entry.key);
      }
      break;
    } catch (const HubInterruptedError& interrupted) {
      if (attempt >= kObjectDownloadAttempts) {
        fail_user("{}; the partial file is kept at {}: run again to resume", interrupted.what(), incomplete.string());
      }
    }
  }
  const uint64_t size = fs::file_size(incomplete, error);
  if (size != entry.size) {
    fs::remove(incomplete, error);
    fail_user("{}: the download of {} has {} bytes but the store lists {}; the partial file was deleted: run again",
              store.text, entry.key, size, entry.size);
  }
  if (entry.md5) {
    const std::string digest = md5_file_hex(incomplete);
    if (digest != *entry.md5) {
      fs::remove(incomplete, error);
      fail_user("{}: the download of {} is corrupt: its MD5 is {} but the store gives {}; the file was deleted: run "
                "again", store.text, entry.key, digest, *entry.md5);
    }
  }
  fs::rename(incomplete, local, error);
  if (error) fail_user("{}: cannot move {} into place: {}", store.text, local.string(), error.message());
  write_text_file_atomically(etag_file, entry.etag + "\n");
}

Store open_store(const ObjectUrl& url, const std::string& text) {
  Store store;
  store.url = url;
  store.text = text;
  if (url.scheme == "s3") {
    S3Settings settings = read_s3_settings(text);
    if (settings.endpoint) {
      store.base = *settings.endpoint + "/" + url.bucket;
      store.host_folder = folder_name_of(*settings.endpoint);
    } else {
      store.base = fmt::format("https://{}.s3.{}.amazonaws.com", url.bucket, settings.signing.region);
      store.host_folder = "s3.amazonaws.com";
    }
    store.http->sign_for_s3(std::move(settings.signing));
  } else {
    GcsSettings settings = read_gcs_settings(text, kTimeoutSeconds);
    store.base = settings.endpoint;
    store.host_folder = folder_name_of(settings.endpoint);
    if (settings.access_token) store.http = std::make_unique<HttpClient>(settings.access_token, kTimeoutSeconds);
  }
  return store;
}

}  // namespace

bool is_object_store_url(const std::string& path) { return path.starts_with("s3://") || path.starts_with("gs://"); }

ObjectUrl parse_object_url(const std::string& url) {
  ObjectUrl parsed;
  const size_t scheme_end = url.find("://");
  parsed.scheme = scheme_end == std::string::npos ? std::string() : url.substr(0, scheme_end);
  if (parsed.scheme != "s3" && parsed.scheme != "gs") {
    fail_user("'{}' is not an s3:// or gs:// URL", url);
  }
  const std::string rest = url.substr(scheme_end + 3);
  const size_t slash = rest.find('/');
  parsed.bucket = rest.substr(0, slash);
  parsed.key = slash == std::string::npos ? std::string() : rest.substr(slash + 1);
  bool valid = parsed.bucket.size() >= 3 && parsed.bucket.size() <= 222;
  for (unsigned char c : parsed.bucket) {
    valid = valid && (std::islower(c) || std::isdigit(c) || c == '-' || c == '.' || c == '_');
  }
  if (!valid) {
    fail_user("'{}': '{}' is not a bucket name (3 to 63 lower-case letters, digits, '-', '.' or '_'); write "
              "{}://BUCKET/KEY", url, parsed.bucket, parsed.scheme);
  }
  if (!parsed.key.empty() && !safe_key(parsed.key.ends_with('/') ? parsed.key.substr(0, parsed.key.size() - 1) : parsed.key)) {
    fail_user("'{}': the key '{}' has an empty, '.' or '..' segment", url, parsed.key);
  }
  return parsed;
}

fs::path fetch_object_store_path(const std::string& text, const std::function<bool(const std::string&)>& wanted) {
  const ObjectUrl url = parse_object_url(text);
  Store store = open_store(url, text);
  const fs::path bucket_folder = cache_root() / url.scheme / store.host_folder / url.bucket;
  const std::string folder_key = url.key.ends_with('/') || url.key.empty() ? url.key : url.key + "/";
  std::vector<ObjectEntry> entries;
  try {
    entries = url.scheme == "s3" ? list_s3(store, url.key) : list_gcs(store, url.key);
  } catch (const HubUnreachableError& unreachable) {
    std::error_code error;
    for (const fs::path& cached : {bucket_folder / url.key, bucket_folder / folder_key}) {
      if (!url.key.empty() && fs::exists(cached, error)) {
        std::fprintf(stderr, "note: %s; using the cached copy of %s in %s\n", unreachable.what(), text.c_str(),
                     cached.c_str());
        return cached;
      }
    }
    fail_user("{}: {} and there is no cached copy; check the endpoint and the network", text, unreachable.what());
  }
  for (const ObjectEntry& entry : entries) {
    if (!entry.key.ends_with('/') && !safe_key(entry.key)) {
      fail_user("{}: the store lists object '{}', which cannot be a local file name", text, entry.key);
    }
  }
  if (!url.key.empty() && !url.key.ends_with('/')) {
    for (const ObjectEntry& entry : entries) {
      if (entry.key == url.key) {
        std::fprintf(stderr, "fetching %s into %s\n", text.c_str(), bucket_folder.c_str());
        fetch_object(store, entry, bucket_folder / entry.key);
        return bucket_folder / entry.key;
      }
    }
  }
  std::vector<ObjectEntry> chosen;
  for (const ObjectEntry& entry : entries) {
    if (entry.key.starts_with(folder_key) && !entry.key.ends_with('/') && wanted(entry.key)) chosen.push_back(entry);
  }
  if (chosen.empty()) {
    fail_user("{}: no object of that name and no data file under '{}' in bucket '{}'{}; check the key", text, folder_key,
              url.bucket, entries.empty() ? "" : fmt::format(" ({} other objects)", entries.size()));
  }
  const fs::path folder = bucket_folder / folder_key;
  std::fprintf(stderr, "fetching %s (%zu objects) into %s\n", text.c_str(), chosen.size(), folder.c_str());
  std::set<fs::path> listed;
  for (const ObjectEntry& entry : chosen) {
    fetch_object(store, entry, bucket_folder / entry.key);
    listed.insert((bucket_folder / entry.key).lexically_normal());
  }
  // Cached objects the store no longer lists would otherwise be read as part of the prefix.
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(folder, error); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_regular_file() && !name.starts_with('.') && listed.count(it->path().lexically_normal()) == 0) {
      fs::remove(it->path(), error);
    }
  }
  return folder;
}

}  // namespace surogate::io
