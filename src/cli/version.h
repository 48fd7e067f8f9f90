#pragma once

#include <string_view>

namespace surogate::cli {

std::string_view surogate_version_string();

}  // namespace surogate::cli
