// The API key check: a request must carry `Authorization: Bearer KEY`. The comparison takes the
// same time wherever the first difference is, so response times do not reveal the key.
#pragma once

#include <string_view>

namespace surogate::serve {

// True when `a` equals `b`; the time depends on the lengths only.
bool constant_time_equal(std::string_view a, std::string_view b);

// True when `authorization` (the header's value) is "Bearer " + key.
bool bearer_matches(std::string_view authorization, std::string_view key);

}  // namespace surogate::serve
