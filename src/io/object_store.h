// Dataset paths in object stores: `s3://bucket/key` and `gs://bucket/key`, a single object or
// every object under a prefix (`s3://bucket/data/` or `s3://bucket/data`: when no object is named
// exactly `data`, the objects under `data/`). The objects are listed (S3 ListObjectsV2, GCS JSON
// API), then downloaded into a local cache that mirrors the bucket:
//   $SUROGATE_CACHE (else $XDG_CACHE_HOME/surogate, else ~/.cache/surogate)
//     /objects/<s3|gs>/<endpoint host>/<bucket>/<key>
// An object whose cached copy has the listed ETag (kept in a hidden .<name>.etag beside it) is
// not downloaded again; a partial download (.<name>.<etag>.incomplete) resumes with a Range
// request; the size is checked, and the MD5 when the store gives one (S3 single-part ETags, GCS
// md5Hash). Of a prefix, only the files the caller reads are fetched, and cached files no longer
// listed are removed. When the store cannot be reached,
// an existing cached copy is used with a note. Requests use libcurl (S3: its SigV4 signing);
// credentials come from io/cloud_credentials.h. Every failure is a UserError naming the URL.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace surogate::io {

bool is_object_store_url(const std::string& path);

struct ObjectUrl {
  std::string scheme;  // "s3" or "gs"
  std::string bucket;
  std::string key;     // may be empty (the whole bucket) or end with '/'
};

// Throws UserError for a malformed URL (no bucket, a bucket name the stores do not allow).
ObjectUrl parse_object_url(const std::string& url);

// The local file (one object) or folder (a prefix) holding the URL's data. Of a prefix, only the
// keys `wanted` accepts are fetched (the data layer passes the file types it reads).
std::filesystem::path fetch_object_store_path(const std::string& url,
                                              const std::function<bool(const std::string&)>& wanted);

}  // namespace surogate::io
