// RFC 3986 percent-encoding, as query strings (S3's signed ListObjectsV2 queries, GCS's listings)
// and OAuth form bodies need it: the unreserved characters A-Z a-z 0-9 - _ . ~ stay, every other
// byte (the '/' too) becomes %XX with upper-case hex.
#pragma once

#include <string>
#include <string_view>

namespace surogate::io {

std::string percent_encode(std::string_view text);

}  // namespace surogate::io
