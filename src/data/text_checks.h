// Small checks on row values used by every formatter, so bad data fails with the row's origin.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "data/row_reader.h"

namespace surogate::data {

// True when `text` is well-formed UTF-8.
bool is_valid_utf8(std::string_view text);

// The string field `field` of a row object; UserError naming the origin when it is missing,
// null (unless `optional`), not a string, or not valid UTF-8. `what` says which option names
// the field ("text_field") for the message.
std::string required_string(const RowValue& object, const std::string& field, const RowOrigin& origin,
                            const std::string& what);
// Like required_string but missing / null give "".
std::string optional_string(const RowValue& object, const std::string& field, const RowOrigin& origin,
                            const std::string& what);

}  // namespace surogate::data
